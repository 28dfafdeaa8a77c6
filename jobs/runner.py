"""The driver every cohort job runs (`jobs.predict`, `jobs.build_graphs`, `jobs.evaluate`): check, lock, plan, run,
repair, consolidate, summarize — with the job-specific parts behind `CohortJob`'s hooks.

    summary = run_job(PredictJob(args), console)

The run, in order:

1. ``job.check()``: every option and input checked before any work (one line, exit 2, for a mistake); then
   ``job.check_llm_endpoint()`` asks the LLM endpoint once (unreachable, key refused, model unknown: one line).
2. Under ``OUT``'s lock: the manifest checked (`jobs.manifest`: other settings, or other code, are refused),
   temporaries of interrupted writes removed, the tasks listed (``job.task_keys``), each task's newest row read from
   the part files (`vista.shared.runs.parts.latest_states`, a few columns) and the run planned (`vista.shared.runs.plan.plan_tasks` with
   the retry policy of `vista.shared.runs.retry`).
3. When there is work: Ray joined (or started), the actors sized (``job.size``: by default `jobs.resources` from the
   sizing options), the tasks ordered (``job.order``), the plan announced (``job.announce``: by default the plan,
   the pool and the model), the job's LLM budget started (`jobs.llm_budget`: one limiter every actor asks), and
   the tasks run (``job.execute``, which streams an actor pool through `CohortJob.stream_pool` or
   `stream_actor_pool`). Then up to `REPAIR_PASSES` passes over tasks whose row was lost with an actor (their
   answers come from the caches).
4. The consolidated files (``job.output_files``) built by a polars scan over the part files, ``job.finish`` (e.g. the
   graph store's manifest, the evaluation report), and ``summary.json`` written and printed.
"""

from __future__ import annotations

import argparse
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
from rich.console import Console

from jobs.actor_base import ActorSettings
from jobs.driver import JobStalled, stream_status
from jobs.llm_budget import BudgetRef, JobBudget, job_budget
from jobs.manifest import check_manifest
from jobs.ray_runtime import LazyRay, RayOptions, RayRuntime
from jobs.resources import ResourcePlan, plan_resources, spread_over_actors
from vista.shared.llm import LLMConfig
from vista.shared.llm.prices import PriceTable
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import LabelTasks, MatchGroups
from vista.shared.runs.accounting import summary_figures
from vista.shared.runs.lock import OutputLock
from vista.shared.runs.parts import (
    TASK_KEYS,
    OutputFile,
    PartConsolidation,
    RowKeys,
    RowState,
    consolidate_parts,
    latest_states,
    remove_stale_temporaries,
    run_llm_rows,
)
from vista.shared.runs.plan import TaskPlan, plan_tasks
from vista.shared.runs.progress import STATUS_ORDER, ProgressPrinter, ProgressTracker
from vista.shared.runs.retry import RetryCounts, kept_note, reruns, retry_policy
from vista.shared.runs.summary import AnsweringLLM, RunSummary
from vista.shared.storage import join

log = logging.getLogger(__name__)

REPAIR_PASSES = 2
"""Extra passes over tasks whose row was lost with an actor (their answers come from the LLM cache)."""


