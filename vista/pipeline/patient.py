"""One VISTA task end to end: its graph source → its graph, persisted in a store → TOA → display → `VistaRow`.

`TaskPipeline` holds what every task of a run shares (the store root, the `PipelineConfig`, the run id); a task goes
through it as a `PatientRun`, the row so far:

- `TaskPipeline.graph` reads the task's source (the caller's ``read``: a MEDS record cut at the prediction time, an
  XML file) and builds and writes its graph (`vista.graph.task_graphs`; skipped when its content hash is current):
  CPU work, so a job runs it in a worker thread;
- `TaskPipeline.write_index` writes one index part with the node rows of a block of tasks' graphs (the store's
  manifest is registered later, once, by `vista.graph.GraphStore.register_rows`); `TaskPipeline.block_graphs` does
  both for a block of tasks, from their patients' loaded records or their XML files;
- `TaskPipeline.run_llm_stages` runs the timeline, then the display (`vista.pipeline.stages`) through one gateway;
- `PatientRun.finish` gives the row, with the usage of each LLM stage.

A task that raises at any stage (bad input, a timeout, a bug) gets an error row naming the stage and the problem and
keeps what the stages before it wrote; a stage whose LLM calls failed in part makes a ``failed`` row; only
`LLMEndpointFailure` (a job's budget stopped the job) is raised.

>>> import tempfile
>>> from vista.shared.records import CodeCatalog, Event, PatientRecord
>>> record = PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2021, 3, 1, 9), "ENCOUNTER//AMB", None, None)])
>>> pipeline = TaskPipeline(Path(tempfile.mkdtemp()), PipelineConfig(), run_id="r")
>>> run = pipeline.graph(TaskKey(7), lambda: meds_source(record, CodeCatalog(), None))
>>> pipeline.write_index([run])
>>> row = run.finish()
>>> row.status, row.stages, row.graph_file.startswith("graphs/07/pack-"), row.index_file.startswith("index/part-")
('ok', 'graph', True, True)
>>> bad = pipeline.graph(TaskKey(8), lambda: xml_source(Path("/nonexistent/8.xml"))).finish()
>>> bad.status, bad.error_stage, bad.error_kind, bad.retry_class
('error', 'load', 'input', 'permanent')
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from vista.graph import GraphInputError, GraphSource
from vista.graph.store import GraphOutcome, write_index_part
from vista.graph.task_graphs import meds_source, persist_task_graph, task_folder, xml_source
from vista.shared.llm.caller import LLMCaller
from vista.shared.llm.errors import LLMEndpointFailure
from vista.shared.llm.task_usage import TaskUsage
from vista.shared.meds.task_key import TaskKey
from vista.pipeline.config import PipelineConfig
from vista.pipeline.rows import VistaRow, error_text, vista_failure_kind, vista_retry_class
from vista.pipeline.stages import StageOutcome, display_stage, timeline_stage
from vista.shared.records import CodeCatalog, PatientRecord

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PatientRun:
    """One task on its way through the stages: the row so far, its graph, the usage of each LLM stage."""

    key: TaskKey
    row: VistaRow
    started: float  # perf_counter at its start (its share of a block's read included)
    outcome: GraphOutcome | None = None
    usage: dict[str, TaskUsage] = field(default_factory=dict)

    @property
    def graph_built(self) -> bool:
        """Whether the graph stage succeeded (so the LLM stages can run)."""
        return self.outcome is not None and self.row.status == "ok"

    def fail(self, stage: str, exc: BaseException) -> None:
        """Make the row an error row at ``stage``, naming the problem."""
        kind = vista_failure_kind(exc)
        self.row = self.row.model_copy(update={"status": "error", "error_stage": stage, "error_kind": kind,
                                               "error": error_text(exc)})
        log.warning("task %s: error row at the %s stage (%s, %s)", self.key.name, stage, kind, type(exc).__name__)
        log.debug("task %s failed", self.key.name, exc_info=exc)

    def timed_out(self, exc: TimeoutError) -> None:
        """The LLM stages did not finish in time: an error row at the stage that was running."""
        self.fail("display" if "toa" in self.row.stages.split(",") else "toa", exc)

    def done(self, stage: str) -> None:
        self.row = self.row.model_copy(update={"stages": ",".join(filter(None, (self.row.stages, stage)))})

    def finish(self) -> VistaRow:
        """The task's row: its LLM usage, wall time, finish time and retry class filled in."""
        row = self.row.with_usage(self.usage)
        return row.model_copy(update={"wall_s": time.perf_counter() - self.started,
                                      "finished_at": datetime.now(timezone.utc),
                                      "retry_class": vista_retry_class(row.status, row.error_kind)})


