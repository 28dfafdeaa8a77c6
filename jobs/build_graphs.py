"""build-graphs: the VISTA cohort job — per patient, the MEDS Graph, its TOA timeline and its tumor-board display, on Ray.

    python -m jobs.build_graphs --dataset MEDS --out out/vista [--labels LABELS.parquet] [--stages graph,toa,display]
    python -m jobs.build_graphs --xml-dir PATIENT_XML_DIR --out out/vista

The VISTA job's parts of the shared driver (`jobs.runner`): its tasks (MEDS subjects, label rows or XML files), the
stages' settings (`vista.pipeline`), a graph-only pool sized by CPUs, and the graphs registered in the output store
at the end. Inputs, stages, outputs, resume, bad input and exit statuses: docs/jobs.md.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rich.console import Console

from jobs.build_graphs_options import build_parser
from jobs.driver import job_main, new_run_id, task_dataset
from jobs.llm_budget import BudgetRef
from jobs.llm_options import llm_config, llm_configured
from jobs.ray_runtime import RayRuntime
from jobs.runner import CohortJob, LazyRay, check_common_options, run_job, sized_settings, stream_actor_pool
from jobs.vista_actor import VistaActor, VistaSettings
from jobs.vista_tasks import dataset_task_keys, xml_dataset
from vista.graph.xml_files import XmlDirectoryError, XmlFile, list_xml_patients
from vista.pipeline.rows import TASK_ID, VISTA_SCHEMA
from vista.shared.meds.patient_loader import coding_profile_for
from vista.shared.meds.subjects import check_listable, first_subjects, unusable_shards
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import keys_table, read_label_tasks, task_keys
from vista.shared.runs.errors import JobInputError
from vista.shared.runs.parts import PartConsolidation, RowKeys
from vista.shared.runs.progress import ProgressTracker
from vista.shared.runs.summary import RunSummary

log = logging.getLogger("jobs.build_graphs")
FORMAT_VERSION = 4  # of the persisted artifacts (4: rows in part files); part of the resume check
GRAPH_BLOCK_ROWS = 16
GRAPH_ACTOR_CPUS = 0.5


# ---------------------------------------------------------------------------------------------- settings
def build_settings(args: argparse.Namespace, run_id: str) -> VistaSettings:
    """The actors' settings from the command line (`JobInputError` for unusable values)."""
    from pydantic import ValidationError

    from vista.pipeline import PipelineConfig, StageChoiceError, resolve_stages

    if args.labels is not None and args.xml_dir is not None:
        raise JobInputError("--labels goes with --dataset, not with --xml-dir")
    try:
        stages = resolve_stages(args.stages, model_configured=llm_configured(args))
    except StageChoiceError as exc:
        raise JobInputError(f"--stages: {exc}") from None
    chunks = {"chunk_tokens": args.chunk_tokens, "chunk_chars": args.chunk_chars}
    if args.chunk_limit is not None:
        log.warning("--chunk-limit/--chunk-unit are deprecated (kept for one release): use --chunk-tokens N or "
                    "--chunk-chars N")
        chunks = {f"chunk_{args.chunk_unit}": args.chunk_limit}
    try:
        pipeline = PipelineConfig.from_choices(
            stages, profile=args.profile, **chunks, max_events_per_chunk=args.max_events_per_chunk,
            answer_tokens=args.answer_tokens, safety_net=not args.no_safety_net, judge_ambiguous=not args.no_judge,
            variables=args.variables, group_size=args.group_size, summary_note=not args.no_summary_note)
    except ValidationError as exc:
        first = exc.errors(include_input=False)[0]
        raise JobInputError(f"stage option {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    llm = llm_config(args) if pipeline.llm_stages else None
    pipeline.check_files()  # a bad variables file or event profile fails here, naming the file
    return VistaSettings.for_run(
        args, run_id, out=args.out.resolve(), dataset=args.dataset.resolve() if args.dataset else None,
        coding_profile=coding_profile_for(args.dataset, args.coding_profile) if args.dataset else args.coding_profile,
        xml_dir=args.xml_dir.resolve() if args.xml_dir else None, pipeline=pipeline, llm=llm)


def fingerprint(settings: VistaSettings, labels: Path | None) -> dict[str, object]:
    """The settings that decide the outputs (see `jobs.manifest`)."""
    return {
        "dataset": str(settings.dataset) if settings.dataset else None, "coding_profile": settings.coding_profile,
        "xml_dir": str(settings.xml_dir) if settings.xml_dir else None,
        "labels": str(labels.resolve()) if labels else None, "format": FORMAT_VERSION,
        **settings.pipeline.fingerprint(),
        "llm": settings.llm.answer_fields() if settings.llm is not None else None,
    }


# ---------------------------------------------------------------------------------------------- the job
class GraphsJob(CohortJob):
    """The VISTA job's parts of the shared driver (`jobs.runner`)."""

    name = "build-graphs"
    output_name = "patients.parquet"
    output_schema = VISTA_SCHEMA
    keys = RowKeys(subject=TASK_ID)  # a task is named by its key's subject (an XML file's key), not the patient

    def __init__(self, args: argparse.Namespace, run_id: str):
        super().__init__(args, run_id)
        self.settings: VistaSettings
        self.xml_tasks: list[XmlFile] | None = None

    def check(self) -> None:
        args = self.args
        check_common_options(args)
        self.settings = settings = build_settings(args, self.run_id)
        if settings.dataset is not None and args.labels is None:
            check_listable(settings.dataset)  # names every unreadable shard (and a missing dataset) before Ray starts
        elif settings.dataset is not None:
            for problem in unusable_shards(settings.dataset):  # their label rows get error rows naming the shard
                log.warning("%s", problem)
        self.label_tasks = read_label_tasks(args.labels) if args.labels is not None else None
        if settings.xml_dir is not None:
            try:
                self.xml_tasks, skipped = list_xml_patients(settings.xml_dir, args.on_duplicate)
            except XmlDirectoryError as exc:
                raise JobInputError(f"--xml-dir {exc}") from None
            for line in skipped:
                log.warning("%s", line)

    def fingerprint(self) -> dict[str, object]:
        return fingerprint(self.settings, self.args.labels)

    def task_keys(self, ray: LazyRay) -> list[TaskKey]:
        if self.xml_tasks is not None:
            return [task.key for task in self.xml_tasks]
        if self.label_tasks is not None:
            return task_keys(self.label_tasks.table)
        if self.args.limit is not None:  # the first N subjects: read from the shards that may hold them, no Ray
            return [TaskKey(s) for s in first_subjects(self.settings.dataset, self.args.limit).subject_ids]
        ray.runtime()  # the subjects are listed by Ray Data tasks, one per shard
        return dataset_task_keys(self.settings.dataset)

    def _graph_only_pool(self, runtime_cpus: float) -> tuple[int, float, int]:
        """Actors, CPUs each and block rows of a graph-only run: CPU-bound actors, one per CPU, small blocks."""
        args = self.args
        return (args.actors or max(1, int(runtime_cpus)), args.actor_cpus or GRAPH_ACTOR_CPUS,
                args.batch_size or GRAPH_BLOCK_ROWS)

    def describe(self) -> str:
        return ",".join(self.settings.pipeline.stages)

    def pool_clause(self, runtime: RayRuntime, order_s: float) -> str:
        if self.resources is not None:
            return super().pool_clause(runtime, order_s)
        actors, cpus, _ = self._graph_only_pool(runtime.cpus)
        return f"{actors} actor(s) x {cpus:g} CPU"

    def execute(self, pending: list[TaskKey], budget: BudgetRef | None, tracker: ProgressTracker) -> None:
        from ray.data import ActorPoolStrategy

        settings, resources = self.settings, self.resources
        if resources is None:
            actors, cpus, block_rows = self._graph_only_pool(self.cluster_cpus)
        else:
            settings = sized_settings(settings, resources, budget)
            block_rows = resources.block_rows
        if self.xml_tasks is not None:
            wanted = set(pending)
            work = xml_dataset([task for task in self.xml_tasks if task.key in wanted], block_rows)
        else:
            work = task_dataset(keys_table(pending), block_rows)
        if resources is not None:
            self.stream_pool(work, VistaActor, {"settings": settings}, tracker)
            return
        compute = ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=2, max_concurrent_calls_per_actor=2)
        stream_actor_pool(self, work, VistaActor, {"settings": settings}, compute=compute, num_cpus=cpus,
                          memory=None, block_rows=block_rows, tracker=tracker)  # graph only: no LLM, no budget

    def finish(self, report: PartConsolidation, selected: list[TaskKey]) -> dict[str, str]:
        from vista.graph import GraphStore

        index = GraphStore(self.out).register_rows(report.path)
        return {"index": str(index.path)}


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job (`jobs.runner.run_job`); returns its summary (also printed and written to ``OUT/summary.json``)."""
    return run_job(GraphsJob(args, new_run_id()), console)


def main(argv: list[str] | None = None, prog: str = "python -m jobs.build_graphs") -> int:
    """Exit status: 0 all selected tasks ok; 3 some ended in error/failure; 1 some have no row yet; 2 bad options."""
    return job_main(lambda: build_parser(prog), run, argv, RunSummary.exit_status)


if __name__ == "__main__":
    raise SystemExit(main())
