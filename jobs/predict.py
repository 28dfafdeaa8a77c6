"""predict: cohort labels + a MEDS dataset -> one prediction per patient, on Ray, restartable without paying twice.

    python -m jobs.predict --labels COHORT/labels/test.parquet --dataset MEDS --out out/predict-lung \\
        [--variant one_stage|two_stage|single_agent] [--cancer lung | --any-cancer] \\
        [--backend openai --base-url http://HOST:8000/v1 --model NAME] [--in-flight 64] [--limit N | --sample N]

How it runs. The driver reads the task keys of the label file (subject_id, prediction_time: a few MB for 100,000
patients), reads which tasks already have a row in ``--out`` (four columns of the part files) and plans the rest,
longest first (`jobs.tasks.schedule`: the chain length is estimated from each subject's MEDS rows before its
prediction time, so the longest chains never start last). Ray Data hands the planned tasks, in that order and in
small blocks, to an autoscaling pool of patient actors sized from the job's LLM budget (`jobs.resources`:
``--in-flight`` requests at once over the job, ``--max-concurrency`` per actor). Each actor reads its patients' rows
itself with the targeted MEDS reader (parquet statistics pick the shards and row groups; patients of one block are
neighbours in subject order), so no MEDS row goes through the driver or a shuffle. An actor starts a patient as
soon as one of its slots frees (`jobs.predict_actor`: an async generator UDF, several blocks in flight per actor,
no per-block barrier), writes finished rows to parquet part files under ``OUT/rows/`` and returns one status row
per patient, from which the driver prints progress. A watchdog stops the job with one line (exit 4) when no
patient finishes for ``--stall-timeout`` seconds; Ray Data fails fast when the first actors cannot start within
``--startup-timeout``.

Two-stage: the preprocessor agents run in their own actor pool (``--preprocess-actors``); a
patient actor sends its chunks' filter calls there and awaits them (no blocking ``ray.get``), so one patient's
chunks are filtered in parallel across the cluster and its chain starts as soon as they are back — without the
dataset-wide barrier an "explode chunks -> groupby patient" pipeline would impose. ``--preprocess-actors 0`` runs
the filters in the patient actors.

Resume and retries. A task's newest row in the part files is its output. Restarting the same command after any
interruption skips tasks that have a row and runs the rest; with the LLM response cache (``<out>/llm_cache`` by
default) calls already answered cost nothing, so rows an actor had not written when it was killed are redone for
free. Rows that are not ok carry a retry class (`trajonco.prediction_rows.retry_class`): by default the next run runs
again the tasks whose failure was transient (rate limit, timeout, server error, connection) and keeps those whose
failure is permanent (bad input, answers that never validated); ``--retry all`` or ``--retry none`` change that.
Each run ends with ``predictions.parquet`` (one row per task with a row — of this run's selection and of earlier
runs: a smaller ``--limit`` never drops rows; MEDS-DEV's prediction columns plus risk, trajectory, evidence with
provenance, usage, latency, status, error, retry class), built by a polars scan over the part files, and
``summary.json``.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from rich.console import Console

from jobs.driver import JobStalled, job_main, new_run_id, stream_status, task_dataset
from jobs.errors import JobInputError
from jobs.job_gateway import warn_if_unpriced
from jobs.llm_budget import job_budget
from jobs.llm_options import answer_fields, check_endpoint, check_llm, llm_config
from jobs.manifest import check_manifest
from jobs.outputs import OutputLock
from jobs.patient_loader import coding_profile_for
from jobs.predict_actor import PredictActor, PredictSettings
from jobs.predict_options import build_parser
from jobs.progress import ProgressPrinter, ProgressTracker
from jobs.ray_runtime import RayOptions, connect, shutdown
from jobs.resources import ResourcePlan, plan_resources
from jobs.row_parts import RowState, consolidate_parts, latest_states, remove_stale_temporaries
from jobs.summary import RunSummary
from jobs.tasks import (
    PREDICTION_TIME,
    SUBJECT_ID,
    TaskKey,
    TaskPlan,
    estimate_lengths,
    keys_table,
    plan_tasks,
    read_label_tasks,
    schedule,
    task_keys,
)
from trajonco.prediction_rows import PREDICTION_SCHEMA
from vista.cli_kit import check_output_dir
from vista.llm.prices import PriceTable
from vista.storage import join, normalize

log = logging.getLogger("jobs.predict")

REPAIR_PASSES = 2
"""Extra passes over tasks whose row was lost with an actor (their answers come from the LLM cache)."""


def retry_policy(args: argparse.Namespace) -> str:
    if args.retry_failed and args.retry not in (None, "all"):
        raise JobInputError(f"--retry-failed means --retry all; it contradicts --retry {args.retry}")
    return "all" if args.retry_failed else (args.retry or "transient")


def reruns(state: RowState, policy: str) -> bool:
    """Whether a task whose newest row is ``state`` runs again under the retry ``policy``.

    >>> failed = RowState("failed", "transient")
    >>> reruns(failed, "transient"), reruns(RowState("partial", "permanent"), "transient"), reruns(failed, "none")
    (True, False, False)
    >>> reruns(RowState("partial", "permanent"), "all"), reruns(RowState("ok", None), "all")
    (True, False)
    """
    if state.status == "ok" or policy == "none":
        return False
    return policy == "all" or state.retry_class == "transient"


def horizon_days(args: argparse.Namespace) -> int:
    """The prediction horizon: ``--horizon-days``, else the gap of the cohort the labels come from, else 365; a
    horizon that differs from the cohort's gap is said (the agents would be asked about another window)."""
    from trajonco.cohorts.manifest import cohort_gap_days
    from trajonco.pipeline import PipelineConfig

    gap = cohort_gap_days(args.labels)
    if args.horizon_days is None:
        return gap if gap is not None else PipelineConfig().horizon_days
    if gap is not None and gap != args.horizon_days:
        log.warning("--horizon-days %d differs from the gap of the cohort of %s (%d days): the agents are asked about "
                    "another window than the labels describe", args.horizon_days, args.labels, gap)
    return args.horizon_days


