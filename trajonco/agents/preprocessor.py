"""The first stage of the two-stage variant (TrajOnco appendix B.1): parallel per-chunk relevance filters.

Each preprocessor names the relevant event ids of its chunk; code then cuts every chunk's XML down to the
kept events (original elements, ids, timestamps and root, via `vista.shared.timeline`), joins the pieces and
re-chunks them with the same token limit, so C_new <= C. An id kept anywhere is kept in every chunk it
appears in (a long note split across chunks stays whole). A chunk whose filter call failed is kept whole:
a failure costs speed, never data.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from trajonco.agents.calls import AgentCall, call_agent
from trajonco.agents.evidence import keep_known_ids
from trajonco.agents.prompts import PromptContext, render_pair
from trajonco.agents.results import Stage
from trajonco.agents.schemas import PreprocessorOutput
from trajonco.chunking import Chunk, rechunk
from vista.shared.timeline import parse_timeline
from vista.shared.llm.caller import LLMCaller


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """The preprocessors' calls, the ids kept over all chunks, the unknown ids dropped and the new chunks."""

    calls: tuple[AgentCall[PreprocessorOutput], ...]
    kept_ids: frozenset[str]
    dropped_ids: int
    reduced_chunks: list[Chunk]
    seconds: float


async def _filter_one(
    gateway: LLMCaller, ctx: PromptContext, chunk: Chunk, n_chunks: int,
    response_model: type[PreprocessorOutput], patient_id: int,
) -> AgentCall[PreprocessorOutput]:
    system, user = render_pair(
        "preprocessor", ctx, chunk_xml=chunk.xml.rstrip("\n"), chunk_number=chunk.index + 1, n_chunks=n_chunks
    )
    return await call_agent(
        gateway, agent=Stage.PREPROCESS.value, system=system, user=user, response_model=response_model,
        patient_id=patient_id, chunk_index=chunk.index,
    )


def reduce_chunks(chunks: list[Chunk], keep: frozenset[str]) -> list[str]:
    """Each chunk's XML with only the events in ``keep`` (blocks left empty disappear; the root stays)."""
    return [parse_timeline(c.xml, source=f"chunk {c.index}").select(keep).to_xml() for c in chunks]


async def filter_and_rechunk(
    gateway: LLMCaller,
    ctx: PromptContext,
    chunks: list[Chunk],
    *,
    response_model: type[PreprocessorOutput],
    patient_id: int,
    max_tokens: int,
) -> FilterOutcome:
    """Run one preprocessor per chunk concurrently (the gateway bounds concurrency), then re-chunk what they kept."""
    started = time.perf_counter()
    calls = await asyncio.gather(*(
        _filter_one(gateway, ctx, chunk, len(chunks), response_model, patient_id) for chunk in chunks
    ))
    keep: set[str] = set()
    dropped = 0
    for chunk, call in zip(chunks, calls):
        if call.output is None:
            keep.update(chunk.event_ids)
            continue
        ids, n = keep_known_ids(call.output.relevant_event_ids, frozenset(chunk.event_ids))
        keep.update(ids)
        dropped += n
    kept = frozenset(keep)
    reduced = rechunk(reduce_chunks(chunks, kept), max_tokens)
    return FilterOutcome(tuple(calls), kept, dropped, reduced, time.perf_counter() - started)
