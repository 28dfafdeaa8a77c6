"""predict: cohort labels + a MEDS dataset -> one prediction per patient, on Ray, restartable without paying twice.

    python -m jobs.predict --labels COHORT/labels/test.parquet --dataset MEDS --out out/predict-lung \\
        [--variant one_stage|two_stage|single_agent] [--cancer lung | --any-cancer] \\
        [--backend openai --base-url http://HOST:8000/v1 --model NAME] [--limit N | --sample N]

How it runs. The driver reads the task keys of the label file (subject_id, prediction_time: a few MB for 100,000
patients), finds which tasks already have an output in ``--out`` and plans the rest. Ray Data then reads the label
file, keeps the planned rows and streams them in small blocks to a fixed pool of patient actors
(``ActorPoolStrategy(size=--actors)``, fractional CPUs). Each actor reads its patients' rows itself with the
targeted MEDS reader (parquet statistics pick the shards and row groups), so no MEDS row ever goes through the
driver or a shuffle: a Ray Data groupby over the dataset's 10M rows would shuffle everything to rebuild patients the
reader can fetch directly. The actor runs timeline -> chunks -> agent chain for several patients at once (asyncio,
bounded by the LLM gateway's concurrency) and writes each patient's JSON atomically; the driver only receives a
status row per patient and prints progress.

Two-stage: the preprocessor agents run in their own actor pool (``--preprocess-actors``); a patient actor sends its
chunks' filter calls there and awaits them (no blocking ``ray.get``), so one patient's chunks are filtered in
parallel across the cluster and its chain starts as soon as they are back — without the dataset-wide barrier that
an "explode chunks -> groupby patient" Ray Data pipeline would impose (a groupby waits for every chunk of every
patient before the first chain can start).

Resume: each patient's JSON is its done marker. Restarting the same command after any interruption (driver or
actor killed) skips patients that have one and runs the rest; with the LLM response cache (``<out>/llm_cache`` by
default) calls already answered cost nothing. Each run ends with ``predictions.parquet`` (one row per selected
patient: MEDS-DEV's prediction columns plus risk, trajectory, evidence with provenance, usage, latency, status,
error) and ``summary.json``.
"""

from __future__ import annotations

import argparse
import logging
from datetime import datetime
from pathlib import Path

from rich.console import Console

from jobs.consolidate import consolidate
from jobs.driver import job_main, label_dataset, new_run_id, stream_status
from jobs.errors import JobInputError
from jobs.llm_options import add_llm_arguments, answer_fields, check_llm, llm_config
from jobs.manifest import check_manifest
from jobs.outputs import MarkerStore, OutputLock
from jobs.predict_actor import PATIENTS, PredictActor, PredictSettings
from jobs.prediction_rows import PREDICTION_SCHEMA, row_from_json, rows_to_table
from jobs.progress import ProgressPrinter, ProgressTracker
from jobs.ray_runtime import RayOptions, add_ray_arguments, connect, shutdown
from jobs.resources import ResourcePlan, add_resource_arguments, plan_resources
from jobs.summary import RunSummary
from jobs.tasks import TaskPlan, keys_table, plan_tasks, read_label_tasks, task_keys