class CohortJob(ABC):
    """One cohort job: what differs between predict, build-graphs and evaluate (see the module docstring)."""

    name: ClassVar[str]
    """The progress prefix and the manifest's job kind: ``predict``, ``build-graphs``, ``evaluate``."""
    output_name: ClassVar[str]
    """The consolidated file under ``OUT`` (`output_files` may write more)."""
    output_schema: ClassVar[pa.Schema]
    keys: ClassVar[RowKeys] = TASK_KEYS
    needs_context: ClassVar[bool] = False
    """Whether the tasks need the model's context window known before they start (`check_llm_endpoint`)."""

    def __init__(self, args: argparse.Namespace, run_id: str):
        self.args = args
        self.run_id = run_id
        self.policy = retry_policy(args)
        self.resources: ResourcePlan | None = None  # set by `size` (None: no LLM, the job sizes its own pool)
        self.cluster_cpus = 0.0  # set by `size`

    # ------------------------------------------------------------------------------------------ hooks
    settings: ActorSettings
    """The actors' settings, made by `check` (their ``out`` and ``llm`` are the job's)."""
    label_tasks: LabelTasks | None = None
    """The ``--labels`` file's tasks, read once by `check` (None: the tasks come from elsewhere)."""

    @property
    def out(self) -> Path | str:
        """The output directory (a path or an object-store URI)."""
        return self.settings.out

    @property
    def llm(self) -> LLMConfig | None:
        """The LLM the tasks call (None: no LLM stage, no budget)."""
        return self.settings.llm

    @abstractmethod
    def check(self) -> None:
        """Every option and input checked before any work (raises `jobs.errors.JobInputError`); sets `settings`."""

    def context_tokens(self) -> int | None:
        """The model's context window when the options name it (for `check_llm_endpoint`)."""
        return None

    def check_llm_endpoint(self) -> None:
        """The LLM settings and the endpoint checked once, on the driver (one line when the key or the model file is
        missing, the endpoint unreachable, the key refused, the model not served, or — `needs_context` — its context
        window unknown); one warning when the model has no price."""
        from vista.shared.llm.endpoint_check import check_endpoint, check_llm, warn_if_unpriced

        llm = self.llm
        if llm is None:
            return
        check_llm(llm)
        check_endpoint(llm, context_tokens=self.context_tokens(), needs_context=self.needs_context)
        warn_if_unpriced(llm)

    @abstractmethod
    def fingerprint(self) -> dict[str, object]:
        """The settings that decide the outputs (see `jobs.manifest`)."""

    @abstractmethod
    def task_keys(self, ray: LazyRay) -> list[TaskKey]:
        """Every task the inputs define (``ray`` joins Ray on first use, for listings that are Ray Data jobs)."""

    def resource_options(self) -> dict[str, object]:
        """What `size` passes to `jobs.resources.plan_resources` beyond the shared sizing options (predict: its
        two-stage pool)."""
        return {"two_stage": False}

    def size(self, runtime: RayRuntime, tasks: int) -> int | None:
        """Plan the actors for ``runtime``'s cluster and ``tasks`` tasks to run (`resources`, read by `announce` and
        `execute`); returns the job's LLM in-flight budget (None: no LLM, the budget's default). By default:
        `jobs.resources` from the sizing options (``--in-flight``, ``--max-concurrency``, ``--actors``, ...), with
        blocks small enough that a small cohort reaches every actor (`spread_over_actors`) unless ``--batch-size``
        says otherwise."""
        args, llm = self.args, self.llm
        self.cluster_cpus = runtime.cpus
        if llm is None:
            return None
        self.resources = plan_resources(
            cluster_cpus=runtime.cpus, backend=llm.backend, in_flight=args.in_flight,
            llm_concurrency=args.max_concurrency, actors=args.actors, actor_cpus=args.actor_cpus,
            patients_per_actor=args.patients_per_actor, batch_size=args.batch_size,
            # `jobs.llm_budget.job_budget` holds the job's in-flight sum; a local Ray the job started cannot grow
            shared_budget=llm.backend != "embedded", fixed_cluster=runtime.started_locally,
            **self.resource_options())
        if args.batch_size is None:
            self.resources = spread_over_actors(self.resources, tasks)
        return self.resources.in_flight

    def order(self, todo: list[TaskKey]) -> tuple[list[TaskKey], float]:
        """The planned tasks in the order they should start, and the seconds deciding it took."""
        return todo, 0.0

    task_sizes: dict[TaskKey, int] | None = None  # set by `order` when it estimates them: the ETA then counts calls

    def match_groups(self) -> MatchGroups | None:
        """The case–control groups ``--limit``/``--sample`` must keep whole (None: the tasks are independent)."""
        if self.label_tasks is None or (self.args.limit is None and self.args.sample is None):
            return None
        return self.label_tasks.groups

    def describe(self) -> str:
        """What the tasks do, in a few words, for the plan line (e.g. the variant and cancer)."""
        return ""

    def pool_clause(self, runtime: RayRuntime, order_s: float) -> str:
        """The plan line's words on the actors (by default from `resources`)."""
        resources = self.resources
        if resources is None:
            return "the job's own actor pool"
        actors = (f"{resources.actors_min}" if resources.actors_min == resources.actors_max
                  else f"{resources.actors_min}-{resources.actors_max}")
        return (f"LLM budget {resources.in_flight} in flight; {actors} patient actor(s) x {resources.actor_cpus:g} CPU "
                f"x {resources.calls_per_actor} calls, {resources.patients_per_actor} patients each, blocks of "
                f"{resources.block_rows}")

    def announce(self, console: Console, plan: TaskPlan, runtime: RayRuntime, retry: RetryCounts, order_s: float) -> None:
        """The lines that say what this run will do: the plan, where and on which actors; the model and the retry
        policy; a warning when the actors cannot all start on the cluster as it is."""
        where = "local Ray" if runtime.started_locally else f"cluster {runtime.address}"
        what = f" ({self.describe()})" if self.describe() else ""
        self.say(console, f"run {self.run_id}: {len(plan.selected)} selected, {plan.skipped} already done, "
                          f"{len(plan.todo)} to run{self.retried_clause(plan, retry)}{what} on {where} "
                          f"({runtime.cpus:g} CPUs): {self.pool_clause(runtime, order_s)}")
        llm = self.llm
        model = f"model {llm.model} ({llm.backend}, {llm.endpoint_host})" if llm is not None else "no LLM stage"
        self.say(console, f"{model}; retry policy: {self.policy}")
        resources = self.resources
        if resources is not None and runtime.cpus and resources.cpus_at_start > runtime.cpus:
            self.say(console, f"warning: the actors ask for {resources.cpus_at_start:g} CPUs at start, the cluster has "
                              f"{runtime.cpus:g}; they will start as CPUs become available (autoscaling) or the job "
                              "stops after --startup-timeout")

    @abstractmethod
    def execute(self, pending: list[TaskKey], budget: BudgetRef | None, tracker: ProgressTracker) -> None:
        """Run ``pending`` (in that order) on the actors; their rows land in the part files."""

    def pool_strategy(self):
        """Ray Data's pool for the sized run: from what fits the cluster now up to what the budget needs."""
        from ray.data import ActorPoolStrategy

        resources = self.resources
        return ActorPoolStrategy(min_size=resources.actors_min, max_size=resources.actors_max,
                                 max_tasks_in_flight_per_actor=resources.tasks_per_actor,
                                 max_concurrent_calls_per_actor=resources.tasks_per_actor)

    def stream_pool(self, dataset, actor: type, constructor_kwargs: dict[str, object],
                    tracker: ProgressTracker) -> None:
        """`stream_actor_pool` over the pool `size` planned (`pool_strategy`, its CPUs, memory and blocks)."""
        resources = self.resources
        stream_actor_pool(self, dataset, actor, constructor_kwargs, compute=self.pool_strategy(),
                          num_cpus=resources.actor_cpus, memory=resources.actor_memory,
                          block_rows=resources.block_rows, tracker=tracker)

    def stall_hint(self, cpus: float, memory: int | None) -> str:
        """What to check when no task finishes (the watchdog's line): the endpoint, room for the actors."""
        llm = self.llm
        where = "" if llm is None else (
            f"that {llm.base_url or ('the embedded model' if llm.backend == 'embedded' else 'the OpenAI API')} answers and ")
        size = f"{cpus:g} CPU" + (f", {memory / 1024**3:.1f} GiB" if memory else "")
        return (f"check {where}that the cluster has room for the actors ({size} each); raise --stall-timeout if "
                "single patients take longer")

    def answering_llm(self, seen: dict[str, list[str]]) -> AnsweringLLM | None:
        """Which LLM answered this run (the summary's ``llm``): the settings' LLM and what this run's rows record
        (``seen``: `vista.shared.runs.parts.RunLLMRows.answered_by`)."""
        llm = getattr(getattr(self, "settings", None), "llm", None)
        if llm is None:
            return None
        return AnsweringLLM(backend=llm.backend, endpoint_host=llm.endpoint_host, model=llm.model,
                            backends=seen["backend"], served_models=seen["served_model"])

    def output_files(self) -> list[OutputFile]:
        """The consolidated files, the one holding every task's row first: by default ``output_name`` with
        ``output_schema``."""
        return [OutputFile(Path(self.output_name).stem, join(self.out, self.output_name), self.output_schema)]

    def finish(self, report: PartConsolidation, selected: list[TaskKey]) -> dict[str, str]:
        """After consolidation: more outputs to name in the summary (e.g. the graph store's manifest, the
        evaluation report of the ``selected`` tasks)."""
        return {}

    def summary_update(self) -> dict[str, object]:
        """Job-specific `RunSummary` fields (e.g. predict's ``meds_dev_predictions_dir``)."""
        return {}

    def ray_options(self) -> RayOptions:
        return RayOptions.from_args(self.args, job=self.name)

    # ------------------------------------------------------------------------------------------ helpers
    def say(self, console: Console, text: str) -> None:
        console.print(f"[{self.name}] {text}", markup=False, highlight=False, soft_wrap=True)

    def retried_clause(self, plan: TaskPlan, retry: RetryCounts) -> str:
        if not plan.retried:
            return ""
        return f" (retrying {plan.retried}: " + ", ".join(f"{n} {k}" for k, n in sorted(retry.retried.items())) + ")"


