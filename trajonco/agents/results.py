"""The typed result of one patient's assessment (and of the any-cancer assessment: one chain, or max pooling), ready for JSON.

``probability`` is ``risk_score / 10``: a monotone, probability-like ranking score in (0, 1] for AUROC/AUPRC and for
MEDS-DEV's ``predicted_boolean_probability`` column. It is not calibrated: a 7 does not mean a 70 % chance.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trajonco.agents.schemas import RiskLevel


class Variant(StrEnum):
    """How a patient is assessed."""

    ONE_STAGE = "one_stage"
    TWO_STAGE = "two_stage"
    SINGLE_AGENT = "single_agent"


class Stage(StrEnum):
    """Timed stages of an assessment (also the agent names given to the gateway)."""

    PREPROCESS = "preprocessor"
    WORKERS = "worker"
    MANAGER = "manager"
    SINGLE = "single_agent"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentError(_Frozen):
    """One failed agent call, kept in the result instead of being dropped."""

    agent: str = Field(description="preprocessor, worker, manager or single_agent")
    chunk_index: int | None = Field(description="the chunk the agent was reading (None for the manager)")
    kind: str = Field(description="the gateway's error kind (invalid_output, timeout, ...) or 'skipped'")
    message: str = Field(description="what went wrong, as reported by the gateway")


class AgentUsage(_Frozen):
    """Calls and tokens of one agent role for one patient, summed from the gateway's per-call usage."""

    calls: int = 0
    cache_hits: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = Field(0, description="requests sent to the model, re-asks and retries included (0 for cache hits)")
    model_seconds: float = Field(0.0, description="the gateway's latency of the calls, summed (waits and retries included)")


class ChunkRisk(_Frozen):
    """A worker's step of the per-chunk risk trajectory."""

    chunk_index: int
    start_time: datetime | None
    end_time: datetime | None
    risk_level: RiskLevel | None = Field(description="None when the worker's call failed")
    new_events: int = Field(0, description="events the worker reported")
    stored_events: int = Field(0, description="of those, events new to the long-term memory")


class SourceRow(_Frozen):
    """Where an event id comes from in the MEDS dataset (`PatientRecord.provenance`). The event id is also the
    event's node id in the patient's MEDS Graph (`vista.graph`: source events keep their record ids), so evidence
    cites graph nodes too: ``vista source --store STORE --subject S <event_id>`` opens it in a store that
    ``jobs.predict --graphs STORE`` (or ``vista build``) wrote."""

    event_id: str = Field(description="the record's event id: also the event's node id in the patient's MEDS Graph")
    shard: str
    row: int


EvidenceFlag = Literal["unsourced", "before_record", "after_record"]
"""Why an evidence event is not a fact of the record: it cites no element the agent read (unsourced), or it is
dated before the record's first event (birth included) or after its last event before the prediction time."""


class EvidenceEvent(_Frozen):
    """A final cancer-related event with the timeline elements and MEDS rows it was drawn from. A flagged event is
    kept and shown as flagged (what the agent said), never as a fact of the record (`trajonco.agents.evidence`)."""

    timestamp: date
    description: str
    sources: tuple[SourceRow, ...] = ()
    flags: tuple[EvidenceFlag, ...] = Field((), description="unsourced / before_record / after_record; empty: "
                                            "sourced and dated within the record")

    @property
    def out_of_record(self) -> bool:
        return "before_record" in self.flags or "after_record" in self.flags


class ChunkStats(_Frozen):
    """Sizes of the timeline and of the chunks the agents read (C; and C_new for the two-stage variant)."""

    timeline_events: int
    timeline_tokens: int
    chunk_tokens: int = Field(description="the chunk limit l used")
    n_chunks: int = Field(description="C: chunks of the full timeline")
    n_chunks_reduced: int | None = Field(None, description="C_new: chunks after the two-stage filter")
    reduced_events: int | None = Field(None, description="events kept by the preprocessors")
    reduced_tokens: int | None = None


