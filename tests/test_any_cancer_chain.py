"""The paper's any-cancer variant: one chain asked about any cancer, its manager naming the most likely type."""

from __future__ import annotations

import asyncio
import json

from test_agents_chain import PREDICTION, Script, manager_answer, worker_answer
from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.results import AnyCancerResult, Variant
from trajonco.cancers import applicable_cancers
from trajonco.any_cancer import run_any_cancer
from trajonco.pipeline import PipelineConfig, run_sync
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.scripted import ScriptedBackend


def naming(cancer: str, score: int = 6):
    def answer(request, n):
        return manager_answer(score)(request, n) | {"likely_cancer": cancer}
    return answer


def run(script: Script, config: PipelineConfig, **llm):
    async def go():
        async with open_gateway(LLMConfig(max_retries=0, **llm), backend=ScriptedBackend(script)) as gateway:
            return await run_any_cancer(lung_patient(n_visits=8), CATALOG, gateway, config, prediction_time=PREDICTION)
    return asyncio.run(go())


def test_one_chain_scores_any_cancer_and_names_the_most_likely():
    script = Script(worker=worker_answer, manager=naming("pancreatic", 7))
    result = run(script, PipelineConfig(chunk_tokens=600))
    assert result.mode == "chain" and result.status == "ok"
    assert result.risk_score == 7 and result.probability == 0.7 and result.strongest_cancer == "pancreatic"
    assert result.tied_cancers == ("pancreatic",) and result.scores == ()
    assert set(result.skipped) == {"cervical", "endometrial", "ovarian"}  # a male patient
    (chain,) = result.results
    assert chain.cancer == "any" and chain.likely_cancer == "pancreatic" and chain.events
    assert result.representative() is chain
    assert len(script.prompts("manager")) == 1 and len(script.prompts("worker")) == chain.chunks.n_chunks
    assert AnyCancerResult.model_validate_json(result.model_dump_json()) == result


def test_the_prompts_ask_about_the_patients_possible_cancers_and_the_manager_for_a_type():
    script = Script(worker=worker_answer, manager=naming("lung"))
    run(script, PipelineConfig(chunk_tokens=600))
    worker_system, _ = script.prompts("worker")[0]
    manager_system, _ = script.prompts("manager")[0]
    for system in (worker_system, manager_system):
        assert "diagnosed with any cancer within 1 year" in system
        assert "prostate cancer" in system and "ovarian" not in system  # only what the sex allows
    assert '"likely_cancer"' in manager_system and '"prostate"' in manager_system
    assert '"likely_cancer"' not in worker_system
    manager_request = next(r for a, r in script.seen if a == "manager")
    schema = manager_request.response_format["json_schema"]["schema"]
    assert "likely_cancer" in schema["required"] and "lung" in schema["properties"]["likely_cancer"]["enum"]


def test_a_manager_naming_no_known_cancer_is_reasked():
    answers = iter([naming("skin"), naming("liver", 4)])
    script = Script(worker=worker_answer, manager=lambda request, n: next(answers)(request, n))
    result = run(script, PipelineConfig(chunk_tokens=600), max_reasks=1)
    assert result.strongest_cancer == "liver" and result.results[0].usage["manager"].attempts == 2


def test_chain_costs_one_chain_where_max_pooling_costs_one_per_cancer():
    chain_script = Script(worker=worker_answer, manager=naming("lung"))
    max_script = Script(worker=worker_answer, manager=manager_answer(5))
    run(chain_script, PipelineConfig(chunk_tokens=600))
    pooled = run(max_script, PipelineConfig(chunk_tokens=600, any_cancer_mode="max"))
    n_cancers = len(applicable_cancers("M"))
    assert pooled.mode == "max" and len(pooled.results) == n_cancers
    assert len(max_script.seen) == n_cancers * len(chain_script.seen)


def test_single_agent_any_cancer_names_the_type_too():
    script = Script(single_agent=naming("colorectal", 3))
    result = run_sync(run_any_cancer, lung_patient(n_visits=4), CATALOG, PipelineConfig(variant=Variant.SINGLE_AGENT),
                      backend=ScriptedBackend(script), prediction_time=PREDICTION)
    assert result.strongest_cancer == "colorectal" and result.risk_score == 3
    system, _ = script.prompts("single_agent")[0]
    assert "any cancer" in system and '"likely_cancer"' in system


def test_a_failed_chain_is_a_failed_any_cancer_result():
    script = Script(worker=worker_answer, manager=lambda request, n: {"nonsense": 1})
    result = run(script, PipelineConfig(chunk_tokens=600), max_reasks=0)
    assert result.status == "failed" and result.risk_score is None and result.strongest_cancer is None
    assert result.tied_cancers == () and result.results[0].errors


def test_prediction_row_records_the_named_cancer():
    from vista.shared.llm.task_usage import TaskUsage
    from trajonco.prediction_rows import RowContext, row_from_result
    from vista.shared.meds.task_key import TaskKey

    result = run(Script(worker=worker_answer, manager=naming("bladder", 8)), PipelineConfig(chunk_tokens=600))
    context = RowContext(cancer="any", variant="one_stage", model="scripted", run_id="r1")
    row = row_from_result(TaskKey(result.subject_id, PREDICTION), True, result, TaskUsage(), context, wall_s=1.0)
    assert row.cancer == "any" and row.strongest_cancer == "bladder" and row.risk_score == 8
    assert json.loads(row.cancer_scores) == [] and json.loads(row.events)  # the chain's events are the row's
    assert row.summary == "rose over time"


def test_predict_job_options_reach_the_pipeline_config(tmp_path):
    from jobs.predict import build_settings
    from jobs.predict_options import build_parser

    base = ["--labels", "l.parquet", "--dataset", str(tmp_path), "--out", str(tmp_path / "o"), "--any-cancer",
            "--coding-profile", "meds_synth"]
    default = build_settings(build_parser().parse_args(base), "r1")
    assert default.any_cancer and default.pipeline.any_cancer_mode == "chain" and default.pipeline.answer_tokens == "fit"
    chosen = build_settings(build_parser().parse_args(base + ["--any-cancer-mode", "max", "--answer-budget", "fixed"]), "r1")
    assert chosen.pipeline.any_cancer_mode == "max" and chosen.pipeline.answer_tokens == "fixed"
