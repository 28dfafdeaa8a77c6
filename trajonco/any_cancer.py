"""Any-cancer prediction: is this patient going to be diagnosed with any cancer within the horizon?

Two ways (``PipelineConfig.any_cancer_mode``), both over the cancers the patient's sex allows:

- ``chain`` (default, the paper's): one assessment whose prompts ask for the strongest signal of any of those
  cancers; the manager (or single agent) scores the risk of any cancer and names the most likely type. One
  chain's cost.
- ``max``: one assessment per cancer (12-15 chains, concurrently), the highest score kept ("max pooling"),
  ties going to catalog order. The timeline and chunks are built once; the gateway's cache makes a repeated
  assessment free.

Both return an `AnyCancerResult` (``mode`` says which; ``strongest_cancer`` is the named or highest-scoring cancer).
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from trajonco.agents.prompts import ANY_CANCER
from trajonco.agents.results import AnyCancerResult, CancerScore, PatientResult, Status
from trajonco.fitting import GatewayFacts, gateway_facts
from trajonco.cancers import CANCERS, applicable_cancers
from trajonco.pipeline import assess
from trajonco.pipeline_config import PipelineConfig
from trajonco.preparation import PreparedPatient, prepare_patient_off_loop
from vista.shared.llm.caller import LLMCaller
from vista.shared.records import CodeCatalog, PatientRecord


def max_pool(subject_id: int, results: list[PatientResult], skipped: tuple[str, ...], seconds: float) -> AnyCancerResult:
    """The any-cancer result: the highest per-cancer score and which cancer carries it (catalog order breaks ties)."""
    scored = [r for r in results if r.risk_score is not None]
    top = max((r.risk_score for r in scored), default=None)  # type: ignore[type-var]
    tied = tuple(r.cancer for r in scored if r.risk_score == top)
    any_problem = any(r.status != "ok" for r in results)
    status: Status = "failed" if top is None else ("partial" if any_problem else "ok")
    return AnyCancerResult(
        subject_id=subject_id, mode="max", status=status, risk_score=top, probability=None if top is None else top / 10,
        strongest_cancer=tied[0] if tied else None, tied_cancers=tied,
        scores=tuple(CancerScore(cancer=r.cancer, risk_score=r.risk_score, status=r.status) for r in results),
        skipped=skipped, results=tuple(results), latency_total=seconds,
    )


def from_chain(result: PatientResult, skipped: tuple[str, ...], seconds: float) -> AnyCancerResult:
    """The any-cancer result of the one chain: its score, and the cancer its manager named."""
    named = result.likely_cancer
    return AnyCancerResult(
        subject_id=result.subject_id, mode="chain", status=result.status, risk_score=result.risk_score,
        probability=result.probability, strongest_cancer=named, tied_cancers=(named,) if named else (), scores=(),
        skipped=skipped, results=(result,), latency_total=seconds,
    )


async def assess_any_cancer(prepared: PreparedPatient, gateway: LLMCaller, config: PipelineConfig, facts: GatewayFacts,
                            *, started: float | None = None) -> AnyCancerResult:
    """The any-cancer assessment of a prepared patient, as ``config.any_cancer_mode`` says (``started``: the
    `time.perf_counter` the reported latency counts from; default now)."""
    started = time.perf_counter() if started is None else started
    record = prepared.record
    cancers = applicable_cancers(record.demographics.sex)
    skipped = tuple(key for key in CANCERS if CANCERS[key] not in cancers)
    if config.any_cancer_mode == "chain":
        result = await assess(prepared, ANY_CANCER, gateway, config, facts, candidates=tuple(cancers))
        return from_chain(result, skipped, time.perf_counter() - started)
    results = await asyncio.gather(*(
        assess(prepared, cancer, gateway, config.model_copy(update={"cancer": cancer.key}), facts) for cancer in cancers
    ))
    return max_pool(record.subject_id, list(results), skipped, time.perf_counter() - started)


async def run_any_cancer(
    record: PatientRecord,
    catalog: CodeCatalog,
    gateway: LLMCaller,
    config: PipelineConfig = PipelineConfig(),
    *,
    prediction_time: datetime | None = None,
) -> AnyCancerResult:
    """Assess the patient for any cancer its sex allows (``config.any_cancer_mode``: one chain, or max pooling)."""
    started = time.perf_counter()
    facts = await gateway_facts(gateway, config)
    prepared = await prepare_patient_off_loop(record, catalog, config, facts, prediction_time)
    return await assess_any_cancer(prepared, gateway, config, facts, started=started)
