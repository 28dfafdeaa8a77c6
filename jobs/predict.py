"""predict: cohort labels + a MEDS dataset -> one prediction per patient, on Ray, restartable without paying twice.

    python -m jobs.predict --labels COHORT/labels/test.parquet --dataset MEDS --out out/predict-lung \\
        [--variant one_stage|two_stage|single_agent] [--cancer lung | --any-cancer] [--graphs STORE]

The predict job's parts of the shared driver (`jobs.runner`): the label tasks, longest first; the two-stage
preprocessor pool; the consolidated files (`trajonco.prediction_files`); with ``--graphs`` the store's lock and the
registration of the graphs its actors persisted (`vista.graph.record_graphs`). How it runs, resumes, retries and
what it writes: docs/jobs.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from pathlib import Path

import pyarrow as pa
from rich.console import Console

from jobs.driver import JobStalled, job_main, new_run_id, task_dataset
from jobs.llm_budget import BudgetRef
from jobs.llm_options import llm_config
from jobs.predict_actor import PredictActor, PredictSettings
from jobs.predict_options import build_parser
from jobs.ray_runtime import RayRuntime
from jobs.resources import ResourcePlan
from jobs.runner import CohortJob, LazyRay, check_common_options, run_job, sized_settings
from trajonco.prediction_files import (
    DETAILS_FILE,
    DETAILS_SCHEMA,
    MEDS_DEV_DIR,
    MEDS_DEV_OUTPUT,
    PREDICTIONS_FILE,
    details_rows,
    meds_dev_rows,
    meds_dev_schema,
)
from trajonco.prediction_rows import PREDICTION_SCHEMA
from vista.shared.cli_kit import check_output_dir
from vista.shared.meds.patient_loader import coding_profile_for
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import estimate_lengths, read_label_tasks, rows_in_order, task_keys
from vista.shared.runs.errors import JobInputError
from vista.shared.runs.lock import OutputLock
from vista.shared.runs.parts import OutputFile, PartConsolidation
from vista.shared.runs.plan import schedule
from vista.shared.runs.progress import ProgressTracker
from vista.shared.runs.summary import RunSummary
from vista.shared.storage import is_remote, join, normalize

log = logging.getLogger("jobs.predict")


def build_settings(args: argparse.Namespace, run_id: str) -> PredictSettings:
    from trajonco.assessment_options import assessment_config

    pipeline = assessment_config(args, cancer=args.cancer, cancer_hints=args.cancer_hints,
                                 output_limits=args.output_limits, context_tokens=args.context_tokens)
    return PredictSettings.for_run(
        args, run_id, dataset=normalize(args.dataset), coding_profile=coding_profile_for(args.dataset, args.coding_profile),
        out=normalize(args.out), pipeline=pipeline, any_cancer=args.any_cancer, llm=llm_config(args),
        threshold=args.threshold, graphs=args.graphs.resolve() if args.graphs is not None else None)


def prediction_outputs(out: Path | str, *, labelled: bool, graphs: bool = False) -> list[OutputFile]:
    """The predict job's consolidated files: ``prediction_details.parquet`` (every task's row; with ``graphs``, its
    graph columns too), MEDS-DEV's ``predictions.parquet`` (the scored tasks; without ``boolean_value`` when the
    label file has unlabelled tasks) and the same rows alone in ``meds_dev/`` in the form MEDS-DEV 0.0.14 reads, as
    `trajonco.prediction_files` describes them."""
    details = DETAILS_SCHEMA
    if graphs:
        from vista.graph.record_graphs import GRAPH_SCHEMA  # (vista.graph only for a job that persists graphs)

        details = pa.schema([*DETAILS_SCHEMA, *GRAPH_SCHEMA])
    return [
        OutputFile(Path(DETAILS_FILE).stem, join(out, DETAILS_FILE), details, details_rows),
        OutputFile(Path(PREDICTIONS_FILE).stem, join(out, PREDICTIONS_FILE), meds_dev_schema(labelled),
                   lambda rows: meds_dev_rows(rows, labelled)),
        OutputFile(MEDS_DEV_OUTPUT, join(out, MEDS_DEV_DIR, PREDICTIONS_FILE),
                   meds_dev_schema(labelled, meds_dev=True), lambda rows: meds_dev_rows(rows, labelled, meds_dev=True)),
    ]


def fingerprint(settings: PredictSettings, labels: Path | str) -> dict[str, object]:
    """The settings that decide the outputs (see `jobs.manifest`); ``graphs`` only with ``--graphs`` (a run without
    it compares equal to one of a version that had no such option)."""
    from vista.graph import DEFAULT_CONFIG

    graphs = ({"store": str(settings.graphs), "config": DEFAULT_CONFIG.fingerprint()}
              if settings.graphs is not None else None)
    return {
        "labels": normalize(labels), "dataset": str(settings.dataset), "coding_profile": settings.coding_profile,
        "pipeline": settings.pipeline.model_dump(mode="json"), "any_cancer": settings.any_cancer,
        "threshold": settings.threshold, "llm": settings.llm.answer_fields(), "graphs": graphs,
    }


class PredictJob(CohortJob):
    """The predict job's parts of the shared driver (`jobs.runner`)."""

    name = "predict"
    output_name = PREDICTIONS_FILE
    output_schema = PREDICTION_SCHEMA
    needs_context = True  # chunks and answers are fitted to the model's context window

    def __init__(self, args: argparse.Namespace, run_id: str):
        super().__init__(args, run_id)
        self.settings: PredictSettings
        self.tasks: pa.Table
        self.resources: ResourcePlan

    def check(self) -> None:
        from vista.shared.meds.reader import MedsDataset

        args = self.args
        check_common_options(args)
        if args.preprocess_actors is not None and args.preprocess_actors < 0:
            raise JobInputError(f"--preprocess-actors must be 0 or more, not {args.preprocess_actors}")
        if not 0.0 <= args.threshold <= 1.0:
            raise JobInputError(f"--threshold must be between 0 and 1, not {args.threshold}")
        check_output_dir(args.out, resumable=True)  # a file, or a directory nobody may write, fails before any work
        if args.graphs is not None:
            from vista.graph.record_graphs import check_graph_store

            check_graph_store(args.graphs)
        MedsDataset(args.dataset)  # a missing or empty dataset fails here, naming the path
        self.label_tasks = read_label_tasks(args.labels)
        self.tasks = self.label_tasks.table
        self.settings = build_settings(args, self.run_id)

    def context_tokens(self) -> int | None:
        return self.settings.pipeline.context_tokens

    def fingerprint(self) -> dict[str, object]:
        return fingerprint(self.settings, self.args.labels)

    def output_files(self) -> list[OutputFile]:
        return prediction_outputs(self.out, labelled=self.tasks.column("boolean_value").null_count == 0,
                                  graphs=self.settings.graphs is not None)

    def summary_update(self) -> dict[str, object]:
        """``meds_dev_predictions_dir``: the folder to give ``meds-dev-evaluation predictions_dir=``."""
        return {"meds_dev_predictions_dir": str(join(self.out, MEDS_DEV_DIR))}

    def finish(self, report: PartConsolidation, selected: list[TaskKey]) -> dict[str, str]:
        store = self.settings.graphs
        if store is None:
            return {}
        from vista.graph.record_graphs import register_record_graphs

        details = report.paths[Path(DETAILS_FILE).stem]
        registered = register_record_graphs(store, details)
        index = registered.index
        log.info("%s: %d graph(s) of this job's patients registered (%d changed)", store, index.graphs, index.changed)
        if registered.failed:
            log.warning("%s: %d task(s) have no graph; the graph_error column of %s says why", store, registered.failed,
                        details)
        return {"graph_store": str(store)}

    def store_lock(self) -> contextlib.AbstractContextManager[object]:
        """The graph store's lock for the run (``--out``'s own lock covers a store inside it)."""
        store, out = self.args.graphs, self.args.out
        if store is not None:
            from vista.graph.record_graphs import check_graph_store

            check_graph_store(store)  # before the lock makes the directory
        if store is None or (not is_remote(out) and Path(store).resolve() == Path(out).resolve()):
            return contextlib.nullcontext()
        return OutputLock(store.resolve())

    def task_keys(self, ray: LazyRay) -> list[TaskKey]:
        return task_keys(self.tasks)

    def resource_options(self) -> dict[str, object]:
        return {"two_stage": self.settings.pipeline.variant.value == "two_stage",
                "preprocess_actors": self.args.preprocess_actors, "preprocess_cpus": self.args.preprocess_cpus}

    def order(self, todo: list[TaskKey]) -> tuple[list[TaskKey], float]:
        """Longest estimated chain first (``--order longest``, the default), or key order."""
        if self.args.order == "key":
            return sorted(todo, key=TaskKey.sort_key), 0.0
        started = time.perf_counter()
        self.task_sizes = estimate_lengths(self.settings.dataset, todo)
        return schedule(todo, self.task_sizes), time.perf_counter() - started

    def describe(self) -> str:
        settings = self.settings
        return f"{settings.pipeline.variant.value}, {'any cancer' if settings.any_cancer else settings.pipeline.cancer}"

    def pool_clause(self, runtime: RayRuntime, order_s: float) -> str:
        resources = self.resources
        pool = (f", {resources.preprocess_actors} preprocessor actor(s) x {resources.preprocess_cpus:g} CPU x "
                f"{resources.preprocess_calls} calls" if resources.preprocess_actors else "")
        order = f"; longest first ({order_s:.1f} s to estimate)" if order_s else "; in key order"
        return super().pool_clause(runtime, order_s) + pool + order

    def execute(self, pending: list[TaskKey], budget: BudgetRef | None, tracker: ProgressTracker) -> None:
        from ray.exceptions import GetTimeoutError

        from jobs.preprocess_pool import PreprocessorPool

        args, resources = self.args, self.resources
        settings = sized_settings(self.settings, resources, budget)
        llm = settings.llm
        head = 2 * resources.patients_per_actor * resources.actors_max  # the longest tasks, in small blocks
        # made before any actor holds a CPU: `ray.data.from_arrow` runs a 1-CPU metadata task per block, which would
        # wait forever behind a preprocessor pool that holds all but a fraction of a small cluster's CPUs
        work = task_dataset(rows_in_order(self.tasks, pending), resources.block_rows, head_rows=head)
        pool = None
        try:
            if resources.preprocess_actors:
                timeout = args.stage_timeout or (llm.retry_budget_s + llm.timeout_s + 30.0)
                pool = PreprocessorPool.start(
                    llm.with_overrides({"max_concurrency": resources.preprocess_calls}), size=resources.preprocess_actors,
                    num_cpus=resources.preprocess_cpus, timeout_s=timeout, job_id=settings.run_id,
                    concurrency=resources.preprocess_calls, budget=budget)
                try:
                    pool.wait_ready(timeout_s=args.startup_timeout)
                except GetTimeoutError as exc:
                    raise JobStalled(f"[predict] stopped: the preprocessor actors did not start within --startup-timeout "
                                     f"{args.startup_timeout:g} s (each asks {resources.preprocess_cpus:g} CPU); check "
                                     "that the cluster has room for them") from exc
            self.stream_pool(work, PredictActor, {"settings": settings, "pool": pool}, tracker)
        finally:
            if pool is not None:
                pool.shutdown()


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job (`jobs.runner.run_job`); returns its summary (also printed and written to ``OUT/summary.json``)."""
    job = PredictJob(args, new_run_id())
    with job.store_lock():
        return run_job(job, console)


def main(argv: list[str] | None = None, prog: str = "python -m jobs.predict") -> int:
    return job_main(lambda: build_parser(prog), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
