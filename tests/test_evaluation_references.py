"""Evaluation that means something: demographics apart from the headline, the judge named and warned about when it
is the display model, and clinician reference answers as the truth (typed loader with clear errors)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from pathlib import Path

import pytest

from vista.display import TumorBoardDisplay, VariableValue, load_variables
from vista.evaluation import (
    ClinicianCase,
    EvaluationError,
    JudgeScore,
    TruthCase,
    evaluate,
    expected_values,
    load_reference_answers,
)
from vista.evaluation.expected import EXAMPLE_TRUTH
from vista.evaluation.options import judge_config
from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.records import Demographics
from vista.shared.synth.ground_truth import OncologyRecord

SPECS = load_variables()
TRUTH = OncologyRecord.model_validate(json.loads(EXAMPLE_TRUTH))
EXAMPLE = Path(__file__).parent / "data" / "clinician_references.csv"
DEMO = Demographics(birth=dt.date(1950, 1, 1), sex="F", race="Asian", ethnicity="Not Hispanic or Latino")


def run(coro):
    return asyncio.run(coro)


def reference_of(request) -> tuple[str, str]:
    fields = dict(line.split(": ", 1) for line in request.messages[1].content.splitlines())
    return fields["Reference answer"], fields["Candidate answer"]


def fair_judge(request):
    reference, candidate = reference_of(request)
    return JudgeScore(score=10 if candidate == reference else 1, rationale="compared")


def judge(model: str = "judge-model") -> LLMGateway:
    return open_gateway(LLMConfig(model=model, max_retries=0, max_reasks=0), backend=ScriptedBackend(fair_judge))


def display(subject_id: int, answers: dict[str, str], model: str = "writer-model", method: str = "vista"):
    values = tuple(VariableValue(key=s.key, value=answers.get(s.key, "Not documented"), source_refs=("e1",),
                                 origin="structured" if s.key == "demographics" else "llm") for s in SPECS)
    return TumorBoardDisplay(subject_id=subject_id, method=method, model=model, content_hash="h", values=values)


# ------------------------------------------------------------------------------------------------ demographics apart
def test_copied_demographics_no_longer_lift_the_headline_accuracy():
    """The defect: demographics' reference is the structured field the display copies, so it always scored 10/10
    inside the headline. A display wrong on everything else but the copied demographics scored 1/15 > 0."""
    case = TruthCase(TRUTH, demographics=DEMO)
    copied = expected_values(TRUTH, SPECS, demographics=DEMO)["demographics"].reference
    report = run(evaluate([display(2, {"demographics": copied}, method="rag")], {2: case}, judge(), n_resamples=50))
    headline = report.method("rag")
    assert headline.n_correct == 0 and headline.accuracy.value == 0.0
    assert headline.n_evaluated == sum(s.headline for s in SPECS) == 14
    (patient,) = report.patient_info
    assert patient.n_correct == 1 and patient.n_evaluated == 1  # demographics, reported apart
    assert patient.unscorable == 4  # height/weight, allergies, prior conditions, medications: not in the generator
    markdown = report.to_markdown()
    assert "PATIENT INFORMATION (apart)" in markdown and "OVERALL (scored tumor-board variables)" in markdown
    assert "Demographics [judge] (patient info)" in markdown


# ------------------------------------------------------------------------------------------------ the judge
def test_a_judge_that_is_the_display_model_is_warned_about_once_and_named(caplog):
    answers = {k: e.reference for k, e in expected_values(TRUTH, SPECS).items() if e.scorable}
    with caplog.at_level(logging.WARNING, logger="vista.evaluation.evaluate"):
        report = run(evaluate([display(2, answers, model="same")], {2: TRUTH}, judge("same"), n_resamples=50))
    warnings = [r for r in caplog.records if r.name == "vista.evaluation.evaluate"]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage() and "same" in warnings[0].getMessage()
    assert report.judge_is_display_model
    assert any(line.startswith("WARNING: the judge same also wrote the displays") for line in report.header_lines())
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vista.evaluation.evaluate"):
        report = run(evaluate([display(2, answers)], {2: TRUTH}, judge("judge-model"), n_resamples=50))
    assert not [r for r in caplog.records if r.name == "vista.evaluation.evaluate"]
    lines = report.header_lines()
    assert lines[0].startswith("VISTA displays written by: writer-model") and lines[1].startswith("Judge: judge-model")
    assert "Truth: generator ground truth" in lines


def test_judge_settings_come_from_judge_llm_or_their_own_variables():
    display_config = LLMConfig(model="writer", backend="openai", base_url="http://127.0.0.1:9/v1")
    config, same = judge_config([], display_config, env={"VISTA_LLM_MODEL": "ignored"})
    assert config is display_config and same
    config, same = judge_config(["model=stronger"], display_config, env={"VISTA_JUDGE_LLM_BACKEND": "openai",
                                                                         "VISTA_JUDGE_LLM_BASE_URL": "http://127.0.0.1:8/v1"})
    assert (config.model, config.base_url, same) == ("stronger", "http://127.0.0.1:8/v1", False)
    config, same = judge_config(["model=writer", "backend=openai", "base_url=http://127.0.0.1:9/v1"], display_config,
                                env={})
    assert same
    from vista.cli import build_parser

    args = build_parser().parse_args(["evaluate", "--store", "s", "--references", "r.csv"])
    assert args.references == "r.csv" and args.truth is None


# ------------------------------------------------------------------------------------------------ clinician answers
def test_the_example_reference_file_loads_and_scores_displays():
    cases = load_reference_answers(EXAMPLE)
    assert list(cases) == [2]
    case = cases[2]
    assert isinstance(case, ClinicianCase) and case.as_of == dt.date(2013, 6, 8)
    expected = case.expected(SPECS)
    assert expected["diagnosis_date"].accepted_dates == (dt.date(2012, 11, 15), dt.date(2012, 11, 21))
    assert expected["metastatic_sites"].items == ("bone", "liver")
    assert not expected["height_weight"].documented and expected["allergies"].scorable
    assert not expected["smoking_history"].scorable and "no clinician reference" in expected["smoking_history"].reason

    answers = {"histology": "Non-small cell carcinoma, NOS", "diagnosis_date": "2012-11-15",
               "metastatic_sites": "osseous and hepatic metastases", "allergies": "No known drug allergies",
               "prior_conditions": "Diabetes", "height_weight": "Not documented"}
    report = run(evaluate([display(2, answers)], cases, judge(), n_resamples=50))
    assert report.variable("vista", "histology").n_correct == 1
    assert report.variable("vista", "diagnosis_date").n_correct == 1
    assert report.variable("vista", "metastatic_sites").n_correct == 1
    assert report.variable("vista", "stage").n_correct == 0
    assert report.variable("vista", "allergies").n_correct == 1  # patient information scored from the clinician
    assert report.variable("vista", "prior_conditions").n_correct == 0
    assert report.variable("vista", "smoking_history").unscorable == 1
    assert report.method("vista").n_evaluated == 5  # histology, stage, date, sites, biomarkers
    assert report.patient_info[0].n_evaluated == 3
    assert any(str(EXAMPLE) in source for source in report.truth_sources)


def test_json_references_in_both_shapes(tmp_path):
    rows = [{"subject_id": 4, "variable": "stage", "answer": "IIIB"}, {"subject_id": 5, "variable": "histology",
                                                                         "answer": "Squamous cell carcinoma"}]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "b.json").write_text(json.dumps({"references": rows}))
    assert list(load_reference_answers(tmp_path / "a.json")) == [4, 5]
    assert list(load_reference_answers(tmp_path / "b.json", subject_ids=[5])) == [5]
    with pytest.raises(EvaluationError, match=r"b.json: no clinician reference answer for subject\(s\) \[6\]"):
        load_reference_answers(tmp_path / "b.json", subject_ids=[5, 6])


@pytest.mark.parametrize(("name", "text", "message"), [
    ("r.csv", "subject_id,variable,answer\n7,histo,Adenocarcinoma\n",
     r"r.csv: line 2: field 'variable': unknown variable 'histo'"),
    ("r.csv", "subject_id,variable,answer\n7,stage,IIIA\nseven,histology,Adenocarcinoma\n",
     r"r.csv: line 3: field 'subject_id': Input should be a valid integer"),
    ("r.csv", "subject_id,variable,answer\n7,stage,\n", r"r.csv: line 2: field 'answer': Field required"),
    ("r.csv", "subject_id,variable\n7,stage\n", r"r.csv: line 1: header missing column\(s\) \['answer'\]"),
    ("r.csv", "subject_id,variable,answer,score\n7,stage,IIIA,9\n", r"line 1: header unknown column\(s\) \['score'\]"),
    ("r.csv", "subject_id,variable,answer\n7,stage,IIIA\n7,stage,IIIB\n",
     r"r.csv: line 3: subject 7 variable 'stage' is answered twice"),
    ("r.csv", "subject_id,variable,answer\n7,diagnosis_date,last spring\n",
     r"line 2: field 'answer': variable 'diagnosis_date' is compared by date"),
    ("r.csv", "subject_id,variable,answer,as_of\n7,stage,IIIA,2020-01-01\n7,histology,Adeno,2021-01-01\n",
     r"line 3: field 'as_of': subject 7 has as_of 2021-01-01 here but 2020-01-01 at line 2"),
    ("r.csv", "subject_id,variable,answer,as_of\n7,stage,IIIA,yesterday\n", r"line 2: field 'as_of'"),
    ("r.csv", "subject_id,variable,answer\n", r"r.csv: no clinician reference answers"),
    ("r.json", '[{"subject_id": 7, "variable": "stage", "answer": "IIIA", "extra": 1}]',
     r"r.json: item 0: field 'extra': Extra inputs are not permitted"),
    ("r.json", '{"rows": []}', r"r.json: expected a list of reference objects"),
    ("r.json", "[1, 2", r"r.json: not JSON"),
    ("r.txt", "x", r"r.txt: clinician reference answers must be a .csv, .tsv or .json file"),
])
def test_bad_reference_files_name_file_row_and_field(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(EvaluationError, match=message):
        load_reference_answers(tmp_path / name)


def test_a_missing_reference_file_is_named(tmp_path):
    with pytest.raises(EvaluationError, match=r"nope.csv: cannot read the clinician reference answers"):
        load_reference_answers(tmp_path / "nope.csv")


def test_truth_sources_combine_generator_records_and_clinician_answers(tmp_path):
    from vista.evaluation.options import load_truth_sources, with_demographics

    (tmp_path / "ground_truth").mkdir()
    lines = [TRUTH.model_copy(update={"subject_id": sid}).model_dump_json() for sid in (2, 3)]
    (tmp_path / "ground_truth" / "oncology.jsonl").write_text("\n".join(lines) + "\n")
    truths = load_truth_sources(tmp_path, EXAMPLE)
    assert isinstance(truths[2], ClinicianCase) and isinstance(truths[3], OncologyRecord)  # clinician replaces
    assert list(load_truth_sources(tmp_path, None, [3])) == [3]
    with pytest.raises(EvaluationError, match=r"no truth for subject\(s\) \[9\]"):
        load_truth_sources(None, EXAMPLE, [2, 9])
    with pytest.raises(EvaluationError, match="no truth given"):
        load_truth_sources(None, None)
    case = with_demographics(truths[3], DEMO)
    assert isinstance(case, TruthCase) and case.demographics == DEMO
    assert with_demographics(truths[2], DEMO) is truths[2]
