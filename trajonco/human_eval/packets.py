"""Blinded review packets: what a reviewer reads and answers for one sampled patient, and the key kept apart.

A packet shows a timeline excerpt, then each model's answer under a neutral label (A, or A and B) -- risk score,
per-chunk risk, summary, reasoning and events with their provenance (timeline element id and MEDS row) -- and the
questions: is each event correct, is each summary faithful, and, with two runs, which answer is better on each of
the judge's five rubrics. Which run is A is drawn from the seed, balanced (each run is A in half the packets);
only the key (`PacketKey`, written to a separate file) says so. Packet ids are opaque (P001, P002, ...): the key
maps them to patients.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trajonco.judge.rubrics import RUBRICS

Kind = Literal["event", "summary", "rubric"]
Side = Literal["A", "B"]

EVENT_CHOICES = ("correct", "inaccurate")
SUMMARY_CHOICES = ("faithful", "unfaithful")
RUBRIC_CHOICES = ("A", "B", "tie")
CHOICES: dict[str, tuple[str, ...]] = {"event": EVENT_CHOICES, "summary": SUMMARY_CHOICES, "rubric": RUBRIC_CHOICES}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PacketEvent(_Model):
    """One event of an answer as the reviewer sees it."""

    number: int = Field(description="1-based position in the answer's event list")
    timestamp: date
    description: str
    evidence: tuple[str, ...] = Field((), description="'e12 (data/train/0.parquet row 1234)' per source element")


class PacketAnswer(_Model):
    """One model's answer under its neutral label."""

    side: Side
    risk_score: int | None
    trajectory: str = Field(description="per-chunk risk levels, 'Low -> High'")
    summary: str
    reasoning: str
    events: tuple[PacketEvent, ...]


class Question(_Model):
    """One thing a reviewer answers (one CSV row per reviewer)."""

    question_id: str = Field(description="'A.event.2', 'B.summary', 'rubric.temporal_reasoning'")
    kind: Kind
    text: str
    choices: tuple[str, ...]
    side: Side | None = None
    rubric: str | None = None
    event_number: int | None = None


class Packet(_Model):
    """Everything a reviewer needs for one patient (no run names, no subject id)."""

    packet_id: str
    cancer: str
    horizon_days: int
    outcome: str = Field(description="the true outcome in words (the judge is told it too)")
    timeline_excerpt: str | None = Field(description="XML excerpt of the timeline (None when exported without one)")
    timeline_note: str
    answers: tuple[PacketAnswer, ...]
    questions: tuple[Question, ...]


class PacketSet(_Model):
    """The packets of one export (``packets.json`` beside the HTML files); safe to give reviewers."""

    seed: int
    n_runs: int = Field(ge=1, le=2)
    packets: tuple[Packet, ...]

    def packet(self, packet_id: str) -> Packet | None:
        return next((p for p in self.packets if p.packet_id == packet_id), None)


class KeyRun(_Model):
    name: str
    path: str


class KeyEntry(_Model):
    """Who a packet is and which run hides behind each label."""

    packet_id: str
    subject_id: int
    prediction_time: datetime | None
    cancer: str
    label: bool | None
    sides: dict[str, KeyRun] = Field(description="'A' (and 'B') -> the run shown under that label")


class PacketKey(_Model):
    """The unblinding key of an export: kept away from the reviewers (a separate file)."""

    seed: int
    runs: tuple[KeyRun, ...]
    entries: tuple[KeyEntry, ...]

    def entry(self, packet_id: str) -> KeyEntry | None:
        return next((e for e in self.entries if e.packet_id == packet_id), None)


def questions_for(answers: tuple[PacketAnswer, ...]) -> tuple[Question, ...]:
    """The questions of a packet: per answer its events and summary; with two answers also the five rubrics.

    >>> a = PacketAnswer(side="A", risk_score=3, trajectory="Low", summary="s", reasoning="r",
    ...                  events=(PacketEvent(number=1, timestamp=date(2020, 1, 1), description="cough"),))
    >>> [q.question_id for q in questions_for((a,))]
    ['A.event.1', 'A.summary']
    >>> b = a.model_copy(update={"side": "B", "events": ()})
    >>> [q.question_id for q in questions_for((a, b))][2:4]
    ['B.summary', 'rubric.clinical_correctness']
    """
    out: list[Question] = []
    for answer in answers:
        s = answer.side
        out += [Question(question_id=f"{s}.event.{e.number}", kind="event", side=s, event_number=e.number,
                         choices=EVENT_CHOICES,
                         text=f"Model {s}, event {e.number} ({e.timestamp.isoformat()}): does it agree with the "
                              "record (date and content supported by the cited evidence, no unsupported claim)?")
                for e in answer.events]
        out.append(Question(question_id=f"{s}.summary", kind="summary", side=s, choices=SUMMARY_CHOICES,
                            text=f"Model {s}'s summary: is every statement supported by the record?"))
    if len(answers) == 2:
        out += [Question(question_id=f"rubric.{r.key}", kind="rubric", rubric=r.key, choices=RUBRIC_CHOICES,
                         text=f"{r.title}: {r.question} Which answer is better (A, B or tie)?") for r in RUBRICS]
    return tuple(out)