def run_job(job: CohortJob, console: Console | None = None) -> RunSummary:
    """The whole job (see the module docstring); returns its summary (also printed and written to ``OUT``)."""
    console = console or Console(width=110)
    started_at = datetime.now().astimezone()
    args = job.args
    job.check()
    with LazyRay(job.ray_options()) as ray:
        keys = job.task_keys(ray)
        if _has_work(job, keys):  # Ray starts in the background while the endpoint is asked and the run planned
            ray.start()
        job.check_llm_endpoint()
        out = job.out
        with OutputLock(out):
            check_manifest(out, job.name, job.fingerprint(), allow_code_change=args.resume_with_changed_code)
            remove_stale_temporaries(out)
            budget_figures = None
            passes = 0
            states = latest_states(out, job.keys)
            groups = job.match_groups()
            plan = plan_tasks(keys, states, limit=args.limit, sample=args.sample, seed=args.seed,
                              rerun=lambda state: reruns(state, job.policy), groups=groups)
            if groups is not None:
                chosen = f"--limit {args.limit}" if args.limit is not None else f"--sample {args.sample}"
                job.say(console, f"{chosen}: {len(plan.selected)} task(s), {groups.describe(plan.selected)} "
                                 "(the label file's case–control matching is kept)")
            retry = RetryCounts.of(plan.selected, states, job.policy)
            tracker = ProgressTracker(job.name, to_run=len(plan.todo), skipped_before=plan.skipped)
            if plan.todo:
                ordered, order_s = job.order(plan.todo)  # (while Ray may still be starting)
                tracker.expect_work(job.task_sizes or {})
                runtime = ray.runtime()
                in_flight = job.size(runtime, len(plan.todo))
                job.announce(console, plan, runtime, retry, order_s)
                with _budget(job, in_flight, tracker) as budget:
                    passes = _run_passes(job, ordered, budget.ref if budget is not None else None, tracker, console)
                budget_figures = budget.final if budget is not None else None
            else:
                job.say(console, f"run {job.run_id}: all {len(plan.selected)} selected tasks already have an output; "
                                 f"consolidating only{kept_note(retry, job.policy)}")
            ray.close()  # the cluster's CPUs and memory are free before the consolidation reads the part files
            report = consolidate_parts(out, job.output_files(), plan.selected, keys=job.keys)
            outputs = {**report.paths, **job.finish(report, plan.selected)}
            statuses, reasons = _this_run(latest_states(out, job.keys) if plan.todo else {}, job.run_id)
            llm_rows = run_llm_rows(out, job.run_id, job.keys)  # one scan: who answered, and what the kept rows spent
            summary = RunSummary.from_tracker(
                tracker, run_id=job.run_id, started_at=started_at, selected=len(plan.selected), skipped=plan.skipped,
                retried=plan.retried, complete=report.complete, outputs=outputs,
                totals=dict(sorted(report.statuses.items())),
            ).model_copy(update={
                "retry_policy": job.policy, "retried_by_class": dict(sorted(retry.retried.items())),
                "kept_by_class": dict(sorted(retry.kept.items())), "repair_passes": passes,
                "consolidated_rows": report.rows, "output_rows": report.file_rows,
                "consolidation_s": round(report.seconds, 3), "llm_budget": budget_figures, "llm": job.answering_llm(llm_rows.answered_by),
                # what this run's rows say (a task redone after an actor lost its row counts once)
                "ran": sum(statuses.values()), "by_status": statuses, "failed_by_reason": reasons,
                # tokens and cost: what the endpoint answered (the budget's ledger), set against the rows kept
                **summary_figures(budget_figures, llm_rows.kept, llm=job.llm, out=out),
                **job.summary_update(),
            })
            summary.write(out)
    summary.print(console)
    _closing_lines(job, console, plan, retry, report)
    return summary