def build_settings(args: argparse.Namespace, run_id: str) -> PredictSettings:
    from trajonco.pipeline import PipelineConfig

    pipeline = PipelineConfig(
        variant=args.variant, cancer=args.cancer, horizon_days=horizon_days(args), chunk_tokens=args.chunk_tokens,
        memory_k=args.memory_k, cancer_hints=args.cancer_hints, output_limits=args.output_limits,
        context_tokens=args.context_tokens, truncate_tokens=args.truncate_tokens, part_numbers=args.part_numbers,
        any_cancer_mode=args.any_cancer_mode, answer_tokens=args.answer_budget,
    )
    return PredictSettings(
        dataset=normalize(args.dataset), coding_profile=coding_profile_for(args.dataset, args.coding_profile),
        out=normalize(args.out), pipeline=pipeline, any_cancer=args.any_cancer,
        llm=llm_config(args), threshold=args.threshold, patient_timeout_s=args.patient_timeout,
        patients_per_actor=args.patients_per_actor or 1, flush_rows=args.flush_rows, flush_s=args.flush_seconds,
        run_id=run_id,
    )


def fingerprint(settings: PredictSettings, labels: Path | str) -> dict[str, object]:
    """The settings that decide the outputs (see `jobs.manifest`)."""
    return {
        "labels": normalize(labels), "dataset": str(settings.dataset), "coding_profile": settings.coding_profile,
        "pipeline": settings.pipeline.model_dump(mode="json"), "any_cancer": settings.any_cancer,
        "threshold": settings.threshold, "llm": answer_fields(settings.llm),
    }


def _resources(args: argparse.Namespace, settings: PredictSettings, cluster_cpus: float) -> ResourcePlan:
    return plan_resources(
        cluster_cpus=cluster_cpus, backend=settings.llm.backend, two_stage=settings.pipeline.variant.value == "two_stage",
        in_flight=args.in_flight, llm_concurrency=args.max_concurrency, actors=args.actors, actor_cpus=args.actor_cpus,
        patients_per_actor=args.patients_per_actor, batch_size=args.batch_size,
        preprocess_actors=args.preprocess_actors, preprocess_cpus=args.preprocess_cpus,
        shared_budget=settings.llm.backend != "embedded",  # `jobs.llm_budget.job_budget` holds the job's in-flight sum
    )


def _check_inputs(args: argparse.Namespace) -> None:
    from vista.meds.reader import MedsDataset

    for flag, value in (("--limit", args.limit), ("--sample", args.sample), ("--actors", args.actors),
                        ("--patients-per-actor", args.patients_per_actor), ("--batch-size", args.batch_size),
                        ("--in-flight", args.in_flight), ("--flush-rows", args.flush_rows)):
        if value is not None and value < 1:
            raise JobInputError(f"{flag} must be at least 1, not {value}")
    if args.preprocess_actors is not None and args.preprocess_actors < 0:
        raise JobInputError(f"--preprocess-actors must be 0 or more, not {args.preprocess_actors}")
    for flag, value in (("--flush-seconds", args.flush_seconds), ("--stall-timeout", args.stall_timeout),
                        ("--startup-timeout", args.startup_timeout), ("--patient-timeout", args.patient_timeout)):
        if value is not None and value <= 0:
            raise JobInputError(f"{flag} must be positive, not {value}")
    if not 0.0 <= args.threshold <= 1.0:
        raise JobInputError(f"--threshold must be between 0 and 1, not {args.threshold}")
    retry_policy(args)
    check_output_dir(args.out, resumable=True)  # a file, or a directory nobody may write, fails before any work
    MedsDataset(args.dataset)  # a missing or empty dataset fails here, naming the path