class Latency(_Frozen):
    """Wall time per stage, in seconds (stages a variant does not run stay 0)."""

    preprocess: float = 0.0
    workers: float = 0.0
    manager: float = 0.0
    single_agent: float = 0.0
    total: float = 0.0


Status = Literal["ok", "partial", "failed"]


class PatientResult(_Frozen):
    """Everything one assessment produced for one patient and one cancer (or "any" for the any-cancer chain)."""

    subject_id: int
    cancer: str = Field(description="the cancer assessed; 'any' for the any-cancer chain")
    variant: Variant
    model: str = Field(description="the model that answered")
    prediction_time: datetime
    horizon_days: int
    status: Status = Field(description="ok: every call succeeded; partial: some failed but a score exists; failed: no score")
    risk_score: int | None = Field(description="final risk 1-10 (None only when status is failed)")
    probability: float | None = Field(description="risk_score / 10: a ranking score, not a calibrated probability")
    likely_cancer: str | None = Field(None, description="any-cancer chain: the cancer type the manager (or single "
                                      "agent) named as the most likely; None for a single-cancer assessment")
    risk_trajectory: tuple[ChunkRisk, ...] = ()
    summary: str | None = Field(None, description="the manager's (or single agent's) narrative of risk evolution")
    reasoning: str | None = None
    events: tuple[EvidenceEvent, ...] = ()
    memory_events: int = Field(0, description="size of the long-term memory at the end of the chain")
    dropped_event_ids: int = Field(0, description="ids cited by agents that were not in the text they read (removed)")
    dropped_events: int = Field(0, description="events agents dated at or after the prediction time (impossible: removed)")
    truncated: bool = Field(False, description="input was left-truncated to fit the model's context")
    truncation_note: str | None = None
    chunks: ChunkStats
    usage: dict[str, AgentUsage] = Field(default_factory=dict, description="per agent role")
    latency: Latency
    errors: tuple[AgentError, ...] = ()

    @property
    def evidence_unsourced(self) -> int:
        """Final events citing no element the agents read (kept, flagged ``unsourced``)."""
        return sum("unsourced" in e.flags for e in self.events)

    @property
    def evidence_out_of_record(self) -> int:
        """Final events dated outside the record (kept, flagged ``before_record`` / ``after_record``)."""
        return sum(e.out_of_record for e in self.events)


class CancerScore(_Frozen):
    """One cancer's share of an any-cancer assessment."""

    cancer: str
    risk_score: int | None
    status: Status


AnyCancerMode = Literal["chain", "max"]


class AnyCancerResult(_Frozen):
    """The any-cancer assessment. ``chain`` (the paper's): one assessment whose prompts ask for the strongest signal
    of any cancer, its manager naming the most likely type; ``max``: one assessment per cancer, max-pooled."""

    subject_id: int
    mode: AnyCancerMode = Field("max", description="chain: one chain for any cancer; max: the maximum over per-cancer chains")
    status: Status
    risk_score: int | None = Field(description="chain: the chain's score; max: the max of the per-cancer scores")
    probability: float | None = Field(description="risk_score / 10")
    strongest_cancer: str | None = Field(description="chain: the cancer the chain named; max: the cancer with the highest "
                                         "score (first in catalog order on ties)")
    tied_cancers: tuple[str, ...] = Field((), description="max: every cancer sharing the highest score")
    scores: tuple[CancerScore, ...] = Field(description="max: one per cancer assessed; chain: none (one score for all)")
    skipped: tuple[str, ...] = Field((), description="cancers not considered because they cannot occur with the patient's sex")
    results: tuple[PatientResult, ...] = Field(description="chain: the one assessment (cancer 'any'); max: one per cancer")
    latency_total: float

    def representative(self) -> PatientResult | None:
        """The assessment whose narrative, events and trajectory stand for the whole: the chain's one result, or
        the max pooling's strongest cancer (None when nothing scored)."""
        if self.mode == "chain":
            return self.results[0] if self.results else None
        return next((r for r in self.results if r.cancer == self.strongest_cancer), None)
