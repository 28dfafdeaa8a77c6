"""Parallel extraction sub-agents: one gateway call per chunk, run concurrently, answers checked against the graph.

The gateway bounds concurrency (``max_concurrency``), retries, re-asks invalid JSON and caches answers; a chunk
whose call fails is counted (``failed_chunks``) and contributes no events — never a guessed one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from vista.graph import PatientGraph
from vista.llm import LLMGateway
from vista.toa.chunks import Chunk
from vista.toa.model import MAX_EVENTS_PER_CHUNK, RejectedEvent, TimelineEvent, extraction_answer_model
from vista.toa.profile import EventProfile
from vista.toa.agent_prompts import extraction_messages
from vista.toa.refs import check_event

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


async def extract_chunk(gateway: LLMGateway, graph: PatientGraph, chunk: Chunk, profile: EventProfile, *,
                        max_tokens: int | None = None, max_events: int = MAX_EVENTS_PER_CHUNK) -> ChunkExtraction:
    """Ask one sub-agent for the events of ``chunk`` and keep those whose refs the chunk showed."""
    answer_model = _answer_model(profile, max_events)
    result = await gateway.complete(extraction_messages(profile, chunk.text), answer_model, agent=EXTRACTION_AGENT,
                                    patient_id=graph.subject_id, max_tokens=max_tokens)
    if not result.ok:
        log.warning("patient %s chunk %d: extraction failed (%s)", graph.subject_id, chunk.index, result.error.kind.value)
        return ChunkExtraction(chunk.index, (), (), 0, result.error.kind.value)
    kept, rejected = [], []
    for k, proposed in enumerate(result.output.events):
        checked, record = check_event(proposed, graph, profile, chunk=chunk.index, allowed=chunk.event_ids)
        if record is not None:
            rejected.append(record)
        if checked is not None:
            kept.append(TimelineEvent(
                event_id=f"c{chunk.index}.{k}", date=proposed.date, type=proposed.type, subtype=checked.subtype,
                description=proposed.description.strip(), source_event_refs=checked.refs, chunks=(chunk.index,)))
    return ChunkExtraction(chunk.index, tuple(kept), tuple(rejected), len(result.output.events), None)


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
