"""A worker agent: reads one chunk, the previous worker's answer and the last k memory events; updates them.

The first worker (or the first one after every earlier worker failed) has no previous answer and gets the
"first worker" prompt. The events it reports are checked against the chunk (`evidence.clean_events`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trajonco.agents.calls import AgentCall, call_agent
from trajonco.agents.evidence import CleanedEvents, EventRules, clean_events
from trajonco.agents.memory import MemoryEvent, render_events
from trajonco.agents.prompts import PromptContext, render_pair
from trajonco.agents.results import Stage
from trajonco.agents.schemas import WorkerOutput
from trajonco.chunking import Chunk
from vista.shared.llm.caller import LLMCaller


@dataclass(frozen=True, slots=True)
class WorkerStep:
    """One worker's call and the events it reported after the checks (none when the call failed)."""

    chunk: Chunk
    call: AgentCall[WorkerOutput]
    cleaned: CleanedEvents


def worker_prompts(
    ctx: PromptContext, chunk: Chunk, n_chunks: int, previous: WorkerOutput | None, memory_view: list[MemoryEvent]
) -> tuple[str, str]:
    """The (system, user) prompts of the worker reading ``chunk``."""
    common = {"chunk_xml": chunk.xml.rstrip("\n"), "chunk_number": chunk.index + 1, "n_chunks": n_chunks}
    if previous is None:
        return render_pair("worker_first", ctx, **common)
    return render_pair(
        "worker_next", ctx, previous_output=previous.model_dump_json(), memory_events=render_events(memory_view), **common
    )


async def run_worker(
    gateway: LLMCaller,
    ctx: PromptContext,
    chunk: Chunk,
    n_chunks: int,
    previous: WorkerOutput | None,
    memory_view: list[MemoryEvent],
    *,
    response_model: type[WorkerOutput],
    patient_id: int,
    rules: EventRules,
) -> WorkerStep:
    """Call the worker for ``chunk`` and check its events against ``rules`` plus the chunk's ids."""
    system, user = worker_prompts(ctx, chunk, n_chunks, previous, memory_view)
    call = await call_agent(
        gateway, agent=Stage.WORKERS.value, system=system, user=user, response_model=response_model,
        patient_id=patient_id, chunk_index=chunk.index,
    )
    if call.output is None:
        return WorkerStep(chunk, call, CleanedEvents())
    return WorkerStep(chunk, call, clean_events(call.output.new_events, rules.with_ids(chunk.event_ids), chunk_index=chunk.index))
