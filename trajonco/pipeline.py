"""One patient end to end: timeline → chunks → agents → a typed `PatientResult` (and the any-cancer max pooling).

>>> PipelineConfig(cancer="Multiple Myeloma").cancer
'multiple_myeloma'
>>> auto_chunk_tokens(8192), auto_chunk_tokens(128_000)
(1638, 16000)

`run_patient` is async so a batch job can assess many patients (or many cancers) concurrently through one
`vista.llm.LLMGateway`, whose concurrency limit paces the model; `run_patient_sync` builds a gateway from an
`LLMConfig` and runs one patient, for scripts and the CLI.
Failed agent calls are recorded in the result (``errors``, ``status``); problems with the input itself
(a malformed record, a context too small for the prompt) raise an exception naming the subject.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trajonco.agents.budget import BudgetError, ContextBudget
from trajonco.agents.calls import UsageTally
from trajonco.agents.chain import run_chain
from trajonco.agents.evidence import CleanedEvents, EventRules, SourceIndex, with_provenance
from trajonco.agents.preprocessor import filter_and_rechunk
from trajonco.agents.prompts import PromptContext, render_pair
from trajonco.agents.results import (
    AgentError,
    AnyCancerResult,
    CancerScore,
    ChunkRisk,
    ChunkStats,
    Latency,
    PatientResult,
    Status,
    Variant,
)
from trajonco.agents.schemas import (
    COMPACT_LIMITS,
    STANDARD_LIMITS,
    ManagerOutput,
    OutputLimits,
    OutputModels,
    fit_limits,
    output_models,
)
from trajonco.agents.single_agent import run_single_agent
from trajonco.cancers import CANCERS, CancerType, applicable_cancers, get_cancer
from trajonco.chunking import Chunk, chunk_timeline
from vista.records import CodeCatalog, PatientRecord
from vista.timeline import Timeline, render_timeline
from vista.tokens import count_tokens
from vista.llm import Backend, LLMConfig, LLMGateway

DEFAULT_CHUNK_TOKENS = 16_000
COMPACT_CONTEXT_BELOW = 32_768
"""Contexts smaller than this get the compact output limits when ``output_limits`` is "auto"."""


def auto_chunk_tokens(context_tokens: int) -> int:
    """The chunk limit l for a context window: 16000, but at most a fifth of the window (prompts hold more)."""
    return min(DEFAULT_CHUNK_TOKENS, context_tokens // 5)


class PipelineConfig(BaseModel):
    """How to assess a patient."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    variant: Variant = Field(Variant.ONE_STAGE, description="one_stage: worker chain + manager; two_stage: parallel "
                             "relevance filters first, then the chain on the re-chunked remainder; single_agent: one call")
    cancer: str = Field("lung", description="one of the 15 cancer keys of trajonco.cancers (display names accepted)")
    horizon_days: int = Field(365, ge=1, description="prediction horizon in days, i.e. the gap between the prediction time "
                              "and the index date of the cohort (the paper: 365; sensitivity analyses 182-1826)")
    chunk_tokens: int | None = Field(None, ge=256, description="chunk limit l in cl100k tokens; None: 16000 capped at a fifth "
                                     "of the model's context (1638 for the embedded 8192-token model)")
    memory_k: int = Field(10, ge=0, description="how many of the latest memory events each worker sees")
    cancer_hints: bool = Field(False, description="add the cancer's known risk factors to the prompts (the paper's prompts "
                               "have no cancer-specific knowledge, hence off by default)")
    output_limits: Literal["auto", "standard", "compact"] = Field("auto", description="bounds of the agents' answers; auto: "
                                                                  "compact below a 32k-token context, else standard; compact "
                                                                  "bounds shrink until the longest answer fits max_tokens")
    context_tokens: int | None = Field(None, ge=1024, description="the model's context window; None: ask the gateway")
    context_safety: float = Field(0.8, gt=0.1, le=1.0, description="share of the context window prompts may plan to fill "
                                  "(slack for tokenizers that count more tokens than cl100k: SmolLM2 counts ~1.2x)")

    @field_validator("cancer")
    @classmethod
    def _known_cancer(cls, value: str) -> str:
        return get_cancer(value).key