log = logging.getLogger("jobs.predict")

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.predict", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--labels", required=True, type=Path, help="MEDS label parquet (subject_id, prediction_time, "
                    "boolean_value), e.g. COHORT/labels/test.parquet")
    io.add_argument("--dataset", required=True, type=Path, help="MEDS dataset root (data/**/*.parquet, metadata/)")
    io.add_argument("--out", required=True, type=Path, help="output directory; rerunning the same command resumes there")
    io.add_argument("--threshold", type=float, default=0.5,
                    help="predicted_boolean_value = risk/10 >= threshold (default 0.5, i.e. risk >= 5)")

    pick = parser.add_argument_group("which patients")
    chosen = pick.add_mutually_exclusive_group()
    chosen.add_argument("--limit", type=int, help="only the first N tasks in (subject_id, prediction_time) order")
    chosen.add_argument("--sample", type=int, help="a random sample of N tasks (seeded by --seed; same N and seed, same tasks)")
    pick.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    pick.add_argument("--retry-failed", action="store_true",
                      help="run again the tasks whose earlier output is an error row (their row is replaced)")

    model = parser.add_argument_group("assessment")
    model.add_argument("--variant", choices=["one_stage", "two_stage", "single_agent"], default="one_stage",
                       help="one_stage: worker chain + manager; two_stage: parallel relevance filters (own actor pool) "
                            "then the chain; single_agent: the whole timeline in one call (default one_stage)")
    which = model.add_mutually_exclusive_group()
    which.add_argument("--cancer", default="lung", help="cancer to assess, one of the 15 keys of trajonco.cancers "
                       "(default lung)")
    which.add_argument("--any-cancer", action="store_true",
                       help="assess every cancer the patient's sex allows and keep the highest score (max pooling)")
    model.add_argument("--horizon-days", type=int, default=365, help="prediction horizon in days (default 365)")
    model.add_argument("--chunk-tokens", type=int, help="chunk limit l in tokens (default: 16000, at most a fifth of "
                       "the model's context: 1638 for the embedded model)")
    model.add_argument("--memory-k", type=int, default=10, help="latest memory events shown to each worker (default 10)")
    model.add_argument("--cancer-hints", action="store_true", help="add the cancer's known risk factors to the prompts")
    model.add_argument("--output-limits", choices=["auto", "standard", "compact"], default="auto",
                       help="bounds of the agents' answers (default auto: compact below a 32k-token context)")
    model.add_argument("--context-tokens", type=int, help="the model's context window (default: ask the endpoint)")

    add_llm_arguments(parser)

    add_resource_arguments(parser)
    run = parser.add_argument_group("run")
    run.add_argument("--patient-timeout", type=float, default=3600.0,
                     help="seconds after which a patient still running gets an error row (default 3600)")
    run.add_argument("--stage-timeout", type=float, help="two-stage: seconds to wait for one preprocessor call from "
                     "the pool (default: the LLM retry budget + request timeout + 30)")
    run.add_argument("--progress-every", type=float, default=10.0, help="seconds between progress lines (default 10; 0: "
                     "only at the end)")
    add_ray_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def build_settings(args: argparse.Namespace, run_id: str) -> PredictSettings:
    from trajonco.pipeline import PipelineConfig

    pipeline = PipelineConfig(
        variant=args.variant, cancer=args.cancer, horizon_days=args.horizon_days, chunk_tokens=args.chunk_tokens,
        memory_k=args.memory_k, cancer_hints=args.cancer_hints, output_limits=args.output_limits,
        context_tokens=args.context_tokens,
    )
    return PredictSettings(
        dataset=args.dataset.resolve(), out=args.out.resolve(), pipeline=pipeline, any_cancer=args.any_cancer,
        llm=llm_config(args), threshold=args.threshold, patient_timeout_s=args.patient_timeout,
        patients_per_actor=args.patients_per_actor or 1, retry_failed=args.retry_failed, run_id=run_id,
    )


def fingerprint(settings: PredictSettings, labels: Path) -> dict[str, object]:
    """The settings that decide the outputs (see `jobs.manifest`)."""
    return {
        "labels": str(labels.resolve()), "dataset": str(settings.dataset),
        "pipeline": settings.pipeline.model_dump(mode="json"), "any_cancer": settings.any_cancer,
        "threshold": settings.threshold, "llm": answer_fields(settings.llm),
    }


def _resources(args: argparse.Namespace, settings: PredictSettings, cluster_cpus: float) -> ResourcePlan:
    return plan_resources(
        cluster_cpus=cluster_cpus, backend=settings.llm.backend, two_stage=settings.pipeline.variant.value == "two_stage",
        llm_concurrency=settings.llm.max_concurrency, actors=args.actors, actor_cpus=args.actor_cpus,
        patients_per_actor=args.patients_per_actor, batch_size=args.batch_size,
        preprocess_actors=args.preprocess_actors, preprocess_cpus=args.preprocess_cpus,
    )