@dataclass(slots=True)
class RetryCounts:
    """What the retry policy did with the selected tasks that had a row that is not ok."""

    retried: Counter[str] = field(default_factory=Counter)  # by retry class
    kept: Counter[str] = field(default_factory=Counter)  # by retry class (None: rows written before retry classes)

    @classmethod
    def of(cls, selected: list[TaskKey], states: dict[TaskKey, RowState], policy: str) -> RetryCounts:
        counts = cls()
        for key in selected:
            state = states.get(key)
            if state is None or state.status == "ok":
                continue
            (counts.retried if reruns(state, policy) else counts.kept)[state.retry_class or "unclassified"] += 1
        return counts


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job; returns its summary (also printed and written to ``OUT/summary.json``)."""
    console = console or Console(width=110)
    started_at = datetime.now().astimezone()
    run_id = new_run_id()
    _check_inputs(args)
    policy = retry_policy(args)
    tasks = read_label_tasks(args.labels)
    settings = build_settings(args, run_id)
    check_llm(settings.llm)
    check_endpoint(settings.llm, context_tokens=settings.pipeline.context_tokens, needs_context=True)  # one line if not
    warn_if_unpriced(settings.llm)
    out = settings.out
    with OutputLock(out):
        check_manifest(out, "predict", fingerprint(settings, args.labels),
                       allow_code_change=args.resume_with_changed_code)
        remove_stale_temporaries(out)
        states = latest_states(out)
        plan = plan_tasks(task_keys(tasks), states, limit=args.limit, sample=args.sample, seed=args.seed,
                          rerun=lambda state: reruns(state, policy))
        retry = RetryCounts.of(plan.selected, states, policy)
        tracker = ProgressTracker("predict", to_run=len(plan.todo), skipped_before=plan.skipped)
        passes = 0
        budget_figures = None
        if plan.todo:
            runtime = connect(RayOptions.from_args(args))
            try:
                resources = _resources(args, settings, runtime.cpus)
                ordered, order_s = _order(args, settings, plan.todo)
                _announce(console, run_id, plan, settings, resources, runtime, retry, policy, order_s)
                with job_budget(settings.llm, run_id=run_id, in_flight=resources.in_flight,
                                requests_per_s=args.requests_per_second, tokens_per_min=args.tokens_per_minute) as budget:
                    # every actor and preprocessor asks the job's budget; its figures stay in budget.final
                    settings = settings.model_copy(update={"llm_budget": budget.ref if budget else None})
                    if budget is not None:
                        prices = PriceTable.load(settings.llm.prices_path)
                        tracker.live_source = lambda: budget.live(prices, settings.llm.model)
                    passes = _run_passes(args, settings, resources, tasks, ordered, tracker, console)
                budget_figures = budget.final if budget is not None else None
            finally:
                shutdown(runtime)
        else:
            console.print(f"[predict] run {run_id}: all {len(plan.selected)} selected tasks already have an output; "
                          f"consolidating only{_kept_note(retry, policy)}", markup=False, highlight=False, soft_wrap=True)
        report = consolidate_parts(out, join(out, "predictions.parquet"), plan.selected, schema=PREDICTION_SCHEMA)
        ran = _this_run(latest_states(out) if plan.todo else {}, run_id)
        summary = RunSummary.from_tracker(
            tracker, run_id=run_id, started_at=started_at, selected=len(plan.selected), skipped=plan.skipped,
            retried=plan.retried, complete=report.complete, outputs={"predictions": str(report.path)},
            totals=dict(sorted(report.statuses.items())),
        ).model_copy(update={
            "retry_policy": policy, "retried_by_class": dict(sorted(retry.retried.items())),
            "kept_by_class": dict(sorted(retry.kept.items())), "repair_passes": passes,
            "consolidated_rows": report.rows, "consolidation_s": round(report.seconds, 3), "llm_budget": budget_figures,
            # what this run's rows say (a task redone after an actor lost its row counts once)
            "ran": sum(ran[0].values()), "by_status": ran[0], "failed_by_reason": ran[1],
        })
        summary.write(out)
    summary.print(console)
    if plan.todo and retry.kept:
        console.print(f"[predict]{_kept_note(retry, policy)}", markup=False, highlight=False, soft_wrap=True)
    if report.missing:
        console.print(f"[predict] {len(report.missing)} selected tasks have no output yet; rerun the same command to finish",
                      markup=False, soft_wrap=True)
    return summary


def _this_run(states: dict[TaskKey, RowState], run_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """Statuses and failure reasons of the tasks whose newest row this run wrote."""
    from jobs.progress import STATUS_ORDER

    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for state in states.values():
        if state.run_id == run_id:
            statuses[state.status] += 1
            if state.status in ("failed", "error"):
                reasons[state.error_kind or "unknown"] += 1
    return {s: statuses[s] for s in STATUS_ORDER if statuses[s]}, dict(sorted(reasons.items()))


def _kept_note(retry: RetryCounts, policy: str) -> str:
    if not retry.kept:
        return ""
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(retry.kept.items()))
    hint = "rerun with --retry all to run them again" if policy != "all" else ""
    return f"; {sum(retry.kept.values())} of them are failures kept by --retry {policy} ({kinds}){'; ' + hint if hint else ''}"


def _order(args: argparse.Namespace, settings: PredictSettings, todo: list[TaskKey]) -> tuple[list[TaskKey], float]:
    """The planned tasks in the order they should start, and the seconds the estimate took."""
    if args.order == "key":
        return sorted(todo, key=TaskKey.sort_key), 0.0
    started = time.perf_counter()
    lengths = estimate_lengths(settings.dataset, todo)
    return schedule(todo, lengths), time.perf_counter() - started


def _announce(console: Console, run_id: str, plan: TaskPlan, settings: PredictSettings, resources: ResourcePlan,
              runtime, retry: RetryCounts, policy: str, order_s: float) -> None:
    where = "local Ray" if runtime.started_locally else f"cluster {runtime.address}"
    llm = settings.llm
    endpoint = llm.base_url or ("in-process" if llm.backend == "embedded" else "api.openai.com")
    actors = (f"{resources.actors_min}" if resources.actors_min == resources.actors_max
              else f"{resources.actors_min}-{resources.actors_max}")
    pool = (f", {resources.preprocess_actors} preprocessor actor(s) x {resources.preprocess_cpus:g} CPU x "
            f"{resources.preprocess_calls} calls" if resources.preprocess_actors else "")
    retried = (f" (retrying {plan.retried}: " + ", ".join(f"{n} {k}" for k, n in sorted(retry.retried.items())) + ")"
               if plan.retried else "")
    order = f"; longest first ({order_s:.1f} s to estimate)" if order_s else "; in key order"
    console.print(
        f"[predict] run {run_id}: {len(plan.selected)} selected, {plan.skipped} already done, {len(plan.todo)} to run"
        f"{retried} ({settings.pipeline.variant.value}, {'any cancer' if settings.any_cancer else settings.pipeline.cancer}) "
        f"on {where} ({runtime.cpus:g} CPUs): LLM budget {resources.in_flight} in flight; {actors} patient actor(s) x "
        f"{resources.actor_cpus:g} CPU x {resources.calls_per_actor} calls, {resources.patients_per_actor} patients "
        f"each, blocks of {resources.block_rows}{pool}{order}",
        markup=False, highlight=False, soft_wrap=True,
    )
    console.print(f"[predict] model {llm.model} ({llm.backend}, {endpoint}); retry policy: {policy}",
                  markup=False, highlight=False, soft_wrap=True)
    if runtime.cpus and resources.cpus_at_start > runtime.cpus:
        console.print(f"[predict] warning: the actors ask for {resources.cpus_at_start:g} CPUs at start, the cluster has "
                      f"{runtime.cpus:g}; they will start as CPUs become available (autoscaling) or the job stops after "
                      "--startup-timeout", markup=False, soft_wrap=True)


def _work_table(tasks: pa.Table, ordered: list[TaskKey]) -> pa.Table:
    """The label rows of ``ordered`` (with their labels), in that order."""
    order = keys_table(ordered).append_column("_order", pa.array(range(len(ordered)), pa.int64()))
    joined = tasks.join(order, keys=[SUBJECT_ID, PREDICTION_TIME], join_type="inner")
    return joined.sort_by("_order").drop_columns(["_order"])


def _run_passes(args: argparse.Namespace, settings: PredictSettings, resources: ResourcePlan, tasks: pa.Table,
                ordered: list[TaskKey], tracker: ProgressTracker, console: Console) -> int:
    """Run the planned tasks; then, up to `REPAIR_PASSES` times, those whose row an actor lost. Returns the repairs."""
    pending = ordered
    for repair in range(REPAIR_PASSES + 1):
        _execute(args, settings, resources, _work_table(tasks, pending), tracker)
        states = latest_states(settings.out)
        lost = [key for key in pending if key not in states or states[key].run_id != settings.run_id]
        if not lost:
            return repair
        if repair == REPAIR_PASSES:
            break
        console.print(f"[predict] {len(lost)} finished task(s) lost their row with an actor; running them again "
                      "(their LLM answers come from the cache)", markup=False, highlight=False, soft_wrap=True)
        pending = lost
    return REPAIR_PASSES


def _execute(args: argparse.Namespace, settings: PredictSettings, resources: ResourcePlan, work: pa.Table,
             tracker: ProgressTracker) -> None:
    from ray.data import ActorPoolStrategy, DataContext
    from ray.exceptions import GetTimeoutError

    from jobs.preprocess_pool import PreprocessorPool

    llm = settings.llm.with_overrides({"max_concurrency": resources.calls_per_actor})
    if resources.model_threads is not None and llm.threads is None:
        llm = llm.with_overrides({"threads": resources.model_threads})
    settings = settings.model_copy(update={"llm": llm, "patients_per_actor": resources.patients_per_actor})
    context = DataContext.get_current()
    context.wait_for_min_actors_s = int(args.startup_timeout)  # fail, naming the cause, when no actor can start
    pool = None
    try:
        if resources.preprocess_actors:
            timeout = args.stage_timeout or (llm.retry_budget_s + llm.timeout_s + 30.0)
            pool_llm = llm.with_overrides({"max_concurrency": resources.preprocess_calls})
            pool = PreprocessorPool.start(pool_llm, size=resources.preprocess_actors, num_cpus=resources.preprocess_cpus,
                                          timeout_s=timeout, job_id=settings.run_id, concurrency=resources.preprocess_calls,
                                          budget=settings.llm_budget)
            try:
                pool.wait_ready(timeout_s=args.startup_timeout)
            except GetTimeoutError as exc:
                raise JobStalled(f"[predict] stopped: the preprocessor actors did not start within --startup-timeout "
                                 f"{args.startup_timeout:g} s (each asks {resources.preprocess_cpus:g} CPU); check that "
                                 "the cluster has room for them") from exc
        remote_args = {"memory": resources.actor_memory} if resources.actor_memory else {}
        head = 2 * resources.patients_per_actor * resources.actors_max  # the longest tasks, in small blocks
        results = task_dataset(work, resources.block_rows, head_rows=head).map_batches(
            PredictActor,
            fn_constructor_kwargs={"settings": settings, "pool": pool},
            batch_size=resources.block_rows,
            batch_format="pyarrow",
            compute=ActorPoolStrategy(min_size=resources.actors_min, max_size=resources.actors_max,
                                      max_tasks_in_flight_per_actor=resources.tasks_per_actor,
                                      max_concurrent_calls_per_actor=resources.tasks_per_actor),
            num_cpus=resources.actor_cpus,
            **remote_args,
        )
        stall = args.stall_timeout or (args.patient_timeout + 600.0)
        with ProgressPrinter(tracker, interval_s=args.progress_every):
            try:
                stream_status(results, tracker, stall_timeout_s=stall,
                              stall_hint=lambda: _stall_hint(settings, resources))
            except GetTimeoutError as exc:  # Ray Data waited --startup-timeout for the pool's first actors
                raise JobStalled(f"[predict] stopped: no patient actor started within --startup-timeout "
                                 f"{args.startup_timeout:g} s; {_stall_hint(settings, resources)}") from exc
    finally:
        if pool is not None:
            pool.shutdown()


def _stall_hint(settings: PredictSettings, resources: ResourcePlan) -> str:
    llm = settings.llm
    memory = f", {resources.actor_memory / 1024**3:.1f} GiB" if resources.actor_memory else ""
    where = llm.base_url or ("the embedded model" if llm.backend == "embedded" else "the OpenAI API")
    return (f"check that {where} answers and that the cluster has room for the actors ({resources.actor_cpus:g} CPU"
            f"{memory} each); raise --stall-timeout if single patients take longer")


def main(argv: list[str] | None = None, prog: str = "python -m jobs.predict") -> int:
    return job_main(lambda: build_parser(prog), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
