"""The VISTA job's stateful Ray Data UDF: `jobs.actor_base.TaskActor` whose work item is one task with its graph
built, and whose run is the task's LLM stages and its row — each step of `vista.pipeline.TaskPipeline`.

Preparing a block, in a worker thread (CPU work): one targeted read of its MEDS patients (`vista.shared.meds.patient_loader`),
then its graphs and index part (`TaskPipeline.block_graphs`). Running a task: its LLM stages on the event loop,
through the actor's one gateway, within the per-task time limit; its row to the part files. A task that raises gets
an error row; one run again costs nothing twice (the stores skip unchanged graphs, timelines and displays).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from jobs.actor_base import TaskActor
from jobs.actor_settings import ActorRunSettings
from jobs.vista_tasks import XML_FILE
from vista.pipeline import VISTA_PART_SCHEMA, PatientRun, PipelineConfig, TaskPipeline, vista_part_record
from vista.shared.llm import LLMConfig
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.progress import StatusRow


class VistaSettings(ActorRunSettings):
    """Everything a VISTA actor needs: where its tasks come from, VISTA's `PipelineConfig`, the LLM and the run."""

    out: Path = Field(description="output directory (shared by every node)")
    dataset: Path | None = Field(None, description="MEDS dataset root, for MEDS tasks")
    coding_profile: str | None = Field(None, description="how the dataset (or the XML) spells codes (vista.shared.coding "
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
        meds = [key.subject_id for key, file in pending if file is None]
        if meds and self.loader is None:
            raise ValueError("MEDS tasks need VistaSettings.dataset")
        if any(file is not None for _, file in pending) and self.settings.xml_dir is None:
            raise ValueError("XML tasks need VistaSettings.xml_dir")
        started = time.perf_counter()
        records = dict(self.loader.load(meds)) if meds else {}  # one targeted read per block
        tasks = [(key, self.settings.xml_dir / file if file is not None else None) for key, file in pending]
        return self.pipeline.block_graphs(tasks, records, self.catalog, read_s=time.perf_counter() - started,
                                          coding_profile=self.settings.coding_profile)
