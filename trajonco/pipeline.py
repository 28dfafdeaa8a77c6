"""One patient end to end: timeline → chunks → agents → a typed `PatientResult`.

The pieces live in one module per concept; this module assesses one patient and re-exports the public names,
so ``from trajonco.pipeline import ...`` keeps working:

- `trajonco.pipeline_config`: `PipelineConfig`;
- `trajonco.fitting`: the model's facts (`gateway_facts`), the chunk size, each agent's answer tokens, the room for the prompt;
- `trajonco.preparation`: the patient's timeline and chunks (`prepare_patient`), shared by every cancer assessed;
- `trajonco.variants`: the single agent, one-stage and two-stage chains (`run_variant`);
- `trajonco.any_cancer` (built on this module, imported from there): the any-cancer assessment, one chain (the
  paper's) or max pooling over per-cancer chains.

>>> PipelineConfig(cancer="Multiple Myeloma").cancer
'multiple_myeloma'
>>> auto_chunk_tokens(8192), auto_chunk_tokens(128_000)
(1638, 16000)

`run_patient` is async so a batch job can assess many patients (or many cancers) concurrently through one
`vista.shared.llm.LLMGateway`, whose concurrency limit paces the model; ``run_sync(run_patient, ...)`` (`trajonco.sync_run`)
builds a gateway from an `LLMConfig` and runs one patient, for scripts and the CLI.
Failed agent calls are recorded in the result (``errors``, ``status``); problems with the input itself
(a malformed record, a context too small for the prompt) raise an exception naming the subject.
"""

from __future__ import annotations

import time
from datetime import datetime

from trajonco.agents.context_fit import ContextFitError
from trajonco.agents.evidence import RecordSpan, with_provenance
from trajonco.agents.prompts import PromptContext
from trajonco.agents.results import AgentError, AnyCancerResult, ChunkStats, Latency, PatientResult, Status, Variant
from trajonco.agents.schemas import AnyCancerManagerOutput, output_models
from trajonco.fitting import (
    COMPACT_CONTEXT_BELOW,
    DEFAULT_CHUNK_TOKENS,
    AnswerFit,
    GatewayFacts,
    answer_fit,
    auto_chunk_tokens,
    context_fit,
    gateway_facts,
    sized,
)
from trajonco.cancers import CANCERS, CancerType
from trajonco.pipeline_config import PipelineConfig
from trajonco.preparation import PreparedPatient, default_prediction_time, prepare_patient, prepare_patient_off_loop
from trajonco.sync_run import run_sync
from trajonco.variants import VariantOutcome, run_variant
from vista.shared.llm.caller import LLMCaller
from vista.shared.records import CodeCatalog, PatientRecord

__all__ = [
    "COMPACT_CONTEXT_BELOW", "DEFAULT_CHUNK_TOKENS", "AnswerFit", "AnyCancerResult", "ContextFitError", "GatewayFacts",
    "PatientResult", "PipelineConfig", "PreparedPatient", "Variant", "VariantOutcome", "answer_fit", "assess",
    "auto_chunk_tokens", "default_prediction_time", "gateway_facts", "prepare_patient", "run_patient", "run_sync",
]

def _status(score: int | None, errors: list[AgentError]) -> Status:
    if score is None:
        return "failed"
    return "partial" if errors else "ok"


async def assess(
    prepared: PreparedPatient, cancer: CancerType, gateway: LLMCaller, config: PipelineConfig, facts: GatewayFacts,
    *, candidates: tuple[CancerType, ...] = (),
) -> PatientResult:
    """Run the configured variant for one prepared patient and one cancer.

    With ``candidates`` (the any-cancer chain; ``cancer`` is then `trajonco.agents.prompts.ANY_CANCER`) the prompts
    ask about any of those cancers and the manager (or single agent) also names the most likely one.
    """
    started = time.perf_counter()
    answers = answer_fit(config, facts)
    models = output_models(answers.limits)
    if candidates:
        models = models.for_any_cancer()
    fit = context_fit(config, facts, answers)
    ctx = PromptContext(cancer, prepared.prediction_time.date(), config.horizon_days, config.cancer_hints, config.memory_k,
                        part_numbers=config.part_numbers, candidates=candidates)
    timeline = prepared.timeline
    stats = ChunkStats(timeline_events=len(timeline.event_ids()), timeline_tokens=timeline.n_tokens(),
                       chunk_tokens=prepared.chunk_tokens, n_chunks=len(prepared.chunks))
    out = await run_variant(config.variant, prepared, ctx, sized(gateway, answers), models, fit, stats)

    errors = out.tally.errors() + list(out.errors)
    answer = out.answer
    span = RecordSpan.of(prepared.record, prepared.prediction_time)  # evidence dated outside it is flagged
    score = answer.risk_score if answer is not None else None
    return PatientResult(
        subject_id=prepared.record.subject_id, cancer=cancer.key, variant=config.variant, model=facts.model,
        prediction_time=prepared.prediction_time, horizon_days=config.horizon_days,
        status=_status(score, errors), risk_score=score, probability=None if score is None else score / 10,
        likely_cancer=answer.likely_cancer if isinstance(answer, AnyCancerManagerOutput) else None,
        risk_trajectory=out.trajectory,
        summary=answer.risk_evolution_summary if answer is not None else None,
        reasoning=answer.risk_reasoning if answer is not None else None,
        events=with_provenance(out.final.events, prepared.record, span) if out.final is not None else (),
        memory_events=out.memory_size, dropped_event_ids=out.dropped_ids, dropped_events=out.dropped_events,
        truncated=out.truncation_note is not None, truncation_note=out.truncation_note,
        chunks=out.stats, usage=out.tally.per_agent(),
        latency=Latency(**out.latency, total=time.perf_counter() - started), errors=tuple(errors),
    )


async def run_patient(
    record: PatientRecord,
    catalog: CodeCatalog,
    gateway: LLMCaller,
    config: PipelineConfig = PipelineConfig(),
    *,
    prediction_time: datetime | None = None,
) -> PatientResult:
    """Assess one patient for ``config.cancer`` with events strictly before ``prediction_time``."""
    facts = await gateway_facts(gateway, config)
    prepared = await prepare_patient_off_loop(record, catalog, config, facts, prediction_time)
    return await assess(prepared, CANCERS[config.cancer], gateway, config, facts)
