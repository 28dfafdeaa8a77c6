"""A patient made ready for the agents once: its timeline before the prediction time, chunked.

Every cancer assessed for the patient (max pooling runs 12-15) shares the one `PreparedPatient`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

from trajonco.agents.evidence import EventRules, SourceIndex
from trajonco.fitting import GatewayFacts, auto_chunk_tokens
from trajonco.chunking import Chunk, chunk_timeline
from trajonco.pipeline_config import PipelineConfig
from vista.shared.records import CodeCatalog, PatientRecord
from vista.shared.timeline import Timeline, render_timeline
from vista.shared.timeline.truncate import truncate_left


@dataclass(frozen=True, slots=True)
class PreparedPatient:
    """A patient's timeline and chunks at one prediction time, shared by every cancer assessed."""

    record: PatientRecord
    prediction_time: datetime
    timeline: Timeline
    chunks: list[Chunk]
    chunk_tokens: int
    rules: EventRules  # the root's static ids (repeated in every chunk), the prediction time, note source keys


def default_prediction_time(record: PatientRecord) -> datetime:
    """The day after the patient's last timed event (so every event is before it)."""
    times = [e.time for e in record.events if e.time is not None]
    if not times:
        raise ValueError(f"subject {record.subject_id}: no timed events, so no default prediction time; pass one")
    return datetime.combine(max(times).date() + timedelta(days=1), datetime.min.time())


def prepare_patient(
    record: PatientRecord, catalog: CodeCatalog, config: PipelineConfig, facts: GatewayFacts, prediction_time: datetime | None
) -> PreparedPatient:
    """Render and chunk the patient's timeline before ``prediction_time`` (default: after the last event)."""
    when = prediction_time or default_prediction_time(record)
    timeline = render_timeline(record, catalog, when)
    if config.truncate_tokens is not None:
        timeline = truncate_left(timeline, config.truncate_tokens)
    chunk_tokens = config.chunk_tokens or auto_chunk_tokens(facts.context_tokens)
    # Not re-encoded to check the sum: a block's text starts with '<' and ends with '>\n', where no cl100k token can
    # cross (tests/test_timeline_properties.py checks it on hostile text); the check doubled the tokenizer's work.
    chunks = chunk_timeline(timeline, chunk_tokens, verify=False)  # also for the single agent: C is the record's length
    rules = EventRules(frozenset(e.event_id for e in timeline.root.static), when, SourceIndex.from_record(record))
    return PreparedPatient(record, when, timeline, chunks, chunk_tokens, rules)


async def prepare_patient_off_loop(
    record: PatientRecord, catalog: CodeCatalog, config: PipelineConfig, facts: GatewayFacts, prediction_time: datetime | None
) -> PreparedPatient:
    """`prepare_patient` on a worker thread: a long record takes up to ~0.6 s to render and chunk, and on the event
    loop that would hold back every other patient's LLM calls of the process (their answers unread, their slots idle)."""
    return await asyncio.to_thread(prepare_patient, record, catalog, config, facts, prediction_time)