def _has_work(job: CohortJob, keys: list[TaskKey]) -> bool:
    """Whether some task of ``keys`` has no row yet or one to rerun, as the part files say before the lock is taken
    (a hint for starting Ray early; the plan made under the lock decides)."""
    states = latest_states(job.out, job.keys)
    return any(key not in states or reruns(states[key], job.policy) for key in keys)


@contextmanager
def _budget(job: CohortJob, in_flight: int | None, tracker: ProgressTracker) -> Iterator[JobBudget | None]:
    """The job's LLM budget for the run (None without an LLM); the progress line reads its live figures."""
    llm = job.llm
    if llm is None:
        yield None
        return
    with job_budget(llm, run_id=job.run_id, in_flight=in_flight, requests_per_s=job.args.requests_per_second,
                    tokens_per_min=job.args.tokens_per_minute) as budget:
        if budget is not None:
            prices = PriceTable.load(llm.prices_path)
            tracker.live_source = lambda: budget.live(prices, llm.model)
        yield budget


def _run_passes(job: CohortJob, ordered: list[TaskKey], budget: BudgetRef | None, tracker: ProgressTracker,
                console: Console) -> int:
    """Run the planned tasks; then, up to `REPAIR_PASSES` times, those whose row an actor lost. Returns the repairs."""
    pending = ordered
    for repair in range(REPAIR_PASSES + 1):
        job.execute(pending, budget, tracker)
        states = latest_states(job.out, job.keys)
        lost = [key for key in pending if key not in states or states[key].run_id != job.run_id]
        if not lost:
            return repair
        if repair == REPAIR_PASSES:
            break
        job.say(console, f"{len(lost)} finished task(s) lost their row with an actor; running them again (their LLM "
                         "answers come from the cache)")
        pending = lost
    return REPAIR_PASSES