@dataclass(frozen=True, slots=True)
class GatewayFacts:
    """What the pipeline needs to know about the model behind the gateway."""

    model: str
    context_tokens: int
    output_tokens: int


async def gateway_facts(gateway: LLMGateway, config: PipelineConfig) -> GatewayFacts:
    """The model name, context window and answer budget of ``gateway`` (``config.context_tokens`` overrides)."""
    context = config.context_tokens or gateway.context_tokens or await gateway.discover_context_tokens()
    if not context:
        raise BudgetError(
            f"model {gateway.config.model!r}: the gateway cannot tell its context window; "
            "set PipelineConfig.context_tokens (or LLMConfig.context_tokens)"
        )
    return GatewayFacts(gateway.config.model, int(context), gateway.config.max_tokens)


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


def _limits(config: PipelineConfig, facts: GatewayFacts) -> OutputLimits:
    """Standard bounds for large models; compact ones, shrunk to fit the answer budget, for small models."""
    if config.output_limits == "standard":
        return STANDARD_LIMITS
    if config.output_limits == "compact" or facts.context_tokens < COMPACT_CONTEXT_BELOW:
        return fit_limits(COMPACT_LIMITS, facts.output_tokens)
    return STANDARD_LIMITS


def _worker_overhead(ctx: PromptContext, limits: OutputLimits) -> int:
    """Worst-case tokens of a worker prompt without its chunk (previous answer and memory at their bounds)."""
    system, user = render_pair("worker_next", ctx, previous_output="", memory_events="", chunk_xml="", chunk_number=1, n_chunks=1)
    previous = limits.summary_chars + limits.temporal_chars + limits.reasoning_chars + limits.worker_events * (limits.event_chars + 80)
    memory = ctx.memory_k * (limits.event_chars + 60)
    return count_tokens(system) + count_tokens(user) + (previous + memory) // 3  # ≥ 3 characters per token in practice


def prepare_patient(
    record: PatientRecord, catalog: CodeCatalog, config: PipelineConfig, facts: GatewayFacts, prediction_time: datetime | None
) -> PreparedPatient:
    """Render and chunk the patient's timeline before ``prediction_time`` (default: after the last event)."""
    when = prediction_time or default_prediction_time(record)
    timeline = render_timeline(record, catalog, when)
    chunk_tokens = config.chunk_tokens or auto_chunk_tokens(facts.context_tokens)
    chunks = chunk_timeline(timeline, chunk_tokens)  # also for the single agent: C describes the record's length
    rules = EventRules(frozenset(e.event_id for e in timeline.root.static), when, SourceIndex.from_record(record))
    return PreparedPatient(record, when, timeline, chunks, chunk_tokens, rules)


def _check_worker_fits(prepared: PreparedPatient, ctx: PromptContext, limits: OutputLimits, budget: ContextBudget) -> None:
    need = prepared.chunk_tokens + _worker_overhead(ctx, limits)
    if need > budget.input_tokens:
        raise BudgetError(
            f"subject {prepared.record.subject_id}: chunk_tokens={prepared.chunk_tokens} makes worker prompts of up to {need} "
            f"tokens, more than the {budget.input_tokens} planned for a {budget.context_tokens}-token context with "
            f"{budget.output_tokens} tokens of answer; lower chunk_tokens"
        )


def _status(score: int | None, errors: list[AgentError]) -> Status:
    if score is None:
        return "failed"
    return "partial" if errors else "ok"


@dataclass(slots=True)
class _Outcome:
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


