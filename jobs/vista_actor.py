"""The VISTA job's stateful Ray Data UDF: `jobs.actor_base.TaskActor` whose work item is one task with its graph
built, and whose run is the task's LLM stages (TOA, then display) and its row.

Preparing a block: MEDS tasks are read by the actor itself (targeted parquet reads, `vista.meds.patient_loader`), XML tasks
are files read from ``--xml-dir``; each task's graph is built and written into the graph store at the output
directory (`jobs.vista_graphs`: each graph's files, then one node-index part for the block), in a worker thread (it
is CPU work: ~10 ms for a typical patient). Running a task: its LLM stages on the actor's event loop — at most
``patients_per_actor`` at a time, all sharing one gateway (its concurrency limit, its response cache, per-task usage
through `jobs.job_gateway`) — then its row (`jobs.vista_rows.VistaRow`) to the actor's part files. A task that
raises at any stage (bad input, a timeout, a bug) gets an error row naming the stage and the problem, keeps what the
stages before it wrote, and the others go on. Graphs are rewritten only when their content hash changed and the
TOA/display stores make no call for an unchanged patient, so a task run again (a retry, or a row an actor lost when
it was killed) costs nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from vista.display import DisplayConfig
from vista.graph import DEFAULT_CONFIG, GraphInputError, GraphSource
from vista.graph.store import write_index_part
from vista.llm import LLMConfig
from vista.llm.errors import LLMEndpointFailure
from vista.llm.task_usage import TaskUsage
from vista.records import PatientRecord
from vista.toa import TOAConfig

from jobs.actor_base import TaskActor
from jobs.llm_budget import BudgetRef
from jobs.progress import StatusRow
from jobs.tasks import TaskKey
from jobs.vista_graphs import GraphOutcome, meds_source, persist_graph, task_folder, xml_source
from jobs.vista_rows import (
    VISTA_PART_SCHEMA,
    Stage,
    VistaRow,
    error_text,
    vista_failure_kind,
    vista_part_record,
    vista_retry_class,
)
from jobs.vista_stages import StageOutcome, display_stage, timeline_stage
from jobs.vista_tasks import XML_FILE

log = logging.getLogger(__name__)


class VistaSettings(BaseModel):
    """Everything a VISTA actor needs (shipped to every actor; small and picklable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out: Path = Field(description="output directory (shared by every node)")
    dataset: Path | None = Field(None, description="MEDS dataset root, for MEDS tasks")
    coding_profile: str | None = Field(None, description="how the dataset (or the XML) spells codes (vista.coding "
                                       "profile name or TOML path); None: detected (XML: vista_xml)")
    xml_dir: Path | None = Field(None, description="directory of patient XML files, for XML tasks")
    stages: tuple[Stage, ...] = Field(("graph",), description="stages to run, in order; graph always first")
    toa: TOAConfig = Field(default_factory=TOAConfig)
    display: DisplayConfig = Field(default_factory=DisplayConfig)
    llm: LLMConfig | None = Field(None, description="the LLM of the toa/display stages (None: graph only)")
    patients_per_actor: int = Field(1, ge=1, description="tasks whose LLM stages an actor runs at once")
    patient_timeout_s: float = Field(3600.0, gt=0, description="LLM stages still running after this: an error row")
    flush_rows: int = Field(256, ge=1, description="rows an actor buffers before writing a part file")
    flush_s: float = Field(10.0, gt=0, description="longest a finished row waits in an actor's buffer, in seconds")
    run_id: str
    llm_budget: BudgetRef | None = Field(None, description="the job's shared LLM budget (jobs.llm_budget); None: "
                                         "only the actor's own gateway limits")

    @property
    def llm_stages(self) -> bool:
        return any(stage != "graph" for stage in self.stages)


@dataclass(slots=True)
class _Task:
    """One task on its way through the stages: the row so far, its graph, the usage of each LLM stage."""

    key: TaskKey
    row: VistaRow
    started: float
    outcome: GraphOutcome | None = None
    usage: dict[str, TaskUsage] = field(default_factory=dict)

    def fail(self, stage: str, exc: BaseException) -> None:
        kind = vista_failure_kind(exc)
        self.row = self.row.model_copy(update={"status": "error", "error_stage": stage, "error_kind": kind,
                                               "error": error_text(exc)})
        log.warning("task %s: error row at the %s stage (%s, %s)", self.key.name, stage, kind, type(exc).__name__)
        log.debug("task %s failed", self.key.name, exc_info=exc)

    def done(self, stage: str) -> None:
        self.row = self.row.model_copy(update={"stages": ",".join(filter(None, (self.row.stages, stage)))})


class VistaActor(TaskActor[_Task]):
    """Runs VISTA tasks as they arrive (see the module docstring)."""

    part_schema = VISTA_PART_SCHEMA

    def __init__(self, settings: VistaSettings):
        if settings.llm_stages and settings.llm is None:
            raise ValueError("the toa/display stages need LLM settings")
        super().__init__(settings, dataset=settings.dataset, coding_profile=settings.coding_profile)

    def uses_llm(self) -> bool:
        return self.settings.llm_stages

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[_Task]:
        files = batch.column(XML_FILE).to_pylist() if XML_FILE in batch.column_names else [None] * len(keys)
        return await asyncio.to_thread(self._graphs, list(zip(keys, files)))

    async def run(self, task: _Task) -> tuple[dict[str, object], StatusRow]:
        if self.gateway is not None and task.outcome is not None and task.row.status == "ok":
            await self._llm_stages_within_time_limit(task)
        row = task.row.with_usage(task.usage)
        row = row.model_copy(update={"wall_s": time.perf_counter() - task.started,
                                     "finished_at": datetime.now(timezone.utc),
                                     "retry_class": vista_retry_class(row.status, row.error_kind)})
        return vista_part_record(task.key, row), StatusRow.of(task.key, row)

    # ------------------------------------------------------------------------------------------ graph stage
    def _graphs(self, pending: list[tuple[TaskKey, str | None]]) -> list[_Task]:
        """The block's graphs, built and persisted, and one index part with their node rows."""
        meds_keys = [key for key, file in pending if file is None]
        read_started = time.perf_counter()
        loaded = self._load_records(meds_keys)
        read_share = (time.perf_counter() - read_started) / max(1, len(meds_keys))  # one targeted read per block
        tasks = [self._graph(key, file, loaded, read_share if file is None else 0.0) for key, file in pending]
        self._write_index(tasks)
        return tasks

    def _load_records(self, keys: list[TaskKey]) -> dict[int, PatientRecord | Exception]:
        if not keys:
            return {}
        if self.loader is None:
            raise ValueError("MEDS tasks need VistaSettings.dataset")
        return dict(self.loader.load(key.subject_id for key in keys))

    def _graph(self, key: TaskKey, file: str | None, loaded: dict[int, PatientRecord | Exception],
               read_share: float) -> _Task:
        started = time.perf_counter() - read_share
        xml_path = self.settings.xml_dir / file if file is not None and self.settings.xml_dir is not None else None
        source_name = str(xml_path) if xml_path is not None else None
        task = _Task(key, VistaRow(task=key.name, subject_id=None if file is not None else key.subject_id,
                                   prediction_time=key.prediction_time, source=source_name, status="ok", stages="",
                                   run_id=self.settings.run_id, finished_at=datetime.now(timezone.utc)), started)
        try:
            source = self._source(key, xml_path, loaded)
        except Exception as exc:  # noqa: BLE001 - failure isolation: the task gets an error row, the block goes on
            task.row = task.row.model_copy(update={"subject_id": task.row.subject_id or _patient_of(exc),
                                                   "load_s": time.perf_counter() - started})
            task.fail("load", exc)
            return task
        loaded_at = time.perf_counter()
        task.row = task.row.model_copy(update={"subject_id": source.subject_id, "load_s": loaded_at - started,
                                               "source": source_name or source.origin})
        try:
            outcome = persist_graph(source, self.settings.out, key, config=DEFAULT_CONFIG,
                                    need_graph=self.settings.llm_stages, xml_file=xml_path)
        except Exception as exc:  # noqa: BLE001
            task.row = task.row.model_copy(update={"graph_s": time.perf_counter() - loaded_at})
            task.fail("graph", exc)
            return task
        facts = outcome.facts
        task.outcome = outcome
        task.row = task.row.model_copy(update={
            "content_hash": facts.content_hash, "n_nodes": facts.n_nodes, "n_edges": facts.n_edges,
            "n_events": facts.n_events, "n_encounters": facts.n_encounters, "graph_file": outcome.file,
            "graph_rebuilt": outcome.rebuilt, "graph_s": time.perf_counter() - loaded_at,
        })
        task.done("graph")
        return task

    def _write_index(self, tasks: list[_Task]) -> None:
        """One index part with the node rows of the block's graphs (before any row names it; the driver registers
        the graphs in the store's manifest at the end of the job)."""
        built = [task for task in tasks if task.outcome is not None]
        if not built:
            return
        part = write_index_part(self.settings.out, (task.outcome.index for task in built))
        for task in built:
            task.row = task.row.model_copy(update={"index_file": part})

    def _source(self, key: TaskKey, xml_path: Path | None, loaded: dict[int, PatientRecord | Exception]) -> GraphSource:
        if xml_path is not None:
            return xml_source(xml_path, self.settings.coding_profile)
        record = loaded[key.subject_id]
        if not isinstance(record, PatientRecord):
            raise record
        return meds_source(record, self.catalog, key.prediction_time)

    # ------------------------------------------------------------------------------------------ LLM stages
    async def _llm_stages_within_time_limit(self, task: _Task) -> None:
        try:
            await self.within_time_limit(self._llm_stages(task), f"task {task.key.name}: LLM stages")
        except TimeoutError as exc:
            task.fail("display" if "toa" in task.row.stages else "toa", exc)

    async def _llm_stages(self, task: _Task) -> None:
        settings = self.settings
        folder = task_folder(settings.out, task.key)
        graph = task.outcome.graph
        stage = "toa"
        try:
            timeline, outcome = await timeline_stage(folder, graph, self.gateway, settings.toa)
            self._record(task, "toa", outcome, {
                "toa_file": self._relative(outcome.file), "n_chunks": timeline.stats.chunks,
                "failed_chunks": timeline.stats.failed_chunks, "n_timeline_events": len(timeline.events),
                "misdated_timeline_events": timeline.stats.misdated_events,
                "n_episodes": len(timeline.episodes), "toa_rebuilt": outcome.rebuilt, "toa_s": outcome.seconds})
            if outcome.problem is not None or "display" not in settings.stages:
                return
            stage = "display"
            display, outcome = await display_stage(folder, graph, timeline, self.gateway, settings.display)
            self._record(task, "display", outcome, {
                "display_file": self._relative(outcome.file), "n_display_values": len(display.values),
                "failed_display_values": sum(v.origin == "failed" for v in display.values),
                "uncited_display_values": len(display.uncited_keys()),
                "display_rebuilt": outcome.rebuilt, "display_s": outcome.seconds})
        except LLMEndpointFailure:  # the job's budget stopped the job: no row, the job stops
            raise
        except Exception as exc:  # noqa: BLE001 - failure isolation
            task.fail(stage, exc)

    def _record(self, task: _Task, stage: str, outcome: StageOutcome, update: dict[str, object]) -> None:
        task.usage[stage] = outcome.usage
        task.row = task.row.model_copy(update=update)
        if outcome.problem is None:
            task.done(stage)
        else:
            task.row = task.row.model_copy(update={"status": "failed", "error_stage": stage,
                                                   "error_kind": "llm_call_failed", "error": outcome.problem})
            log.warning("task %s: %s stage incomplete (%s)", task.key.name, stage, outcome.problem)

    def _relative(self, path: Path) -> str:
        return str(path.relative_to(self.settings.out))


def _patient_of(exc: BaseException) -> int | None:
    """The patient id an input error names, when it is an integer."""
    patient = getattr(exc, "patient", None) if isinstance(exc, GraphInputError) else getattr(exc, "subject_id", None)
    try:
        return int(patient) if patient is not None else None
    except (TypeError, ValueError):
        return None
