"""Variant dispatch: run the single agent, the one-stage chain or the two-stage chain for one prepared patient.

Each variant returns a `VariantOutcome` (the calls, the final answer and events, the chunk statistics, the stage
latencies, what was dropped or cut); `trajonco.pipeline.assess` turns it into a `PatientResult`. Its calls are served
as one chain of `expected_calls` (`vista.shared.llm._priority`: a budget serves the longest remaining chain first).

>>> expected_calls(Variant.ONE_STAGE, 12), expected_calls(Variant.TWO_STAGE, 12), expected_calls(Variant.SINGLE_AGENT, 12)
(13, 25, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from trajonco.agents.context_fit import ContextFit
from trajonco.agents.calls import UsageTally
from trajonco.agents.chain import run_chain
from trajonco.agents.evidence import CleanedEvents
from trajonco.agents.preprocessor import filter_and_rechunk
from trajonco.agents.prompts import PromptContext
from trajonco.agents.results import AgentError, ChunkRisk, ChunkStats, Variant
from trajonco.agents.schemas import ManagerOutput, OutputModels
from trajonco.agents.single_agent import run_single_agent
from trajonco.fitting import check_worker_fits
from trajonco.preparation import PreparedPatient
from vista.shared.llm.caller import LLMCaller
from vista.shared.llm import chain_calls


@dataclass(slots=True)
class VariantOutcome:
    """What a variant produced, before it becomes a `PatientResult`."""

    tally: UsageTally
    answer: ManagerOutput | None
    final: CleanedEvents | None
    stats: ChunkStats
    latency: dict[str, float]
    trajectory: tuple[ChunkRisk, ...] = ()
    memory_size: int = 0
    dropped_ids: int = 0
    dropped_events: int = 0
    truncation_note: str | None = None
    errors: tuple[AgentError, ...] = ()


def expected_calls(variant: Variant, chunks: int) -> int:
    """The calls a variant makes for a patient of ``chunks`` chunks when every answer comes at the first ask: a worker
    call per chunk and the manager's (two-stage: a preprocessor call per chunk first), or the single agent's one."""
    if variant is Variant.SINGLE_AGENT:
        return 1
    return (2 if variant is Variant.TWO_STAGE else 1) * chunks + 1


async def run_variant(variant: Variant, prepared: PreparedPatient, ctx: PromptContext, gateway: LLMCaller,
                      models: OutputModels, fit: ContextFit, stats: ChunkStats) -> VariantOutcome:
    """Run ``variant`` (the chain variants first check that a full chunk fits the room for the prompt)."""
    with chain_calls(expected_calls(variant, len(prepared.chunks))):
        if variant is Variant.SINGLE_AGENT:
            return await single_agent(prepared, ctx, gateway, models, fit, stats)
        check_worker_fits(prepared.record.subject_id, prepared.chunk_tokens, ctx, models.limits, fit)
        return await agent_chain(prepared, ctx, gateway, models, fit, stats, two_stage=variant is Variant.TWO_STAGE)


async def single_agent(prepared: PreparedPatient, ctx: PromptContext, gateway: LLMCaller, models: OutputModels,
                       fit: ContextFit, stats: ChunkStats) -> VariantOutcome:
    """The single-agent baseline: one call over the (possibly left-truncated) whole timeline."""
    single = await run_single_agent(gateway, ctx, prepared.timeline, response_model=models.manager,
                                    patient_id=prepared.record.subject_id, fit=fit, rules=prepared.rules)
    tally = UsageTally()
    tally.add(single.call)
    return VariantOutcome(tally, single.call.output, single.final, stats,
                          {"single_agent": single.call.finished - single.call.started},
                          dropped_ids=single.final.dropped_ids, dropped_events=single.final.dropped_events,
                          truncation_note=single.truncation_note)


async def agent_chain(prepared: PreparedPatient, ctx: PromptContext, gateway: LLMCaller, models: OutputModels,
                      fit: ContextFit, stats: ChunkStats, *, two_stage: bool) -> VariantOutcome:
    """The worker chain and manager, after the parallel relevance filters when ``two_stage``."""
    tally = UsageTally()
    latency: dict[str, float] = {}
    chunks, dropped = prepared.chunks, 0
    subject = prepared.record.subject_id
    if two_stage:
        filtered = await filter_and_rechunk(gateway, ctx, chunks, response_model=models.preprocessor, patient_id=subject,
                                            max_tokens=prepared.chunk_tokens)
        tally.extend(filtered.calls)
        chunks, dropped = filtered.reduced_chunks, filtered.dropped_ids
        latency["preprocess"] = filtered.seconds
        stats = stats.model_copy(update={
            "n_chunks_reduced": len(chunks), "reduced_events": sum(len(c.event_ids) for c in chunks),
            "reduced_tokens": sum(c.n_tokens for c in chunks),
        })
    chain = await run_chain(gateway, ctx, chunks, models=models, patient_id=subject, fit=fit,
                            rules=prepared.rules)
    tally.extend(chain.calls)
    latency["workers"], latency["manager"] = chain.worker_seconds, chain.manager_seconds
    manager = chain.manager
    left_out = manager.memory_left_out if manager is not None else 0
    return VariantOutcome(
        tally, manager.call.output if manager else None, manager.final if manager else None, stats, latency,
        trajectory=tuple(chain.trajectory), memory_size=len(chain.memory), dropped_ids=dropped + chain.dropped_ids,
        dropped_events=chain.dropped_events,
        truncation_note=f"manager prompt left out the {left_out} oldest memory events to fit the context" if left_out else None,
        errors=(chain.skipped_manager,) if chain.skipped_manager is not None else (),
    )