async def _single_agent(prepared: PreparedPatient, ctx: PromptContext, gateway: LLMGateway, models: OutputModels,
                        budget: ContextBudget, stats: ChunkStats) -> _Outcome:
    single = await run_single_agent(gateway, ctx, prepared.timeline, response_model=models.manager,
                                    patient_id=prepared.record.subject_id, budget=budget, rules=prepared.rules)
    tally = UsageTally()
    tally.add(single.call)
    return _Outcome(tally, single.call.output, single.final, stats, {"single_agent": single.call.finished - single.call.started},
                    dropped_ids=single.final.dropped_ids, dropped_events=single.final.dropped_events,
                    truncation_note=single.truncation_note)


async def _agent_chain(prepared: PreparedPatient, ctx: PromptContext, gateway: LLMGateway, models: OutputModels,
                       budget: ContextBudget, stats: ChunkStats, two_stage: bool) -> _Outcome:
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
    chain = await run_chain(gateway, ctx, chunks, models=models, patient_id=subject, budget=budget,
                            rules=prepared.rules)
    tally.extend(chain.calls)
    latency["workers"], latency["manager"] = chain.worker_seconds, chain.manager_seconds
    manager = chain.manager
    left_out = manager.memory_left_out if manager is not None else 0
    return _Outcome(
        tally, manager.call.output if manager else None, manager.final if manager else None, stats, latency,
        trajectory=tuple(chain.trajectory), memory_size=len(chain.memory), dropped_ids=dropped + chain.dropped_ids,
        dropped_events=chain.dropped_events,
        truncation_note=f"manager prompt left out the {left_out} oldest memory events to fit the context" if left_out else None,
        errors=(chain.skipped_manager,) if chain.skipped_manager is not None else (),
    )


async def assess(
    prepared: PreparedPatient, cancer: CancerType, gateway: LLMGateway, config: PipelineConfig, facts: GatewayFacts
) -> PatientResult:
    """Run the configured variant for one prepared patient and one cancer."""
    started = time.perf_counter()
    limits = _limits(config, facts)
    models = output_models(limits)
    budget = ContextBudget(facts.context_tokens, facts.output_tokens, config.context_safety)
    ctx = PromptContext(cancer, prepared.prediction_time.date(), config.horizon_days, config.cancer_hints, config.memory_k)
    timeline = prepared.timeline
    stats = ChunkStats(timeline_events=len(timeline.event_ids()), timeline_tokens=timeline.n_tokens(),
                       chunk_tokens=prepared.chunk_tokens, n_chunks=len(prepared.chunks))
    if config.variant is Variant.SINGLE_AGENT:
        out = await _single_agent(prepared, ctx, gateway, models, budget, stats)
    else:
        _check_worker_fits(prepared, ctx, limits, budget)
        out = await _agent_chain(prepared, ctx, gateway, models, budget, stats, config.variant is Variant.TWO_STAGE)

    errors = out.tally.errors() + list(out.errors)
    answer = out.answer
    score = answer.risk_score if answer is not None else None
    return PatientResult(
        subject_id=prepared.record.subject_id, cancer=cancer.key, variant=config.variant, model=facts.model,
        prediction_time=prepared.prediction_time, horizon_days=config.horizon_days,
        status=_status(score, errors), risk_score=score, probability=None if score is None else score / 10,
        risk_trajectory=out.trajectory,
        summary=answer.risk_evolution_summary if answer is not None else None,
        reasoning=answer.risk_reasoning if answer is not None else None,
        events=with_provenance(out.final.events, prepared.record) if out.final is not None else (),
        memory_events=out.memory_size, dropped_event_ids=out.dropped_ids, dropped_events=out.dropped_events,
        truncated=out.truncation_note is not None, truncation_note=out.truncation_note,
        chunks=out.stats, usage=out.tally.per_agent(),
        latency=Latency(**out.latency, total=time.perf_counter() - started), errors=tuple(errors),
    )


async def run_patient(
    record: PatientRecord,
    catalog: CodeCatalog,
    gateway: LLMGateway,
    config: PipelineConfig = PipelineConfig(),
    *,
    prediction_time: datetime | None = None,
) -> PatientResult:
    """Assess one patient for ``config.cancer`` with events strictly before ``prediction_time``."""
    facts = await gateway_facts(gateway, config)
    prepared = prepare_patient(record, catalog, config, facts, prediction_time)
    return await assess(prepared, CANCERS[config.cancer], gateway, config, facts)


