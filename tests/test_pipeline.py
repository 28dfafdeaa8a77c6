"""The per-patient pipeline's config, sync entry points, result JSON and printing (scripted backend)."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest
from pydantic import ValidationError
from rich.console import Console

from test_agents_chain import PREDICTION, Script, manager_answer, worker_answer
from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.display import print_result
from trajonco.agents.results import AnyCancerResult, PatientResult, Variant
from trajonco.cancers import UnknownCancerError
from trajonco.any_cancer import run_any_cancer
from trajonco.pipeline import (
    PipelineConfig,
    auto_chunk_tokens,
    default_prediction_time,
    run_patient,
    run_sync,
)
from vista.shared.llm import LLMConfig
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.records import PatientRecord


def test_config_normalizes_the_cancer_and_rejects_unknown_values():
    assert PipelineConfig(cancer="Lung Cancer").cancer == "lung"
    with pytest.raises(ValidationError, match="expected one of"):
        PipelineConfig(cancer="skin")
    with pytest.raises(ValidationError):
        PipelineConfig(variant="three_stage")
    with pytest.raises(ValidationError):
        PipelineConfig(chunk_tokens=10)
    with pytest.raises(ValidationError):
        PipelineConfig(unknown_field=1)
    assert all(field.description for field in PipelineConfig.model_fields.values())
    assert UnknownCancerError.__mro__[1] is ValueError


def test_chunk_size_follows_the_context_window():
    assert auto_chunk_tokens(8192) == 1638
    assert auto_chunk_tokens(32_768) == 6553
    assert auto_chunk_tokens(1_000_000) == 16_000


def test_default_prediction_time_is_the_day_after_the_last_event():
    record = lung_patient(n_visits=3)  # visits on 2018-03-01, 2018-05-01 and 2018-07-01 at 09:00
    assert default_prediction_time(record) == datetime(2018, 7, 2)
    with pytest.raises(ValueError, match="subject 9: no timed events"):
        default_prediction_time(PatientRecord(9, "s", 0, []))


def scripted():
    return ScriptedBackend(Script(worker=worker_answer, manager=manager_answer(6), single_agent=manager_answer(2)))


def test_run_sync_uses_the_embedded_context_and_compact_answers_by_default():
    backend = scripted()
    result = run_sync(run_patient, lung_patient(n_visits=12), CATALOG, llm=LLMConfig(max_reasks=0), backend=backend,
                      prediction_time=PREDICTION)
    assert result.chunks.chunk_tokens == 1638  # a fifth of the 8192-token context the backend reports
    assert all(r.response_format["json_schema"]["name"].startswith("Compact") for r in backend.requests)
    assert result.model == LLMConfig().model and result.risk_score == 6 and result.cancer == "lung"
    assert result.usage["worker"].calls == result.chunks.n_chunks and result.usage["manager"].calls == 1
    assert result.usage["worker"].prompt_tokens == 10 * result.chunks.n_chunks  # the scripted backend's usage


def test_standard_answers_for_large_contexts():
    backend = ScriptedBackend(Script(worker=worker_answer, manager=manager_answer(6)), context_window=128_000)
    result = run_sync(run_patient, lung_patient(n_visits=12), CATALOG, llm=LLMConfig(max_reasks=0), backend=backend,
                      prediction_time=PREDICTION)
    assert result.chunks.chunk_tokens == 16_000 and result.chunks.n_chunks == 1
    assert backend.requests[0].response_format["json_schema"]["name"] == "WorkerOutput"


def test_the_result_round_trips_through_json_and_prints_readably():
    result = run_sync(run_patient, lung_patient(n_visits=12), CATALOG, PipelineConfig(chunk_tokens=600),
                      backend=scripted(), prediction_time=PREDICTION)
    text = result.model_dump_json()
    assert PatientResult.model_validate_json(text) == result
    assert json.loads(text)["probability"] == 0.6
    out = io.StringIO()
    print_result(result, console=Console(file=out, width=120))
    shown = out.getvalue()
    assert "subject 42" in shown and "risk 6/10" in shown and "risk per chunk" in shown and "e" in shown
    assert f"C={result.chunks.n_chunks}" in shown and "rose over time" in shown
    out = io.StringIO()
    print_result(result, as_json=True, console=Console(file=out, width=120))
    assert json.loads(out.getvalue())["subject_id"] == 42


def test_single_agent_variant_through_the_sync_entry_point():
    result = run_sync(run_patient, lung_patient(n_visits=6), CATALOG, PipelineConfig(variant=Variant.SINGLE_AGENT),
                      backend=scripted(), prediction_time=PREDICTION)
    assert result.variant is Variant.SINGLE_AGENT and result.risk_score == 2 and result.usage["single_agent"].calls == 1


def test_any_cancer_sync_prints_its_pooled_score():
    pooled = run_sync(run_any_cancer, lung_patient(n_visits=4), CATALOG,
                      PipelineConfig(chunk_tokens=2000, any_cancer_mode="max"), backend=scripted(),
                      prediction_time=PREDICTION)
    assert AnyCancerResult.model_validate_json(pooled.model_dump_json()) == pooled
    out = io.StringIO()
    print_result(pooled, console=Console(file=out, width=120))
    assert "any cancer" in out.getvalue() and "not assessed (sex): cervical, endometrial, ovarian" in out.getvalue()


def test_events_at_or_after_the_prediction_time_are_never_shown():
    backend = scripted()
    record = lung_patient(n_visits=12)
    cutoff = datetime(2019, 6, 1)
    run_sync(run_patient, record, CATALOG, PipelineConfig(chunk_tokens=600), backend=backend, prediction_time=cutoff)
    late = {e.event_id for e in record.events if e.time is not None and e.time >= cutoff}
    for request in backend.requests:
        for message in request.messages:
            assert not any(f'id="{i}"' in message.content for i in late)


def test_left_truncation_keeps_only_the_newest_tokens_of_the_timeline():
    patient = lung_patient(n_visits=40)
    whole = run_sync(run_patient, patient, CATALOG, llm=LLMConfig(max_reasks=0), backend=scripted(),
                     prediction_time=PREDICTION)
    cut = run_sync(run_patient, patient, CATALOG, config=PipelineConfig(truncate_tokens=1000),
                   llm=LLMConfig(max_reasks=0), backend=scripted(), prediction_time=PREDICTION)
    assert whole.chunks.timeline_tokens > 1000 >= cut.chunks.timeline_tokens
    assert cut.chunks.timeline_events < whole.chunks.timeline_events
    with pytest.raises(ValidationError):
        PipelineConfig(truncate_tokens=10)  # below the smallest useful budget


def test_the_split_modules_stay_reachable_through_trajonco_pipeline():
    import trajonco.any_cancer
    import trajonco.fitting
    import trajonco.pipeline as pipeline
    import trajonco.preparation

    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None
    assert not hasattr(pipeline, "run_any_cancer")  # any_cancer builds on pipeline: no import back (no cycle)
    assert trajonco.any_cancer.run_any_cancer is not None
    assert pipeline.gateway_facts is trajonco.fitting.gateway_facts
    assert pipeline.prepare_patient is trajonco.preparation.prepare_patient
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pipeline.nothing  # noqa: B018
