"""The chain of agents with long-term memory (TrajOnco §4.4): workers in time order, then the manager.

Worker i reads chunk i, the answer of the last worker that succeeded and the last k memory events; the events
it reports go into the memory (deduplicated). A failed worker is recorded and skipped: the next worker gets
the last good answer, so one bad call costs one chunk, not the patient. The manager runs when at least one
worker succeeded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from trajonco.agents.context_fit import ContextFit
from trajonco.agents.calls import AgentCall
from trajonco.agents.evidence import EventRules
from trajonco.agents.manager import ManagerStep, run_manager
from trajonco.agents.memory import LongTermMemory
from trajonco.agents.prompts import PromptContext
from trajonco.agents.results import AgentError, ChunkRisk, Stage
from trajonco.agents.schemas import OutputModels, WorkerOutput
from trajonco.agents.worker import WorkerStep, run_worker
from trajonco.chunking import Chunk
from vista.shared.llm.caller import LLMCaller


@dataclass(slots=True)
class ChainOutcome:
    """What the chain produced for one patient."""

    trajectory: list[ChunkRisk]
    calls: list[AgentCall]
    memory: LongTermMemory
    last_output: WorkerOutput | None
    manager: ManagerStep | None
    dropped_ids: int
    dropped_events: int
    worker_seconds: float
    manager_seconds: float
    skipped_manager: AgentError | None


async def run_chain(
    gateway: LLMCaller,
    ctx: PromptContext,
    chunks: list[Chunk],
    *,
    models: OutputModels,
    patient_id: int,
    fit: ContextFit | None,
    rules: EventRules,
) -> ChainOutcome:
    """Run the workers over ``chunks`` in order, then the manager over the last answer and the memory.

    ``rules`` hold what every agent may cite besides its chunk (the root's static elements, repeated in every
    chunk), the prediction time, and the source keys the memory uses to recognize copy-forwarded notes.
    """
    memory = LongTermMemory()
    previous: WorkerOutput | None = None
    trajectory: list[ChunkRisk] = []
    calls: list[AgentCall] = []
    dropped_ids = dropped_events = 0
    started = time.perf_counter()
    for chunk in chunks:
        step: WorkerStep = await run_worker(
            gateway, ctx, chunk, len(chunks), previous, memory.last(ctx.memory_k),
            response_model=models.worker, patient_id=patient_id, rules=rules,
        )
        calls.append(step.call)
        report = memory.add(step.cleaned.events)
        dropped_ids += step.cleaned.dropped_ids
        dropped_events += step.cleaned.dropped_events
        if step.call.output is not None:
            previous = step.call.output
        trajectory.append(ChunkRisk(
            chunk_index=chunk.index, start_time=chunk.start_time, end_time=chunk.end_time,
            risk_level=step.call.output.risk_level if step.call.output is not None else None,
            new_events=len(step.cleaned.events), stored_events=report.added,
        ))
    worker_seconds = time.perf_counter() - started

    if previous is None:
        skipped = AgentError(agent=Stage.MANAGER.value, chunk_index=None, kind="skipped", message="not run: every worker call failed")
        return ChainOutcome(trajectory, calls, memory, None, None, dropped_ids, dropped_events, worker_seconds, 0.0, skipped)
    started = time.perf_counter()
    manager = await run_manager(
        gateway, ctx, previous, memory.events(), rules.with_ids(i for c in chunks for i in c.event_ids),
        response_model=models.manager, patient_id=patient_id, fit=fit,
    )
    calls.append(manager.call)
    return ChainOutcome(
        trajectory, calls, memory, previous, manager, dropped_ids + manager.final.dropped_ids,
        dropped_events + manager.final.dropped_events, worker_seconds, time.perf_counter() - started, None,
    )
