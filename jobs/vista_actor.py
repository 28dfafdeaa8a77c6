"""The VISTA job's stateful Ray Data UDF: per task, graph → TOA → display, persisted, one status row back.

Each call receives a batch of tasks. MEDS tasks are read by the actor itself (targeted parquet reads,
`jobs.patient_loader`); XML tasks are files read from ``--xml-dir``. The graph stage runs in the calling thread (it
is CPU work: ~10 ms for a typical patient) and writes into the graph store at the output directory
(`jobs.vista_graphs`): each graph's files, then one node-index part for the batch; the LLM stages of the batch's patients then run concurrently on the
actor's event loop — at most ``patients_per_actor`` at a time, all sharing one gateway (its concurrency limit, its
response cache, per-task usage through `jobs.job_gateway`). A task that raises at any stage (bad input, a timeout,
a bug) gets an error row naming the stage and the problem, keeps what the stages before it wrote, and the others
go on. The task's row (`jobs.vista_rows.VistaRow`) is written last, atomically, as its done marker; a task that
already has one is skipped, so a batch Ray retries after an actor died recomputes nothing that was finished.
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

from jobs.job_gateway import JobGateway, job_llm_gateway
from jobs.llm_budget import BudgetRef
from jobs.loop_thread import LoopThread
from jobs.outputs import MarkerStore
from jobs.patient_loader import PatientLoader
from jobs.progress import StatusRow, status_table
from jobs.tasks import TaskKey, task_keys
from jobs.vista_graphs import GraphOutcome, meds_source, persist_graph, task_folder, xml_source
from jobs.vista_rows import Stage, VistaRow, error_text, vista_failure_kind
from jobs.vista_stages import StageOutcome, display_stage, timeline_stage
from jobs.vista_tasks import XML_FILE

log = logging.getLogger(__name__)

PATIENTS = "patients"
"""Folder of the per-task rows (the done markers) under the output directory."""


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
    retry_failed: bool = False
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


class VistaActor:
    """Runs batches of VISTA tasks (see the module docstring)."""

    def __init__(self, settings: VistaSettings):
        self.settings = settings
        self.store = MarkerStore(settings.out, PATIENTS)
        self.loader = (PatientLoader(settings.dataset, settings.coding_profile) if settings.dataset is not None
                       else None)
        self.catalog = self.loader.catalog() if self.loader is not None else None
        self.loop: LoopThread | None = None
        if settings.llm_stages:
            if settings.llm is None:
                raise ValueError("the toa/display stages need LLM settings")
            self.loop = LoopThread("vista-actor")
            self.gateway, self.slots = self.loop.run(self._start(settings.llm))

    async def _start(self, llm: LLMConfig) -> tuple[JobGateway, asyncio.Semaphore]:
        gateway = job_llm_gateway(llm, job_id=self.settings.run_id, budget=self.settings.llm_budget)
        await gateway.discover_context_tokens()  # ask once per actor (and load an embedded model) before any patient
        return JobGateway(gateway), asyncio.Semaphore(self.settings.patients_per_actor)

    # ------------------------------------------------------------------------------------------ one batch
    def __call__(self, batch: pa.Table) -> pa.Table:
        keys = task_keys(batch)
        files = batch.column(XML_FILE).to_pylist() if XML_FILE in batch.column_names else [None] * len(keys)
        statuses: list[StatusRow] = []
        pending: list[tuple[TaskKey, str | None]] = []
        for key, file in zip(keys, files):
            if self._has_output(key):
                statuses.append(StatusRow(key.subject_id, key.prediction_time, "skipped", None, 0, 0, 0, 0, 0.0, 0, 0.0))
            else:
                pending.append((key, file))
        if not pending:
            return status_table(statuses)
        meds_keys = [key for key, file in pending if file is None]
        read_started = time.perf_counter()
        loaded = self._load_records(meds_keys)
        read_share = (time.perf_counter() - read_started) / max(1, len(meds_keys))  # one targeted read per batch
        tasks = [self._graph(key, file, loaded, read_share if file is None else 0.0) for key, file in pending]
        self._write_index(tasks)
        if self.loop is None:  # graph only: the rows are written now
            statuses += [self._finish(task) for task in tasks]
            return status_table(statuses)
        statuses += self.loop.run(self._llm_all(tasks))
        return status_table(statuses)

    def _has_output(self, key: TaskKey) -> bool:
        status = self.store.status(key)
        return status == "done" or (status == "failed" and not self.settings.retry_failed)

    def _load_records(self, keys: list[TaskKey]) -> dict[int, PatientRecord | Exception]:
        if not keys:
            return {}
        if self.loader is None:
            raise ValueError("MEDS tasks need VistaSettings.dataset")
        return dict(self.loader.load(key.subject_id for key in keys))

    # ------------------------------------------------------------------------------------------ graph stage
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
        except Exception as exc:  # noqa: BLE001 - failure isolation: the task gets an error row, the batch goes on
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
        """One index part with the node rows of the batch's graphs (before any row names it; the driver registers
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
    async def _llm_all(self, tasks: list[_Task]) -> list[StatusRow]:
        return list(await asyncio.gather(*(self._llm_one(task) for task in tasks)))

    async def _llm_one(self, task: _Task) -> StatusRow:
        """The task's LLM stages (when its graph stage succeeded), then its row."""
        if task.outcome is not None and task.row.status == "ok":
            await self._llm_stages_within_timeout(task)
        return await asyncio.to_thread(self._finish, task)

    async def _llm_stages_within_timeout(self, task: _Task) -> None:
        async with self.slots:
            try:
                await asyncio.wait_for(self._llm_stages(task), self.settings.patient_timeout_s)
            except TimeoutError:
                stage = "display" if "toa" in task.row.stages else "toa"
                task.fail(stage, TimeoutError(f"task {task.key.name}: LLM stages not finished within "
                                              f"{self.settings.patient_timeout_s:g} s"))

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
                "n_episodes": len(timeline.episodes), "toa_rebuilt": outcome.rebuilt, "toa_s": outcome.seconds})
            if outcome.problem is not None or "display" not in settings.stages:
                return
            stage = "display"
            display, outcome = await display_stage(folder, graph, timeline, self.gateway, settings.display)
            self._record(task, "display", outcome, {
                "display_file": self._relative(outcome.file), "n_display_values": len(display.values),
                "failed_display_values": sum(v.origin == "failed" for v in display.values),
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

    # ------------------------------------------------------------------------------------------ the marker
    def _finish(self, task: _Task) -> StatusRow:
        row = task.row.with_usage(task.usage).model_copy(update={
            "wall_s": time.perf_counter() - task.started, "finished_at": datetime.now(timezone.utc)})
        self.store.write(task.key, row.model_dump_json().encode("utf-8"), failed=row.status != "ok")
        return StatusRow(task.key.subject_id, task.key.prediction_time, row.status, row.error_kind, row.llm_calls,
                         row.cache_hits, row.prompt_tokens, row.completion_tokens, row.cost_usd, row.unpriced_calls,
                         row.wall_s)

    def close(self) -> None:
        """Close the gateway (its HTTP connections, an embedded model) and the event loop."""
        loop, self.loop = getattr(self, "loop", None), None
        if loop is not None:
            loop.run(self.gateway.aclose(), timeout_s=30)
            loop.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to report to
            pass


def _patient_of(exc: BaseException) -> int | None:
    """The patient id an input error names, when it is an integer."""
    patient = getattr(exc, "patient", None) if isinstance(exc, GraphInputError) else getattr(exc, "subject_id", None)
    try:
        return int(patient) if patient is not None else None
    except (TypeError, ValueError):
        return None
