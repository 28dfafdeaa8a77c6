"""The predict job's stateful Ray Data UDF: an async generator per actor, holding the dataset reader, the LLM gateway
and the actor's part-file writer.

Streaming, not batch by batch. Each call receives a small block of tasks (label rows), reads those patients from
the MEDS dataset (one targeted read per block, `jobs.patient_loader`) and starts every one of them as soon as one of
the actor's ``patients_per_actor`` slots is free; Ray Data keeps ``tasks_per_actor`` blocks in flight per actor
(its Ray ``max_concurrency``), so patients of the next blocks are already waiting when a slot frees — a slow
patient holds its slot only, never its block's other slots. Each patient's status row is yielded the moment it is
done. (Ray Data 2.60 gathers an async generator's rows per call before passing them downstream, for
deterministic output order; small blocks keep that wait short, and it delays only the driver's progress count,
not the next patient nor the row's write.)

Outputs. A finished task's row (`trajonco.prediction_rows`: the prediction columns, plus the whole result and usage as
JSON) goes to the actor's `jobs.row_parts.PartWriter`, which writes a part file when it holds ``flush_rows``
rows, when the oldest has waited ``flush_s`` seconds (a background task on the actor's event loop), and whenever
the actor has no task left running — so the last call to finish on an actor has written every row before its own
status reaches the driver, and a job that ends has every row on disk. A task that raises (bad data, a timeout, a
bug) gets an error row and the others go on. An actor killed mid-run loses at most its unwritten rows; the driver
runs those tasks again, and the LLM response cache answers their calls for free.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from trajonco.agents.results import AnyCancerResult, PatientResult
from trajonco.pipeline import PipelineConfig, run_any_cancer, run_patient
from trajonco.prediction_rows import PART_SCHEMA, PredictionRow, RowContext, part_record, row_from_failure, row_from_result
from vista.llm import LLMConfig
from vista.llm.errors import LLMEndpointFailure
from vista.llm.task_usage import TaskUsage, usage_scope
from vista.records import PatientRecord
from vista.storage import normalize

from jobs.job_gateway import JobGateway, job_llm_gateway
from jobs.llm_budget import BudgetRef
from jobs.patient_loader import Loaded, PatientLoader
from jobs.preprocess_pool import PreprocessorPool
from jobs.progress import StatusRow, status_table
from jobs.row_parts import PartWriter
from jobs.tasks import BOOLEAN_VALUE, TaskKey, task_keys

log = logging.getLogger(__name__)


class PredictSettings(BaseModel):
    """Everything a predict actor needs (shipped to every actor; small and picklable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str = Field(description="MEDS dataset root, an absolute path or an object-store URI (readable from "
                         "every node)")
    coding_profile: str | None = Field(None, description="how the dataset spells codes (vista.coding profile name or "
                                       "TOML path); None: detected by each actor")
    out: str = Field(description="output directory, an absolute path or an object-store URI (shared by every node)")
    pipeline: PipelineConfig
    any_cancer: bool = Field(False, description="assess every cancer the patient's sex allows and max-pool the scores")
    llm: LLMConfig
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="predicted_boolean_value = probability >= threshold")
    patient_timeout_s: float = Field(3600.0, gt=0, description="a task still running after this becomes an error row")
    patients_per_actor: int = Field(4, ge=1, description="tasks an actor runs at once (its asyncio concurrency)")
    flush_rows: int = Field(256, ge=1, description="rows an actor buffers before writing a part file")
    flush_s: float = Field(10.0, gt=0, description="longest a finished row waits in an actor's buffer, in seconds")
    run_id: str
    llm_budget: BudgetRef | None = Field(None, description="the job's shared LLM budget (jobs.llm_budget); None: "
                                         "only the actor's own gateway limits")

    @field_validator("dataset", "out", mode="before")
    @classmethod
    def _location(cls, value: object) -> object:
        """A `Path` as an absolute path string; a URI as given (`vista.storage.normalize`)."""
        return normalize(value) if isinstance(value, (str, Path)) else value

    def row_context(self) -> RowContext:
        return RowContext(cancer="any" if self.any_cancer else self.pipeline.cancer, variant=self.pipeline.variant.value,
                          model=self.llm.model, threshold=self.threshold, run_id=self.run_id)


