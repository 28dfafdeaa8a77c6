"""Typed records of the query layer: settings, what the model is asked to return, and what a caller gets back.

`AnswerDraft` and `VerdictDraft` are the bounded shapes the model fills (so small models emit valid JSON under a
schema); nothing from them reaches a `QueryAnswer` before the cited ids are checked against the timeline or the
opened sources. `SourceEvent` is a graph source event opened for a reader: its content plus the MEDS row (or XML
line) it came from.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from vista.shared.llm import CallRecord
from vista.toa import TimelineEvent

TimelineRef = Annotated[str, Field(min_length=2, max_length=8, pattern=r"^t[0-9]{1,6}$")]
"""A timeline event id as the model must write it (the pattern also steers constrained decoding)."""
SourceRef = Annotated[str, Field(min_length=2, max_length=12, pattern=r"^e[0-9]{1,10}$")]
"""A graph source event id as the verifier must write it."""
ANSWER_MAX = 600
EXPLANATION_MAX = 300
MAX_CITATIONS = 12

Confidence = Literal["high", "medium", "low"]
AnswerStatus = Literal["answered", "not_in_timeline", "uncited", "failed"]
VerificationVerdict = Literal["supported", "not_supported", "not_checked"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QueryConfig(_Frozen):
    """Settings of `vista.query.ask` (answer and verifier sizes, how much of each note the verifier reads)."""

    max_tokens: int | None = Field(default=600, gt=0, description="Answer token cap of the answering call "
                                   "(None: the gateway's max_tokens).")
    verify_max_tokens: int | None = Field(default=400, gt=0, description="Answer token cap of the verifying call.")
    answer_chars: int = Field(default=ANSWER_MAX, ge=20, le=4000, description="Longest answer text (schema maxLength; "
                              "small models write until the cap, so keep it under what max_tokens can hold).")
    explanation_chars: int = Field(default=EXPLANATION_MAX, ge=20, le=2000, description="Longest verifier explanation.")
    max_citations: int = Field(default=MAX_CITATIONS, ge=1, le=100, description="Most ids either call may cite.")
    max_timeline_events: int = Field(default=500, ge=1, description="Most timeline events shown to the model.")
    max_timeline_chars: int = Field(default=120_000, ge=200, description="Most characters of timeline shown (further "
                                    "cut to fit the model's context window).")
    excerpt_chars: int = Field(default=1200, ge=40, description="Characters of a note's text the verifier reads "
                               "(whole words, marked when cut).")
    max_verify_sources: int = Field(default=30, ge=1, description="Most source events shown to the verifier; the "
                                    "rest are named as not shown.")
    prompt_room_tokens: int = Field(default=600, ge=0, description="Tokens kept free in the context window for chat "
                                    "framing and the response schema when checking that a prompt fits.")


class AnswerDraft(_Frozen):
    """The answering call's shape: whether the timeline holds the answer, the answer, its citations, a confidence."""

    in_timeline: bool = Field(description="False when the timeline does not contain what the question asks.")
    answer: str = Field(max_length=ANSWER_MAX, description="The answer in a few sentences, or why it is not known.")
    cited_event_ids: list[TimelineRef] = Field(max_length=MAX_CITATIONS,
                                               description="Timeline ids (t<k>) the answer rests on, copied exactly.")
    confidence: Confidence


@cache
def answer_draft_model(answer_chars: int = ANSWER_MAX, max_citations: int = MAX_CITATIONS) -> type[AnswerDraft]:
    """`AnswerDraft` with the answer and citation list bounded as given (the schema's maxLength / maxItems)."""
    return create_model("AnswerDraft", __base__=AnswerDraft,
                        answer=(str, Field(max_length=answer_chars, description=AnswerDraft.model_fields["answer"].description)),
                        cited_event_ids=(list[TimelineRef], Field(max_length=max_citations,  # type: ignore[valid-type]
                                         description=AnswerDraft.model_fields["cited_event_ids"].description)))


class VerdictDraft(_Frozen):
    """The verifying call's shape: does the source evidence support the answer, which source lines show it, why."""

    supported: bool = Field(description="True when the source events shown support every claim of the answer.")
    evidence_event_ids: list[SourceRef] = Field(max_length=MAX_CITATIONS,
                                                description="Source ids (e<k>) of the lines that decide, copied exactly.")
    explanation: str = Field(max_length=EXPLANATION_MAX)


