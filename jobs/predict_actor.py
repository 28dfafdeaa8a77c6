"""The predict job's stateful Ray Data UDF: `jobs.actor_base.TaskActor` whose work item is one label row and its
patient's record, and whose run is the TrajOnco chain (`trajonco.pipeline`) to its row (`trajonco.prediction_rows`).

A block's patients are read with one targeted MEDS read; each task runs within the per-patient time limit, its LLM
calls counted in a usage scope; one that raises gets an error row, `LLMEndpointFailure` (the job's budget stopped the
job) stops the actor. With ``graphs`` (``--graphs STORE``) the same read also serves VISTA: the block's MEDS Graphs
are persisted into the store in a worker thread while its chains run (`vista.graph.record_graphs`), each row
carrying its graph's columns; a graph that fails is said in its row, the prediction kept. (`vista.graph` is imported
only then: an actor that persists no graph starts without it.)
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from pydantic import Field, field_validator

from jobs.actor_base import TaskActor
from jobs.actor_settings import ActorRunSettings
from jobs.preprocess_pool import PreprocessorPool
from trajonco.agents.results import AnyCancerResult, PatientResult
from trajonco.any_cancer import run_any_cancer
from trajonco.pipeline import PipelineConfig, run_patient
from trajonco.prediction_rows import PART_SCHEMA, RowContext, assessed_record
from vista.shared.llm import LLMConfig
from vista.shared.meds.labels import BOOLEAN_VALUE
from vista.shared.meds.patient_loader import Loaded
from vista.shared.meds.task_key import TaskKey
from vista.shared.records import PatientRecord
from vista.shared.runs.progress import StatusRow
from vista.shared.storage import normalize

if TYPE_CHECKING:
    from vista.graph.record_graphs import RecordGraph

log = logging.getLogger(__name__)


class PredictSettings(ActorRunSettings):
    """Everything a predict actor needs: the data, TrajOnco's `PipelineConfig`, the LLM and the run."""

    dataset: str = Field(description="MEDS dataset root, an absolute path or an object-store URI (readable from "
                         "every node)")
    coding_profile: str | None = Field(None, description="how the dataset spells codes (vista.shared.coding profile name or "
                                       "TOML path); None: detected by each actor")
    out: str = Field(description="output directory, an absolute path or an object-store URI (shared by every node)")
    pipeline: PipelineConfig
    any_cancer: bool = Field(False, description="assess every cancer the patient's sex allows and max-pool the scores")
    llm: LLMConfig
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="predicted_boolean_value = probability >= threshold")
    graphs: Path | None = Field(None, description="graph store (a local or shared directory) to persist each "
                                "patient's MEDS Graph into from the loaded record; None: no graphs")

    @field_validator("dataset", "out", mode="before")
    @classmethod
    def _location(cls, value: object) -> object:
        """A `Path` as an absolute path string; a URI as given (`vista.shared.storage.normalize`)."""
        return normalize(value) if isinstance(value, (str, Path)) else value

    def row_context(self) -> RowContext:
        return RowContext(cancer="any" if self.any_cancer else self.pipeline.cancer, variant=self.pipeline.variant.value,
                          model=self.llm.model, backend=self.llm.backend, endpoint_host=self.llm.endpoint_host,
                          threshold=self.threshold, run_id=self.run_id)


@dataclass(frozen=True, slots=True)
class _Work:
    key: TaskKey
    label: bool | None
    loaded: Loaded
    graphs: asyncio.Future[dict[int, RecordGraph]] | None = None  # the block's graphs, by subject


class PredictActor(TaskActor[_Work]):
    """Runs prediction tasks as they arrive (see the module docstring)."""

    part_schema = PART_SCHEMA

    def __init__(self, settings: PredictSettings, pool: PreprocessorPool | None = None):
        self.graphs = None
        if settings.graphs is not None:
            from vista.graph.record_graphs import GRAPH_SCHEMA, RecordGraphs

            self.part_schema = pa.schema([*PART_SCHEMA, *GRAPH_SCHEMA])
            self.graphs = RecordGraphs(settings.graphs)
        super().__init__(settings, dataset=settings.dataset, coding_profile=settings.coding_profile, pool=pool)
        self.context = settings.row_context()

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[_Work]:
        labels = batch.column(BOOLEAN_VALUE).to_pylist() if BOOLEAN_VALUE in batch.column_names else [None] * len(keys)
        records = await asyncio.to_thread(self.loader.load, [key.subject_id for key in keys])
        # CPU work in a worker thread, beside the chains (which start now): awaited only to finish each row
        graphs = (asyncio.ensure_future(asyncio.to_thread(self.graphs.persist, records, self.catalog))
                  if self.graphs is not None else None)
        return [_Work(key, label, records[key.subject_id], graphs) for key, label in zip(keys, labels)]

    async def run(self, work: _Work) -> tuple[dict[str, object], StatusRow]:
        record, row = await assessed_record(work.key, work.label, self.context, lambda: self._assess(work))
        if work.graphs is not None:
            record |= (await self._graph_of(work)).columns()
        return record, StatusRow.of(work.key, row, row.started_at)

    async def _graph_of(self, work: _Work) -> RecordGraph:
        try:
            return (await asyncio.shield(work.graphs))[work.key.subject_id]  # one block's future, many rows
        except Exception as exc:  # noqa: BLE001 - a bug in the graph step must not cost the prediction
            from vista.graph.record_graphs import RecordGraph

            log.warning("subject %s: no graph (%s)", work.key.subject_id, type(exc).__name__, exc_info=True)
            return RecordGraph.failed(exc)

    async def _assess(self, work: _Work) -> PatientResult | AnyCancerResult:
        if not isinstance(work.loaded, PatientRecord):
            raise work.loaded
        runner = run_any_cancer if self.settings.any_cancer else run_patient
        coro = runner(work.loaded, self.catalog, self.gateway, self.settings.pipeline,
                      prediction_time=work.key.prediction_time)
        return await self.within_time_limit(coro, f"subject {work.key.subject_id}")
