"""The manager agent: reads the last worker's answer and the whole long-term memory; gives the final score.

When the memory does not fit the model's context (long records on a small model), its oldest events are left
out of the prompt and the result says so. The manager's final events are checked (`evidence.clean_events`),
deduplicated and put in date order by code (`LongTermMemory`), whatever order the model wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajonco.agents.context_fit import ContextFitError, ContextFit, oldest_to_drop
from trajonco.agents.calls import AgentCall, call_agent
from trajonco.agents.evidence import CleanedEvents, EventRules, clean_events
from trajonco.agents.memory import LongTermMemory, MemoryEvent, render_events
from trajonco.agents.prompts import PromptContext, render_pair
from trajonco.agents.results import Stage
from trajonco.agents.schemas import ExtractedEvent, ManagerOutput, WorkerOutput
from vista.shared.llm.caller import LLMCaller


def consolidate(reported: list[ExtractedEvent], rules: EventRules) -> CleanedEvents:
    """Check, deduplicate (the memory's rules) and sort an agent's final event list."""
    cleaned = clean_events(reported, rules, chunk_index=-1)
    memory = LongTermMemory()
    memory.add(cleaned.events)
    return CleanedEvents(tuple(memory.events()), cleaned.dropped_ids, cleaned.dropped_events)


@dataclass(frozen=True, slots=True)
class ManagerStep:
    """The manager's call, its checked final events, and how many memory events its prompt left out."""

    call: AgentCall[ManagerOutput]
    final: CleanedEvents
    memory_left_out: int


def manager_prompts(
    ctx: PromptContext, last_output: WorkerOutput, memory: list[MemoryEvent], fit: ContextFit | None, *, subject_id: int
) -> tuple[str, str, int]:
    """The (system, user) prompts and the number of oldest memory events left out so the prompt fits ``fit``."""
    lines = [e.render() + "\n" for e in memory]
    worker_json = last_output.model_dump_json()
    left_out = 0
    if fit is not None:
        system, user = render_pair("manager", ctx, final_worker_output=worker_json, memory_events="", memory_note=" (older events left out)")
        available = fit.input_tokens - fit.count(system) - fit.count(user)
        if available < 0:
            raise ContextFitError(
                f"subject {subject_id}: the manager prompt needs {fit.input_tokens - available} tokens without memory, "
                f"more than the {fit.input_tokens} planned for a {fit.context_tokens}-token context"
            )
        left_out = oldest_to_drop(lines, available, fit.encoding)
    note = f" (the {left_out} oldest events were left out to fit the context)" if left_out else ""
    system, user = render_pair(
        "manager", ctx, final_worker_output=worker_json, memory_events=render_events(memory[left_out:]), memory_note=note
    )
    return system, user, left_out


async def run_manager(
    gateway: LLMCaller,
    ctx: PromptContext,
    last_output: WorkerOutput,
    memory: list[MemoryEvent],
    rules: EventRules,
    *,
    response_model: type[ManagerOutput],
    patient_id: int,
    fit: ContextFit | None,
) -> ManagerStep:
    """Call the manager and consolidate its final events (checked against ``rules``: every id the chain read)."""
    system, user, left_out = manager_prompts(ctx, last_output, memory, fit, subject_id=patient_id)
    call = await call_agent(
        gateway, agent=Stage.MANAGER.value, system=system, user=user, response_model=response_model, patient_id=patient_id
    )
    final = consolidate(call.output.final_events, rules) if call.output is not None else CleanedEvents()
    return ManagerStep(call, final, left_out)
