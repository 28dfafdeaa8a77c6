"""The cohort evaluation's stateful Ray Data UDF: `jobs.actor_base.TaskActor` whose work item is one patient's stored
display and truth, and whose run is the judge scoring it (`vista.evaluation.cohort`).

The truth sources are read once per actor, each block's displays in a worker thread; judge calls go through the
actor's one gateway (the embedded model loads once per actor), within the per-patient time limit. A patient that
cannot be scored gets an error row; `LLMEndpointFailure` (the job's budget stopped the job) stops the actor.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from jobs.actor_base import TaskActor
from jobs.actor_settings import ActorRunSettings
from vista.evaluation.cohort import StoredCase, load_stored_case, score_stored_case
from vista.evaluation.cohort_rows import COHORT_SCHEMA, error_row, part_record, scored_row
from vista.shared.llm import LLMConfig
from vista.shared.llm.config import redact_url
from vista.shared.llm.errors import LLMEndpointFailure
from vista.shared.llm.task_usage import usage_scope
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.progress import StatusRow


class EvaluateSettings(ActorRunSettings):
    """Everything an evaluation actor needs: the store, the truth, the judge and the run."""

    store: Path = Field(description="the store holding display/<subject>.json (and the graphs)")
    truth: Path | None = Field(None, description="synthetic dataset root holding ground_truth/oncology.jsonl")
    references: Path | None = Field(None, description="clinician reference answers (CSV or JSON)")
    out: Path
    llm: LLMConfig = Field(description="the judge")
    threshold: int = Field(8, ge=0, le=10, description="judge score counted as correct, of 10")
    judge_max_tokens: int | None = 256
    variables: Path | None = Field(None, description="display variable definitions (default: the packaged list)")


@dataclass(frozen=True, slots=True)
class _Work:
    key: TaskKey
    case: StoredCase | Exception
    started: float


class EvaluateActor(TaskActor[_Work]):
    """Scores patients as they arrive (see the module docstring)."""

    part_schema = COHORT_SCHEMA

    def __init__(self, settings: EvaluateSettings):
        super().__init__(settings, dataset=None, coding_profile=None)
        self.truths: dict[int, object] | None = None
        self.specs = None

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[_Work]:
        return await asyncio.to_thread(self._cases, keys)

    def _cases(self, keys: list[TaskKey]) -> list[_Work]:
        from vista.display import load_variables
        from vista.evaluation.options import load_truth_sources

        settings = self.settings
        if self.truths is None:  # once per actor
            self.truths = load_truth_sources(settings.truth, settings.references)
            self.specs = load_variables(settings.variables)
        work = []
        for key in keys:
            started = time.perf_counter()
            try:
                case: StoredCase | Exception = load_stored_case(settings.store, key.subject_id, self.truths)
            except Exception as exc:  # noqa: BLE001 - failure isolation: the patient gets an error row
                case = exc
            work.append(_Work(key, case, started))
        return work

    async def run(self, work: _Work) -> tuple[dict[str, object], StatusRow]:
        settings, key = self.settings, work.key
        with usage_scope() as usage:
            try:
                if isinstance(work.case, Exception):
                    raise work.case
                inner = self.gateway.gateway  # who judges, for the report (never a URL's credentials)
                scoring = score_stored_case(work.case, self.gateway, self.specs, threshold=settings.threshold,
                                            judge_max_tokens=settings.judge_max_tokens,
                                            judge_backend=inner.backend.name, judge_endpoint=redact_url(inner.endpoint))
                patient = await self.within_time_limit(scoring, f"subject {key.subject_id}")
                row = scored_row(patient, run_id=settings.run_id, wall_s=time.perf_counter() - work.started)
            except LLMEndpointFailure:  # the job's budget stopped the job: no row, the actor and the job stop
                raise
            except Exception as exc:  # noqa: BLE001 - failure isolation: any problem becomes this patient's error row
                row = error_row(key.subject_id, exc, run_id=settings.run_id, wall_s=time.perf_counter() - work.started)
        status = StatusRow(key.subject_id, None, row.status, row.error_kind, usage.calls, usage.cache_hits,
                           usage.prompt_tokens, usage.completion_tokens, usage.cost_usd, usage.unpriced_calls, row.wall_s)
        return part_record(row, usage), status