def _this_run(states: dict[TaskKey, RowState], run_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """Statuses and failure reasons of the tasks whose newest row this run wrote."""
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for state in states.values():
        if state.run_id == run_id:
            statuses[state.status] += 1
            if state.status in ("failed", "error"):
                reasons[state.error_kind or "unknown"] += 1
    return {s: statuses[s] for s in STATUS_ORDER if statuses[s]}, dict(sorted(reasons.items()))


def _closing_lines(job: CohortJob, console: Console, plan: TaskPlan, retry: RetryCounts,
                   report: PartConsolidation) -> None:
    if plan.todo and retry.kept:
        console.print(f"[{job.name}]{kept_note(retry, job.policy)}", markup=False, highlight=False, soft_wrap=True)
    not_ok = sum(n for status, n in report.statuses.items() if status != "ok")
    if not_ok:
        job.say(console, f"{not_ok} of {len(plan.selected)} selected tasks ended in error or failure; their "
                         f"rows in {report.path} say why")
    if report.missing:
        job.say(console, f"{len(report.missing)} selected tasks have no output yet; rerun the same command to finish")


def stream_actor_pool(job: CohortJob, dataset, actor: type, constructor_kwargs: dict[str, object], *, compute,
                      num_cpus: float, memory: int | None, block_rows: int, tracker: ProgressTracker) -> None:
    """Hand ``dataset``'s task blocks to a pool of ``actor`` and count their status rows as they come.

    Ray Data fails, naming the cause, when no actor starts within ``--startup-timeout``; the no-progress watchdog
    stops the job (exit 4) when no task finishes for ``--stall-timeout`` seconds (default ``--patient-timeout``
    + 600). Both lines end with what to check (``job.stall_hint``).
    """
    from ray.data import DataContext
    from ray.exceptions import GetTimeoutError

    args = job.args
    DataContext.get_current().wait_for_min_actors_s = int(args.startup_timeout)
    results = dataset.map_batches(actor, fn_constructor_kwargs=constructor_kwargs, batch_size=block_rows,
                                  batch_format="pyarrow", compute=compute, num_cpus=num_cpus,
                                  **({"memory": memory} if memory else {}))
    stall = args.stall_timeout or (args.patient_timeout + 600.0)
    with ProgressPrinter(tracker, interval_s=args.progress_every):
        try:
            stream_status(results, tracker, stall_timeout_s=stall, stall_hint=lambda: job.stall_hint(num_cpus, memory))
        except GetTimeoutError as exc:  # Ray Data waited --startup-timeout for the pool's first actors
            raise JobStalled(f"[{job.name}] stopped: no actor started within --startup-timeout "
                             f"{args.startup_timeout:g} s; {job.stall_hint(num_cpus, memory)}") from exc


def sized_settings(settings: ActorSettings, resources: ResourcePlan, budget: BudgetRef | None) -> ActorSettings:
    """The actors' settings for a run sized by ``resources``: their gateway's concurrency, the embedded model's
    threads, their patients at once, and the job's budget."""
    llm = settings.llm.with_overrides({"max_concurrency": resources.calls_per_actor})
    if resources.model_threads is not None and llm.threads is None:
        llm = llm.with_overrides({"threads": resources.model_threads})
    return settings.model_copy(update={"llm": llm, "patients_per_actor": resources.patients_per_actor,
                                       "llm_budget": budget})


def check_common_options(args: argparse.Namespace) -> None:
    """The options every cohort job shares, checked up front (`JobInputError` naming the first bad one)."""
    from vista.shared.runs.errors import JobInputError

    for flag, value in {"--limit": args.limit, "--sample": args.sample, "--actors": args.actors,
                        "--patients-per-actor": args.patients_per_actor, "--batch-size": args.batch_size,
                        "--in-flight": args.in_flight, "--flush-rows": args.flush_rows}.items():
        if value is not None and value < 1:
            raise JobInputError(f"{flag} must be at least 1, not {value}")
    for flag, value in (("--flush-seconds", args.flush_seconds), ("--stall-timeout", args.stall_timeout),
                        ("--startup-timeout", args.startup_timeout), ("--patient-timeout", args.patient_timeout),
                        ("--actor-cpus", args.actor_cpus)):
        if value is not None and value <= 0:
            raise JobInputError(f"{flag} must be positive, not {value}")
    retry_policy(args)
