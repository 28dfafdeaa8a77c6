"""The predict job's stateful Ray Data UDF: one per actor, holding the dataset reader and the LLM gateway.

Each call receives a batch of tasks (label rows), reads those patients from the MEDS dataset (targeted parquet
reads, `jobs.patient_loader`), and runs them concurrently on the actor's event loop — at most
``patients_per_actor`` at a time, all sharing one gateway and its concurrency limit. Every task ends with its
per-patient JSON written atomically (the "done" marker) and one status row returned to the driver; a task that
raises (bad data, a timeout, a bug) gets an error row and the others go on. A task that already has its marker
is skipped, so a batch Ray retries after an actor died recomputes nothing that was finished.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from trajonco.agents.results import AnyCancerResult, PatientResult
from trajonco.pipeline import PipelineConfig, run_any_cancer, run_patient
from vista.llm import LLMConfig, LLMGateway
from vista.records import PatientRecord

from jobs.job_gateway import JobGateway, NullLedger, TaskUsage, usage_scope
from jobs.loop_thread import LoopThread
from jobs.outputs import MarkerStore
from jobs.patient_loader import Loaded, PatientLoader
from jobs.prediction_rows import PredictionRow, RowContext, patient_json, row_from_failure, row_from_result
from jobs.preprocess_pool import PreprocessorPool
from jobs.progress import StatusRow, status_table
from jobs.tasks import BOOLEAN_VALUE, TaskKey, task_keys

log = logging.getLogger(__name__)

PATIENTS = "patients"
"""Folder of the per-patient JSON files (the done markers) under the output directory."""


class PredictSettings(BaseModel):
    """Everything a predict actor needs (shipped to every actor; small and picklable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: Path = Field(description="MEDS dataset root (readable from every node)")
    out: Path = Field(description="output directory (shared by every node)")
    pipeline: PipelineConfig
    any_cancer: bool = Field(False, description="assess every cancer the patient's sex allows and max-pool the scores")
    llm: LLMConfig
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="predicted_boolean_value = probability >= threshold")
    patient_timeout_s: float = Field(3600.0, gt=0, description="a task still running after this becomes an error row")
    patients_per_actor: int = Field(4, ge=1, description="tasks an actor runs at once (its asyncio concurrency)")
    retry_failed: bool = Field(False, description="run tasks whose earlier output is an error row again")
    run_id: str

    def row_context(self) -> RowContext:
        return RowContext(cancer="any" if self.any_cancer else self.pipeline.cancer, variant=self.pipeline.variant.value,
                          model=self.llm.model, threshold=self.threshold, run_id=self.run_id)


class PredictActor:
    """Runs batches of prediction tasks (see the module docstring)."""

    def __init__(self, settings: PredictSettings, pool: PreprocessorPool | None = None):
        self.settings = settings
        self.context = settings.row_context()
        self.store = MarkerStore(settings.out, PATIENTS)
        self.loader = PatientLoader(settings.dataset)
        self.catalog = self.loader.catalog()
        self.loop = LoopThread("predict-actor")
        self.gateway, self.slots = self.loop.run(self._start(pool))

    async def _start(self, pool: PreprocessorPool | None) -> tuple[JobGateway, asyncio.Semaphore]:
        gateway = LLMGateway(self.settings.llm, job_id=self.settings.run_id, ledger=NullLedger())
        await gateway.discover_context_tokens()  # ask once per actor (and load an embedded model) before any patient
        return JobGateway(gateway, remote=pool), asyncio.Semaphore(self.settings.patients_per_actor)

    def __call__(self, batch: pa.Table) -> pa.Table:
        keys = task_keys(batch)
        labels = batch.column(BOOLEAN_VALUE).to_pylist() if BOOLEAN_VALUE in batch.column_names else [None] * len(keys)
        rows: list[StatusRow] = []
        pending: list[tuple[TaskKey, bool | None]] = []
        for key, label in zip(keys, labels):
            if self._has_output(key):
                rows.append(StatusRow(key.subject_id, key.prediction_time, "skipped", None, 0, 0, 0, 0, 0.0, 0, 0.0))
            else:
                pending.append((key, label))
        if pending:
            records = self.loader.load(key.subject_id for key, _ in pending)
            rows += self.loop.run(self._run_all([(key, label, records[key.subject_id]) for key, label in pending]))
        return status_table(rows)

    def _has_output(self, key: TaskKey) -> bool:
        status = self.store.status(key)
        return status == "done" or (status == "failed" and not self.settings.retry_failed)

    async def _run_all(self, work: list[tuple[TaskKey, bool | None, Loaded]]) -> list[StatusRow]:
        return list(await asyncio.gather(*(self._run_one(key, label, loaded) for key, label, loaded in work)))

    async def _run_one(self, key: TaskKey, label: bool | None, loaded: Loaded) -> StatusRow:
        async with self.slots:
            started = time.perf_counter()
            result: PatientResult | AnyCancerResult | None = None
            with usage_scope() as usage:
                try:
                    if not isinstance(loaded, PatientRecord):
                        raise loaded
                    result = await self._assess(loaded, key)
                    row = row_from_result(key, label, result, usage, self.context, wall_s=time.perf_counter() - started)
                except Exception as exc:  # noqa: BLE001 - failure isolation: any problem becomes this task's error row
                    row = self._error_row(key, label, exc, usage, started)
            await asyncio.to_thread(self.store.write, key, patient_json(row, result, usage), failed=not row.scored)
            return StatusRow(row.subject_id, row.prediction_time, row.status, row.error_kind, row.llm_calls, row.cache_hits,
                             row.prompt_tokens, row.completion_tokens, row.cost_usd, row.unpriced_calls, row.wall_s)

    async def _assess(self, record: PatientRecord, key: TaskKey) -> PatientResult | AnyCancerResult:
        runner = run_any_cancer if self.settings.any_cancer else run_patient
        coro = runner(record, self.catalog, self.gateway, self.settings.pipeline, prediction_time=key.prediction_time)
        try:
            return await asyncio.wait_for(coro, self.settings.patient_timeout_s)
        except TimeoutError:
            raise TimeoutError(f"subject {key.subject_id}: not finished within {self.settings.patient_timeout_s:g} s") from None

    def _error_row(self, key: TaskKey, label: bool | None, exc: Exception, usage: TaskUsage, started: float) -> PredictionRow:
        row = row_from_failure(key, label, exc, usage, self.context, wall_s=time.perf_counter() - started)
        log.warning("subject %s: error row (%s, %s)", key.subject_id, row.error_kind, type(exc).__name__)
        log.debug("subject %s failed", key.subject_id, exc_info=exc)
        return row

    def __del__(self) -> None:
        loop = getattr(self, "loop", None)
        if loop is not None:
            loop.close()