@cache
def verdict_draft_model(explanation_chars: int = EXPLANATION_MAX, max_citations: int = MAX_CITATIONS) -> type[VerdictDraft]:
    """`VerdictDraft` with the explanation and evidence list bounded as given."""
    return create_model("VerdictDraft", __base__=VerdictDraft,
                        explanation=(str, Field(max_length=explanation_chars)),
                        evidence_event_ids=(list[SourceRef], Field(max_length=max_citations,  # type: ignore[valid-type]
                                            description=VerdictDraft.model_fields["evidence_event_ids"].description)))


class SourceEvent(_Frozen):
    """A source event of the MEDS Graph opened for a reader, with its provenance (shard and row, or file and line)."""

    event_id: str
    kind: Literal["event", "note", "encounter"]
    time: dt.datetime | None
    code: str
    description: str | None = Field(description="The code's description in the catalog.")
    value: float | None
    unit: str | None
    text: str | None = Field(description="The text value (a note's text), cut to an excerpt of whole words.")
    text_chars: int = Field(ge=0, description="Length of the full text value (0 when there is none).")
    encounter: str | None = Field(description="Node id of the encounter it belongs to.")
    source: str = Field(description="MEDS shard (relative to the dataset root) or XML file the event came from.")
    row: int = Field(description="Row of the shard (MEDS) or line of the XML file.")
    provenance_unit: Literal["row", "line"]

    @property
    def text_truncated(self) -> bool:
        return self.text is not None and len(self.text) < self.text_chars


class Verification(_Frozen):
    """The verifier's finding on an answer, after its cited ids were checked against the sources it was shown."""

    verdict: VerificationVerdict
    explanation: str
    evidence_event_ids: tuple[str, ...] = Field(default=(), description="Cited source ids that were shown to it.")
    dropped_ids: tuple[str, ...] = Field(default=(), description="Cited ids it was not shown (dropped).")
    sources_checked: tuple[str, ...] = Field(default=(), description="Source ids the verifier was shown.")
    sources_not_shown: int = Field(default=0, ge=0, description="Source refs of the cited events over the cap.")
    error: str | None = None


class QueryUsage(_Frozen):
    """What answering one question cost: model calls, tokens, money (None if the model has no price), latency."""

    calls: int = 0
    failed_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_s: float = 0.0

    @classmethod
    def of(cls, records: Sequence[CallRecord]) -> QueryUsage:
        """Totals over the gateway's records of this question's calls.

        >>> QueryUsage.of([CallRecord("a", "query", "m", prompt_tokens=10, completion_tokens=2, cost_usd=None)]).cost_usd
        """
        costs = [r.cost_usd for r in records]
        return cls(calls=len(records), failed_calls=sum(not r.ok for r in records),
                   cache_hits=sum(r.cache_hit for r in records), prompt_tokens=sum(r.prompt_tokens for r in records),
                   completion_tokens=sum(r.completion_tokens for r in records),
                   cost_usd=None if any(c is None for c in costs) else round(sum(costs), 10),  # type: ignore[arg-type]
                   latency_s=round(sum(r.latency_s for r in records), 6))


class QueryAnswer(_Frozen):
    """The answer to one question about one patient, with the timeline events it cites and their graph sources.

    ``status``: ``answered`` (the model found it and cited at least one real timeline event), ``not_in_timeline``
    (the model says the timeline does not hold it), ``uncited`` (it claimed an answer but cited no real event),
    ``failed`` (the call failed; ``error`` says why).
    """

    subject_id: int
    question: str
    status: AnswerStatus
    answer: str
    confidence: Confidence | None
    cited: tuple[TimelineEvent, ...] = Field(description="The cited timeline events, in the order cited.")
    source_refs: tuple[str, ...] = Field(description="Graph event ids (e<k>) behind the cited events, in order.")
    dropped_citations: tuple[str, ...] = Field(default=(), description="Cited ids that are not timeline events "
                                               "shown to the model.")
    verification: Verification | None = None
    usage: QueryUsage
    model: str
    timeline_hash: str = Field(description="Content hash of the timeline the answer was read from.")
    events_shown: int = Field(ge=0, description="Timeline events the model was shown.")
    events_omitted: int = Field(default=0, ge=0, description="Timeline events left out to fit the context window.")
    graph_hash: str | None = Field(default=None, description="Version of the MEDS Graph the timeline's refs (and so "
                                   "``source_refs``) were made against (`vista.toa.refs.graph_version`).")
    timeline_incomplete: str | None = Field(default=None, description="Why the timeline read is incomplete (some of "
                                            "its extraction calls failed), when it is: the answer may miss facts.")
    error: str | None = None

    @property
    def dropped_count(self) -> int:
        return len(self.dropped_citations)
