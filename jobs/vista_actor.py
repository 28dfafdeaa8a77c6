"""The VISTA job's stateful Ray Data UDF: `jobs.actor_base.TaskActor` whose work item is one task with its graph
built, and whose run is the task's LLM stages and its row — each step of `vista.pipeline.TaskPipeline`.

Preparing a block: MEDS tasks are read by the actor itself (targeted parquet reads, `vista.meds.patient_loader`), XML tasks
are files read from ``--xml-dir``; each task's graph is built and written into the graph store at the output
directory, then one node-index part for the block, in a worker thread (it is CPU work: ~10 ms for a typical
patient). Running a task: its LLM stages on the actor's event loop — at most ``patients_per_actor`` at a time, all
sharing one gateway (its concurrency limit, its response cache, per-task usage through `jobs.job_gateway`) — within
the per-task time limit, then its row (`vista.pipeline.rows.VistaRow`) to the actor's part files. A task that raises
at any stage gets an error row and the others go on; a task run again (a retry, or a row an actor lost when it was
killed) costs nothing twice (the stores skip unchanged graphs, timelines and displays).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from vista.graph import GraphSource
from vista.graph.task_graphs import meds_source, xml_source
from vista.llm import LLMConfig
from vista.pipeline import VISTA_PART_SCHEMA, PatientRun, PipelineConfig, TaskPipeline, vista_part_record
from vista.records import PatientRecord

from jobs.actor_base import TaskActor
from jobs.actor_settings import ActorRunSettings
from jobs.progress import StatusRow
from jobs.tasks import TaskKey
from jobs.vista_tasks import XML_FILE


class VistaSettings(ActorRunSettings):
    """Everything a VISTA actor needs: where its tasks come from, VISTA's `PipelineConfig`, the LLM and the run."""

    out: Path = Field(description="output directory (shared by every node)")
    dataset: Path | None = Field(None, description="MEDS dataset root, for MEDS tasks")
    coding_profile: str | None = Field(None, description="how the dataset (or the XML) spells codes (vista.coding "
                                       "profile name or TOML path); None: detected (XML: vista_xml)")
    xml_dir: Path | None = Field(None, description="directory of patient XML files, for XML tasks")
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig, description="the stages and their settings")
    llm: LLMConfig | None = Field(None, description="the LLM of the LLM stages (None: graph only)")


class VistaActor(TaskActor[PatientRun]):
    """Runs VISTA tasks as they arrive (see the module docstring)."""

    part_schema = VISTA_PART_SCHEMA

    def __init__(self, settings: VistaSettings):
        if settings.pipeline.llm_stages and settings.llm is None:
            raise ValueError("the LLM stages of the pipeline need LLM settings")
        super().__init__(settings, dataset=settings.dataset, coding_profile=settings.coding_profile)
        self.pipeline = TaskPipeline(settings.out, settings.pipeline, settings.run_id)

    def uses_llm(self) -> bool:
        return self.settings.pipeline.llm_stages

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[PatientRun]:
        files = batch.column(XML_FILE).to_pylist() if XML_FILE in batch.column_names else [None] * len(keys)
        return await asyncio.to_thread(self._graphs, list(zip(keys, files)))

    async def run(self, task: PatientRun) -> tuple[dict[str, object], StatusRow]:
        if self.gateway is not None and task.graph_built:
            try:
                await self.within_time_limit(self.pipeline.run_llm_stages(task, self.gateway),
                                             f"task {task.key.name}: LLM stages")
            except TimeoutError as exc:
                task.timed_out(exc)
        row = task.finish()
        return vista_part_record(task.key, row), StatusRow.of(task.key, row)

    def _graphs(self, pending: list[tuple[TaskKey, str | None]]) -> list[PatientRun]:
        """The block's graphs, built and persisted, and one index part with their node rows."""
        meds_keys = [key for key, file in pending if file is None]
        read_started = time.perf_counter()
        loaded = self._load_records(meds_keys)
        read_share = (time.perf_counter() - read_started) / max(1, len(meds_keys))  # one targeted read per block
        tasks = []
        for key, file in pending:
            if file is None:
                tasks.append(self.pipeline.graph(key, lambda key=key: self._meds_source(key, loaded),
                                                 read_share=read_share))
            else:
                path = self._xml_file(file)
                tasks.append(self.pipeline.graph(key, lambda path=path: xml_source(path, self.settings.coding_profile),
                                                 xml_file=path))
        self.pipeline.write_index(tasks)
        return tasks

    def _load_records(self, keys: list[TaskKey]) -> dict[int, PatientRecord | Exception]:
        if not keys:
            return {}
        if self.loader is None:
            raise ValueError("MEDS tasks need VistaSettings.dataset")
        return dict(self.loader.load(key.subject_id for key in keys))

    def _meds_source(self, key: TaskKey, loaded: dict[int, PatientRecord | Exception]) -> GraphSource:
        record = loaded[key.subject_id]
        if not isinstance(record, PatientRecord):
            raise record
        return meds_source(record, self.catalog, key.prediction_time)

    def _xml_file(self, file: str) -> Path:
        if self.settings.xml_dir is None:
            raise ValueError("XML tasks need VistaSettings.xml_dir")
        return self.settings.xml_dir / file