def run_patient_sync(
    record: PatientRecord,
    catalog: CodeCatalog,
    config: PipelineConfig = PipelineConfig(),
    *,
    llm: LLMConfig | None = None,
    backend: Backend | None = None,
    prediction_time: datetime | None = None,
) -> PatientResult:
    """`run_patient` from synchronous code: a gateway for ``llm`` (default: the embedded model) on its own loop.

    ``backend`` replaces the one ``llm`` describes (a `vista.llm.ScriptedBackend` in tests).
    """

    async def run() -> PatientResult:
        async with LLMGateway(llm, backend=backend) as gateway:
            return await run_patient(record, catalog, gateway, config, prediction_time=prediction_time)

    return asyncio.run(run())


def max_pool(subject_id: int, results: list[PatientResult], skipped: tuple[str, ...], seconds: float) -> AnyCancerResult:
    """The any-cancer result: the highest per-cancer score and which cancer carries it (catalog order breaks ties)."""
    scored = [r for r in results if r.risk_score is not None]
    top = max((r.risk_score for r in scored), default=None)  # type: ignore[type-var]
    tied = tuple(r.cancer for r in scored if r.risk_score == top)
    any_problem = any(r.status != "ok" for r in results)
    status: Status = "failed" if top is None else ("partial" if any_problem else "ok")
    return AnyCancerResult(
        subject_id=subject_id, status=status, risk_score=top, probability=None if top is None else top / 10,
        strongest_cancer=tied[0] if tied else None, tied_cancers=tied,
        scores=tuple(CancerScore(cancer=r.cancer, risk_score=r.risk_score, status=r.status) for r in results),
        skipped=skipped, results=tuple(results), latency_total=seconds,
    )


async def run_any_cancer(
    record: PatientRecord,
    catalog: CodeCatalog,
    gateway: LLMGateway,
    config: PipelineConfig = PipelineConfig(),
    *,
    prediction_time: datetime | None = None,
) -> AnyCancerResult:
    """Assess every cancer that can occur with the patient's sex (concurrently) and max-pool the scores.

    The timeline and chunks are built once; the gateway's cache makes a repeated assessment free.
    """
    started = time.perf_counter()
    facts = await gateway_facts(gateway, config)
    prepared = prepare_patient(record, catalog, config, facts, prediction_time)
    return await assess_any_cancer(prepared, gateway, config, facts, started=started)


async def assess_any_cancer(prepared: PreparedPatient, gateway: LLMGateway, config: PipelineConfig, facts: GatewayFacts,
                            *, started: float | None = None) -> AnyCancerResult:
    """`assess` for every cancer that can occur with the prepared patient's sex, max-pooled (``started``: the
    `time.perf_counter` the reported latency counts from; default now)."""
    started = time.perf_counter() if started is None else started
    record = prepared.record
    cancers = applicable_cancers(record.demographics.sex)
    skipped = tuple(key for key in CANCERS if CANCERS[key] not in cancers)
    results = await asyncio.gather(*(
        assess(prepared, cancer, gateway, config.model_copy(update={"cancer": cancer.key}), facts) for cancer in cancers
    ))
    return max_pool(record.subject_id, list(results), skipped, time.perf_counter() - started)


def run_any_cancer_sync(
    record: PatientRecord,
    catalog: CodeCatalog,
    config: PipelineConfig = PipelineConfig(),
    *,
    llm: LLMConfig | None = None,
    backend: Backend | None = None,
    prediction_time: datetime | None = None,
) -> AnyCancerResult:
    """`run_any_cancer` from synchronous code (see `run_patient_sync`)."""

    async def run() -> AnyCancerResult:
        async with LLMGateway(llm, backend=backend) as gateway:
            return await run_any_cancer(record, catalog, gateway, config, prediction_time=prediction_time)

    return asyncio.run(run())