@dataclass(frozen=True, slots=True)
class TaskPipeline:
    """VISTA's per-task stages into the store at ``out`` (see the module docstring)."""

    out: Path
    config: PipelineConfig
    run_id: str

    def graph(self, key: TaskKey, read: Callable[[], GraphSource], *, xml_file: Path | None = None,
              read_share: float = 0.0) -> PatientRun:
        """Read the task's source and persist its graph: a `PatientRun` whose row says how (or where it stopped).

        ``xml_file``: an XML task's file (its row names it before it is read, and the patient only once read);
        ``read_share``: the task's share of a block's reading done before (counted in its load time)."""
        started = time.perf_counter() - read_share
        source_name = str(xml_file) if xml_file is not None else None
        run = PatientRun(key, VistaRow(task=key.name, subject_id=None if xml_file is not None else key.subject_id,
                                       prediction_time=key.prediction_time, source=source_name, status="ok",
                                       stages="", run_id=self.run_id, finished_at=datetime.now(timezone.utc)), started)
        try:
            source = read()
        except Exception as exc:  # noqa: BLE001 - failure isolation: the task gets an error row, the others go on
            run.row = run.row.model_copy(update={"subject_id": run.row.subject_id or _patient_of(exc),
                                                 "load_s": time.perf_counter() - started})
            run.fail("load", exc)
            return run
        loaded_at = time.perf_counter()
        run.row = run.row.model_copy(update={"subject_id": source.subject_id, "load_s": loaded_at - started,
                                             "source": source_name or source.origin})
        try:
            outcome = persist_task_graph(source, self.out, key, need_graph=self.config.llm_stages, xml_file=xml_file)
        except Exception as exc:  # noqa: BLE001
            run.row = run.row.model_copy(update={"graph_s": time.perf_counter() - loaded_at})
            run.fail("graph", exc)
            return run
        facts = outcome.facts
        run.outcome = outcome
        run.row = run.row.model_copy(update={
            "content_hash": facts.content_hash, "n_nodes": facts.n_nodes, "n_edges": facts.n_edges,
            "n_events": facts.n_events, "n_encounters": facts.n_encounters, "graph_file": outcome.file,
            "graph_rebuilt": outcome.rebuilt, "graph_s": time.perf_counter() - loaded_at,
        })
        run.done("graph")
        return run

    def block_graphs(self, tasks: list[tuple[TaskKey, Path | None]], records: Mapping[int, PatientRecord | Exception],
                     catalog: CodeCatalog | None, *, read_s: float = 0.0,
                     coding_profile: str | None = None) -> list[PatientRun]:
        """A block's graphs, then its index part (`write_index`): a MEDS task (no XML file) from its patient's loaded
        record (an exception there is its error row), sharing the block's ``read_s`` of reading; an XML task from its
        file, whose ``<eventstream>`` codes ``coding_profile`` spells."""
        share = read_s / max(1, sum(1 for _, file in tasks if file is None))

        def record_source(key: TaskKey) -> GraphSource:
            record = records[key.subject_id]
            if not isinstance(record, PatientRecord):
                raise record
            return meds_source(record, catalog, key.prediction_time)

        runs = [self.graph(key, lambda key=key: record_source(key), read_share=share) if file is None
                else self.graph(key, lambda file=file: xml_source(file, coding_profile), xml_file=file)
                for key, file in tasks]
        self.write_index(runs)
        return runs

    def write_index(self, runs: Iterable[PatientRun]) -> None:
        """One index part with the node rows of the runs' graphs, named in their rows (before any row names it)."""
        built = [run for run in runs if run.outcome is not None]
        if not built:
            return
        part = write_index_part(self.out, (run.outcome.index for run in built))
        for run in built:
            run.row = run.row.model_copy(update={"index_file": part})

    async def run_llm_stages(self, run: PatientRun, gateway: LLMCaller) -> None:
        """The timeline, then (when chosen, and the timeline is complete) the display, into the run's row."""
        folder = task_folder(self.out, run.key)
        graph = run.outcome.graph
        stage = "toa"
        try:
            timeline, outcome = await timeline_stage(folder, graph, gateway, self.config.toa)
            self._record(run, "toa", outcome, {
                "toa_file": self._relative(outcome.file), "n_chunks": timeline.stats.chunks,
                "failed_chunks": timeline.stats.failed_chunks, "n_timeline_events": len(timeline.events),
                "misdated_timeline_events": timeline.stats.misdated_events,
                "n_episodes": len(timeline.episodes), "toa_rebuilt": outcome.rebuilt, "toa_s": outcome.seconds})
            if outcome.problem is not None or not self.config.runs_display:
                return
            stage = "display"
            display, outcome = await display_stage(folder, graph, timeline, gateway, self.config.display)
            self._record(run, "display", outcome, {
                "display_file": self._relative(outcome.file), "n_display_values": len(display.values),
                "failed_display_values": sum(v.origin == "failed" for v in display.values),
                "uncited_display_values": len(display.uncited_keys()),
                "display_rebuilt": outcome.rebuilt, "display_s": outcome.seconds})
        except LLMEndpointFailure:  # the job's budget stopped the job: no row, the job stops
            raise
        except Exception as exc:  # noqa: BLE001 - failure isolation
            run.fail(stage, exc)

    def _record(self, run: PatientRun, stage: str, outcome: StageOutcome, update: dict[str, object]) -> None:
        run.usage[stage] = outcome.usage
        run.row = run.row.model_copy(update=update)
        if outcome.problem is None:
            run.done(stage)
        else:
            run.row = run.row.model_copy(update={"status": "failed", "error_stage": stage,
                                                 "error_kind": "llm_call_failed", "error": outcome.problem})
            log.warning("task %s: %s stage incomplete (%s)", run.key.name, stage, outcome.problem)

    def _relative(self, path: Path) -> str:
        return str(path.relative_to(self.out))


def _patient_of(exc: BaseException) -> int | None:
    """The patient id an input error names, when it is an integer."""
    patient = getattr(exc, "patient", None) if isinstance(exc, GraphInputError) else getattr(exc, "subject_id", None)
    try:
        return int(patient) if patient is not None else None
    except (TypeError, ValueError):
        return None
