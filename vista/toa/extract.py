"""Parallel extraction sub-agents: one gateway call per chunk, run concurrently, answers checked against the graph.

The gateway bounds concurrency (``max_concurrency``), retries, re-asks invalid JSON and caches answers; a chunk
whose call fails is counted (``failed_chunks``) and contributes no events — never a guessed one. An event that does
not stand on the slice — none of its refs is a shown event, or its date lies outside its cited events' dates beyond
the unifier's window (`vista.toa.refs.date_problem`) — is sent back once in a follow-up turn naming the problem; a
correction that passes the same checks is kept, an event not made good is dropped with a per-event `RejectedEvent`
(``reasked``), counted in the timeline's stats.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from vista.graph import PatientGraph
from vista.shared.llm import LLMGateway, Message, assistant, user
from vista.toa.chunks import Chunk
from vista.toa.model import (
    MAX_EVENTS_PER_CHUNK,
    ExtractedEvent,
    ExtractionAnswer,
    RejectedEvent,
    TimelineEvent,
    extraction_answer_model,
)
from vista.toa.profile import EventProfile
from vista.toa.agent_prompts import extraction_messages, prompt_text
from vista.toa.refs import CheckedEvent, check_event

log = logging.getLogger(__name__)

EXTRACTION_AGENT = "toa_extractor"


@dataclass(frozen=True, slots=True)
class ChunkExtraction:
    """What one chunk yielded: kept events (provisional ids ``c<chunk>.<k>``), rejections, and whether the call failed."""

    chunk: int
    events: tuple[TimelineEvent, ...]
    rejected: tuple[RejectedEvent, ...]
    proposed: int
    error: str | None
    reasked: int = 0


async def extract_chunk(gateway: LLMGateway, graph: PatientGraph, chunk: Chunk, profile: EventProfile, *,
                        max_tokens: int | None = None, max_events: int = MAX_EVENTS_PER_CHUNK) -> ChunkExtraction:
    """Ask one sub-agent for the events of ``chunk`` and keep those whose refs the chunk showed and whose dates
    those refs bear; events that fail on provenance are sent back once (`reask_events`)."""
    answer_model = _answer_model(profile, max_events)
    messages = extraction_messages(profile, chunk.text)
    result = await gateway.complete(messages, answer_model, agent=EXTRACTION_AGENT,
                                    patient_id=graph.subject_id, max_tokens=max_tokens)
    if not result.ok:
        log.warning("patient %s chunk %d: extraction failed (%s)", graph.subject_id, chunk.index, result.error.kind.value)
        return ChunkExtraction(chunk.index, (), (), 0, result.error.kind.value)
    proposed = list(result.output.events)
    checked = [check_event(event, graph, profile, chunk=chunk.index, allowed=chunk.event_ids) for event in proposed]
    sent_back = [(event, record) for event, (c, record) in zip(proposed, checked)
                 if c is None and record is not None and record.problem is not None]
    kept = [(event, c) for event, (c, _) in zip(proposed, checked) if c is not None]
    rejected = [record for c, record in checked if record is not None and (c is not None or record.problem is None)]
    if sent_back:
        fixed, dropped = await reask_events(gateway, graph, chunk, profile, messages, result.output, sent_back,
                                            answer_model, max_tokens=max_tokens)
        kept += fixed
        rejected += dropped
    events = tuple(TimelineEvent(
        event_id=f"c{chunk.index}.{k}", date=event.date, type=event.type, subtype=c.subtype,
        description=event.description.strip(), source_event_refs=c.refs, chunks=(chunk.index,))
        for k, (event, c) in enumerate(kept))
    return ChunkExtraction(chunk.index, events, tuple(rejected), len(proposed), None, reasked=len(sent_back))


def reask_text(sent_back: Sequence[tuple[ExtractedEvent, RejectedEvent]]) -> str:
    """The follow-up turn (``vista/toa/prompts/reask.md``) listing the events that do not stand on the slice and
    why."""
    lines = [f"{k}. {event.date.isoformat()} {event.type}: {event.description.strip()[:120]} — {record.reason}"
             for k, (event, record) in enumerate(sent_back, 1)]
    return prompt_text("reask").format(events="\n".join(lines)).strip()


async def reask_events(gateway: LLMGateway, graph: PatientGraph, chunk: Chunk, profile: EventProfile,
                       messages: Sequence[Message], first: ExtractionAnswer,
                       sent_back: Sequence[tuple[ExtractedEvent, RejectedEvent]], answer_model: type, *,
                       max_tokens: int | None) -> tuple[list[tuple[ExtractedEvent, CheckedEvent]], list[RejectedEvent]]:
    """Send the events that failed on provenance back once; (the corrections that pass, at most one per event sent
    back; a rejection, marked ``reasked``, for each event sent back that was not made good, plus the records of
    unknown refs dropped from kept corrections)."""
    follow_up = [*messages, assistant(first.model_dump_json()), user(reask_text(sent_back))]
    again = await gateway.complete(follow_up, answer_model, agent=EXTRACTION_AGENT, patient_id=graph.subject_id,
                                   max_tokens=max_tokens)
    fixed: list[tuple[ExtractedEvent, CheckedEvent]] = []
    partial: list[RejectedEvent] = []
    if again.ok:
        for event in again.output.events:
            checked, record = check_event(event, graph, profile, chunk=chunk.index, allowed=chunk.event_ids)
            if checked is not None and len(fixed) < len(sent_back):
                fixed.append((event, checked))
                partial += [record] if record is not None else []
    failure = "" if again.ok else f"; re-ask failed: {again.error.kind.value}"
    pending = list(range(len(sent_back)))
    for event, _ in fixed:  # a correction stands for the first pending event of its type (else the first pending)
        match = next((k for k in pending if sent_back[k][0].type == event.type), pending[0])
        pending.remove(match)
    dropped = [sent_back[k][1].model_copy(update={"reasked": True, "reason": (sent_back[k][1].reason + failure)[:200]})
               for k in pending]
    log.info("patient %s chunk %d: %d event(s) sent back, %d made good", graph.subject_id, chunk.index,
             len(sent_back), len(fixed))
    return fixed, dropped + partial


async def extract_all(gateway: LLMGateway, graph: PatientGraph, chunks: list[Chunk], profile: EventProfile, *,
                      max_tokens: int | None = None, max_events: int = MAX_EVENTS_PER_CHUNK) -> list[ChunkExtraction]:
    """Run every chunk's sub-agent concurrently (the gateway's semaphore caps how many are in flight)."""
    return list(await asyncio.gather(*(extract_chunk(gateway, graph, c, profile, max_tokens=max_tokens,
                                                     max_events=max_events) for c in chunks)))


_MODELS: dict[tuple[EventProfile, int], type] = {}


def _answer_model(profile: EventProfile, max_events: int) -> type:
    """One answer model per (profile, cap) (the gateway memoises schemas by class)."""
    key = (profile, max_events)
    if key not in _MODELS:
        _MODELS[key] = extraction_answer_model(profile, max_events)
    return _MODELS[key]