def _check_inputs(args: argparse.Namespace) -> None:
    from vista.meds.reader import MedsDataset

    for flag, value in (("--limit", args.limit), ("--sample", args.sample), ("--actors", args.actors),
                        ("--patients-per-actor", args.patients_per_actor), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            raise JobInputError(f"{flag} must be at least 1, not {value}")
    if not 0.0 <= args.threshold <= 1.0:
        raise JobInputError(f"--threshold must be between 0 and 1, not {args.threshold}")
    MedsDataset(args.dataset)  # a missing or empty dataset fails here, naming the path


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job; returns its summary (also printed and written to ``OUT/summary.json``)."""
    console = console or Console(width=110)
    started_at = datetime.now().astimezone()
    run_id = new_run_id()
    _check_inputs(args)
    tasks = read_label_tasks(args.labels)
    settings = build_settings(args, run_id)
    check_llm(settings.llm)
    out = settings.out
    store = MarkerStore(out, PATIENTS)
    with OutputLock(out):
        check_manifest(out, "predict", fingerprint(settings, args.labels))
        store.remove_stale_temporaries()
        plan = plan_tasks(task_keys(tasks), store.scan(), limit=args.limit, sample=args.sample, seed=args.seed,
                          retry_failed=args.retry_failed)
        tracker = ProgressTracker("predict", to_run=len(plan.todo), skipped_before=plan.skipped)
        resources = None
        if plan.todo:
            runtime = connect(RayOptions.from_args(args))
            try:
                resources = _resources(args, settings, runtime.cpus)
                _announce(console, run_id, plan, settings, resources, runtime)
                _execute(args, settings, resources, plan, tracker)
            finally:
                shutdown(runtime)
        else:
            console.print(f"[predict] run {run_id}: all {len(plan.selected)} selected tasks already have an output; "
                          "consolidating only", markup=False, soft_wrap=True)
        report = consolidate(
            store, plan.selected, out / "predictions.parquet", parse=row_from_json, to_table=rows_to_table,
            schema=PREDICTION_SCHEMA, status_of=lambda row: row.status,
        )
        summary = RunSummary.from_tracker(
            tracker, run_id=run_id, started_at=started_at, selected=len(plan.selected), skipped=plan.skipped,
            retried=plan.retried, complete=report.complete, outputs={"predictions": str(report.path)},
            totals=dict(sorted(report.statuses.items())),
        )
        summary.write(out)
    summary.print(console)
    if report.missing:
        console.print(f"[predict] {len(report.missing)} selected tasks have no output yet; rerun the same command to finish",
                      markup=False, soft_wrap=True)
    return summary


def _announce(console: Console, run_id: str, plan: TaskPlan, settings: PredictSettings, resources: ResourcePlan,
              runtime) -> None:
    where = "local Ray" if runtime.started_locally else f"cluster {runtime.address}"
    llm = settings.llm
    endpoint = llm.base_url or ("in-process" if llm.backend == "embedded" else "api.openai.com")
    pool = (f", {resources.preprocess_actors} preprocessor actor(s) x {resources.preprocess_cpus:g} CPU"
            if resources.preprocess_actors else "")
    console.print(
        f"[predict] run {run_id}: {len(plan.selected)} selected, {plan.skipped} already done, {len(plan.todo)} to run "
        f"({settings.pipeline.variant.value}, {'any cancer' if settings.any_cancer else settings.pipeline.cancer}) on "
        f"{where} ({runtime.cpus:g} CPUs): {resources.actors} patient actor(s) x {resources.actor_cpus:g} CPU, "
        f"{resources.patients_per_actor} patients each{pool}; model {llm.model} ({llm.backend}, {endpoint})",
        markup=False, highlight=False, soft_wrap=True,
    )
    if resources.cpus_needed > runtime.cpus:
        console.print(f"[predict] warning: the actors ask for {resources.cpus_needed:g} CPUs, the cluster has "
                      f"{runtime.cpus:g}; they will start as CPUs become available (autoscaling) or not at all",
                      markup=False, soft_wrap=True)


def _execute(args: argparse.Namespace, settings: PredictSettings, resources: ResourcePlan, plan: TaskPlan,
             tracker: ProgressTracker) -> None:
    from ray.data import ActorPoolStrategy

    from jobs.preprocess_pool import PreprocessorPool

    llm = settings.llm
    if resources.model_threads is not None and llm.threads is None:
        llm = llm.with_overrides({"threads": resources.model_threads})
    settings = settings.model_copy(update={"llm": llm, "patients_per_actor": resources.patients_per_actor})
    pool = None
    try:
        if resources.preprocess_actors:
            timeout = args.stage_timeout or (llm.retry_budget_s + llm.timeout_s + 30.0)
            pool = PreprocessorPool.start(llm, size=resources.preprocess_actors, num_cpus=resources.preprocess_cpus,
                                          timeout_s=timeout, job_id=settings.run_id)
            pool.wait_ready()
        work = label_dataset(args.labels, keys_table(plan.todo), resources.batch_size)
        results = work.map_batches(
            PredictActor,
            fn_constructor_kwargs={"settings": settings, "pool": pool},
            batch_size=resources.batch_size,
            batch_format="pyarrow",
            compute=ActorPoolStrategy(size=resources.actors, max_tasks_in_flight_per_actor=2,
                                      max_concurrent_calls_per_actor=2, enable_true_multi_threading=True),
            num_cpus=resources.actor_cpus,
        )
        with ProgressPrinter(tracker, interval_s=args.progress_every):
            stream_status(results, tracker)
    finally:
        if pool is not None:
            pool.shutdown()


def main(argv: list[str] | None = None) -> int:
    return job_main(build_parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