class PredictActor:
    """Runs prediction tasks as they arrive (see the module docstring)."""

    def __init__(self, settings: PredictSettings, pool: PreprocessorPool | None = None):
        self.settings = settings
        self.pool = pool
        self.context = settings.row_context()
        self.loader = PatientLoader(settings.dataset, settings.coding_profile)
        self.catalog = self.loader.catalog()
        self.parts = PartWriter(settings.out, run_id=settings.run_id, schema=PART_SCHEMA, flush_rows=settings.flush_rows,
                                flush_s=settings.flush_s)
        # made on the first call, on the event loop Ray Data runs this UDF on (HTTP clients belong to their loop)
        self.gateway: JobGateway | None = None
        self.slots: asyncio.Semaphore | None = None
        self._starting: asyncio.Lock | None = None
        self._flusher: asyncio.Task | None = None
        self.active = 0  # tasks received and not finished, over every call

    async def _start_gateway(self) -> JobGateway:
        """The actor's gateway (asks the endpoint's context window, or loads an embedded model, once per actor)."""
        gateway = job_llm_gateway(self.settings.llm, job_id=self.settings.run_id, budget=self.settings.llm_budget)
        await gateway.discover_context_tokens()
        return JobGateway(gateway, remote=self.pool)

    async def _ready(self) -> JobGateway:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.gateway is None:
                self.gateway = await self._start_gateway()
                self.slots = asyncio.Semaphore(self.settings.patients_per_actor)
                self._flusher = asyncio.get_running_loop().create_task(self._flush_when_due())
        return self.gateway

    async def __call__(self, batch: pa.Table) -> AsyncIterator[pa.Table]:
        keys = task_keys(batch)
        labels = batch.column(BOOLEAN_VALUE).to_pylist() if BOOLEAN_VALUE in batch.column_names else [None] * len(keys)
        self.active += len(keys)
        try:
            await self._ready()
            records = await asyncio.to_thread(self.loader.load, [key.subject_id for key in keys])
            running = [asyncio.ensure_future(self._run_one(key, label, records[key.subject_id]))
                       for key, label in zip(keys, labels)]
            try:
                for finished in asyncio.as_completed(running):
                    yield status_table([await finished])
            finally:
                for task in running:
                    task.cancel()
        finally:
            self.active -= len(keys)
            if self.active == 0:  # nothing left running here: write every row before this call's status leaves
                await asyncio.to_thread(self.parts.flush)

    async def _flush_when_due(self) -> None:
        period = min(1.0, self.settings.flush_s / 2)
        while True:
            await asyncio.sleep(period)
            if self.parts.due():
                try:
                    await asyncio.to_thread(self.parts.flush)
                except OSError:  # kept in the buffer; the next flush tries again
                    log.warning("could not write a part file of %d rows; will retry", self.parts.pending, exc_info=True)

    async def _run_one(self, key: TaskKey, label: bool | None, loaded: Loaded) -> StatusRow:
        assert self.slots is not None
        async with self.slots:
            started = time.perf_counter()
            started_at = datetime.now(timezone.utc)
            result: PatientResult | AnyCancerResult | None = None
            with usage_scope() as usage:
                try:
                    if not isinstance(loaded, PatientRecord):
                        raise loaded
                    result = await self._assess(loaded, key)
                    row = row_from_result(key, label, result, usage, self.context, wall_s=time.perf_counter() - started,
                                          started_at=started_at)
                except LLMEndpointFailure:  # the job's budget stopped the job: no row, the actor and the job stop
                    raise
                except Exception as exc:  # noqa: BLE001 - failure isolation: any problem becomes this task's error row
                    result = None
                    row = self._error_row(key, label, exc, usage, started, started_at)
        self.parts.add(part_record(row, result, usage))
        if self.parts.due():
            await asyncio.to_thread(self.parts.flush)
        return StatusRow(row.subject_id, row.prediction_time, row.status, row.error_kind, row.llm_calls, row.cache_hits,
                         row.prompt_tokens, row.completion_tokens, row.cost_usd, row.unpriced_calls, row.wall_s,
                         started_at.timestamp())

    async def _assess(self, record: PatientRecord, key: TaskKey) -> PatientResult | AnyCancerResult:
        runner = run_any_cancer if self.settings.any_cancer else run_patient
        coro = runner(record, self.catalog, self.gateway, self.settings.pipeline, prediction_time=key.prediction_time)
        try:
            return await asyncio.wait_for(coro, self.settings.patient_timeout_s)
        except TimeoutError:
            raise TimeoutError(f"subject {key.subject_id}: not finished within {self.settings.patient_timeout_s:g} s") from None

    def _error_row(self, key: TaskKey, label: bool | None, exc: Exception, usage: TaskUsage, started: float,
                   started_at: datetime) -> PredictionRow:
        row = row_from_failure(key, label, exc, usage, self.context, wall_s=time.perf_counter() - started,
                               started_at=started_at)
        log.warning("subject %s: error row (%s, %s)", key.subject_id, row.error_kind, type(exc).__name__)
        log.debug("subject %s failed", key.subject_id, exc_info=exc)
        return row

    def __del__(self) -> None:  # a graceful actor exit (Ray Data scaling the pool down): write what is buffered
        parts = getattr(self, "parts", None)
        if parts is not None and parts.pending:
            try:
                parts.flush()
            except Exception:  # noqa: BLE001 - best effort at exit; the driver reruns tasks without a row
                log.warning("could not write %d buffered rows at actor exit", parts.pending, exc_info=True)
