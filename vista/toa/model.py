"""Typed TOA records: timeline events (always with source refs), the sub-agents' answer shapes, episodes, timelines.

`TimelineEvent` is what the layer keeps: a date, a type/subtype from the event-definition profile, a description
and at least one ``source_event_refs`` id of the patient's MEDS Graph. The ``*Answer`` models are what a model is
asked to return; they are bounded (every string and list) so small models emit valid JSON under a schema, and
nothing from them reaches a timeline before `vista.toa.refs` has checked every ref against the graph.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from vista.toa.profile import EventProfile

EventRef = Annotated[str, Field(min_length=2, max_length=12, pattern=r"^e[0-9]{1,10}$")]
"""A graph event id as the models must write it (the pattern also steers constrained decoding)."""
MAX_REFS = 12
MAX_EVENTS_PER_CHUNK = 24
DESCRIPTION_MAX = 240


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimelineEvent(_Frozen):
    """One clinically abstracted event of the timeline, provenance-linked to the graph by ``source_event_refs``."""

    event_id: str = Field(description="Timeline id (t<k>) assigned after unification, in timeline order.")
    date: dt.date
    type: str = Field(min_length=1, max_length=32, description="An event type of the profile.")
    subtype: str = Field(min_length=1, max_length=32)
    description: str = Field(min_length=1, max_length=DESCRIPTION_MAX)
    source_event_refs: tuple[str, ...] = Field(min_length=1, description="Graph event ids (e<k>) supporting it.")
    origin: Literal["extraction", "safety_net"] = "extraction"
    chunks: tuple[int, ...] = Field(default=(), description="Indices of the chunks it was extracted from.")


class ExtractedEvent(_Frozen):
    """One event as a sub-agent proposes it (the ``type`` is narrowed to the profile by `extraction_answer_model`)."""

    date: dt.date
    type: str = Field(max_length=32)
    subtype: str = Field(max_length=32)
    description: str = Field(max_length=DESCRIPTION_MAX)
    source_event_refs: list[EventRef] = Field(min_length=1, max_length=MAX_REFS)


class ExtractionAnswer(_Frozen):
    """A chunk sub-agent's answer: the events it found in its chunk."""

    events: list[ExtractedEvent] = Field(max_length=MAX_EVENTS_PER_CHUNK)


def extraction_answer_model(profile: EventProfile, max_events: int = MAX_EVENTS_PER_CHUNK) -> type[ExtractionAnswer]:
    """`ExtractionAnswer` with ``type`` closed to the profile's type names (so the schema carries an enum) and at
    most ``max_events`` events (small models loop until the cap, so tests on them use a low one)."""
    kinds = Literal[profile.type_names]  # type: ignore[valid-type]
    event = create_model("ExtractedEvent", __base__=ExtractedEvent, type=(kinds, ...))
    return create_model("ExtractionAnswer", __base__=ExtractionAnswer,
                        events=(list[event], Field(max_length=max_events)))  # type: ignore[valid-type]


class ImagingVerdict(_Frozen):
    """The safety-net verifier's answer for one candidate imaging date."""

    imaging_performed: bool = Field(description="True when the records show an imaging study was done that day.")
    subtype: str = Field(max_length=32)
    description: str = Field(max_length=DESCRIPTION_MAX)
    source_event_refs: list[EventRef] = Field(max_length=MAX_REFS)


class EpisodeKind(StrEnum):
    BASELINE = "baseline"
    DIAGNOSIS = "diagnosis"
    TREATMENT_LINE = "treatment_line"
    POST_ONCOLOGICAL = "post_oncological"


class Episode(_Frozen):
    """A phase of care covering the dates [start, end] and exactly the timeline events dated inside it."""

    episode_id: str
    kind: EpisodeKind
    line: int | None = Field(default=None, description="Treatment line number (1, 2, ...) for treatment_line.")
    start: dt.date
    end: dt.date
    anchor_event_id: str | None = None
    event_ids: tuple[str, ...]


RefProblem = Literal["unknown_refs", "misdated"]
"""Why an event does not stand on the record it cites: none of its refs is a shown event of the graph, or its date
lies outside its cited events' dates (beyond the unifier's window). Such an event is sent back to its sub-agent
once (`vista.toa.extract`), then dropped."""


class RejectedEvent(_Frozen):
    """A proposed event that was not kept, and why (unknown refs, a date its refs do not bear, a type outside the
    profile...)."""

    chunk: int | None
    reason: str = Field(max_length=200)
    dropped_refs: tuple[str, ...] = ()
    problem: RefProblem | None = Field(default=None, description="a provenance problem: re-asked once, then dropped")
    reasked: bool = Field(default=False, description="it was sent back to its sub-agent once and not made good")
    date: dt.date | None = Field(default=None, description="the date the sub-agent gave the event")


class ExtractionStats(_Frozen):
    """Counts of one TOA build: chunks, proposed/kept events, ``rejected_events`` (extracted events not kept: no valid
    ref, a date its refs do not bear, type outside the profile), refs dropped, groups merged, safety-net work, judged
    merges, events re-asked and events dropped as misdated."""

    chunks: int
    failed_chunks: int
    proposed_events: int
    kept_events: int
    rejected_events: int
    dropped_refs: int
    merged_groups: int
    safety_net_candidates: int = 0
    safety_net_added: int = 0
    safety_net_failed: int = Field(default=0, description="Candidate dates whose verifier call failed (nothing added).")
    judged_merges: int = Field(default=0, description="Ambiguous pairs the merge judge called one event.")
    reasked_events: int = Field(default=0, description="Events sent back once to their sub-agent (no shown ref, or "
                                "dated outside their cited events' dates).")
    misdated_events: int = Field(default=0, description="Of the rejected, events dropped (after the re-ask) because "
                                 "their date lies outside their cited events' dates beyond the unifier's window.")


class PatientTimeline(_Frozen):
    """The TOA of one patient: its unified events (date order), its episodes, rejections and counts."""

    subject_id: int
    profile: str
    content_hash: str
    events: tuple[TimelineEvent, ...]
    episodes: tuple[Episode, ...]
    rejected: tuple[RejectedEvent, ...]
    stats: ExtractionStats
    ambiguous_pairs: tuple[tuple[str, str], ...] = Field(
        default=(), description="Same type within the merge window, left apart by the unifier (only a hub ref or no ref "
        "shared), and not judged (judge off, over the cap, or failed).")
    graph_hash: str | None = Field(
        default=None, description="Content hash of the MEDS Graph it was built from (`vista.toa.refs.graph_version`); "
        "every read that resolves its refs checks it (None: built before graphs were versioned, so refused).")
    ref_fingerprints: dict[str, str] = Field(
        default_factory=dict, description="Cited graph id -> digest of that event's content when it was built, so a "
        "refusal can name the refs that now open other rows (`vista.toa.refs.ref_fingerprint`).")

    def incomplete_reason(self) -> str | None:
        """Why the timeline is incomplete (some of its calls failed), or None when every call succeeded."""
        stats = self.stats
        parts = []
        if stats.failed_chunks:
            parts.append(f"{stats.failed_chunks} of {stats.chunks} chunk extraction call(s) failed")
        if stats.safety_net_failed:
            parts.append(f"{stats.safety_net_failed} imaging verification call(s) failed")
        return "; ".join(parts) or None
