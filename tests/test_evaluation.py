"""Evaluation: reference answers from the ground truth, rule scorers, the judge (scripted), aggregation and CIs."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json

import numpy as np
import pytest
from rich.console import Console

from vista.display import Comparison, TumorBoardDisplay, VariableSpec, VariableValue, load_variables
from vista.evaluation import (
    EvaluationError,
    Expected,
    JudgeScore,
    TruthCase,
    evaluate,
    expected_values,
    find_dates,
    load_oncology_truths,
    paired_difference,
    patient_interval,
    score_date,
    score_exact,
    score_set,
    split_sites,
)
from vista.evaluation.expected import EXAMPLE_TRUTH, RULES
from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.errors import BackendError
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.records import Demographics
from vista.shared.synth.ground_truth import OncologyRecord

SPECS = load_variables()
TRUTH = OncologyRecord.model_validate(json.loads(EXAMPLE_TRUTH))


def truth_for(subject_id: int) -> OncologyRecord:
    return TRUTH.model_copy(update={"subject_id": subject_id})


def run(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------------------------------------------ normalization
def test_find_dates_reads_common_formats_in_order_and_skips_impossible_ones():
    text = "seen 2013-13-40, then 03/04/2013, 5 March 2013, March 2013 and 2013-06"
    assert find_dates(text) == [(dt.date(2013, 3, 4), "day"), (dt.date(2013, 3, 5), "day"),
                                (dt.date(2013, 3, 1), "month"), (dt.date(2013, 6, 1), "month")]
    assert find_dates("ECOG 2, 49.2 pack-years") == []


@pytest.mark.parametrize("answer,items", [
    ("None", ()), ("No distant metastases", ()), ("Not documented", ()),
    ("Bone metastases; liver metastases", ("bone", "liver")),
    ("hepatic and osseous mets (T5, L2)", ("bone", "liver")),
    ("Brain, adrenal glands, mediastinal lymph nodes", ("adrenal glands", "brain", "mediastinal node")),
])
def test_split_sites_normalizes_wording(answer, items):
    assert split_sites(answer) == items


# ------------------------------------------------------------------------------------------------ scorers
def _expected(comparison: Comparison, **fields) -> Expected:
    return Expected(key="k", comparison=comparison, scorable=True, **fields)


def test_exact_scorer_ignores_case_and_punctuation_and_handles_silence():
    e = _expected(Comparison.EXACT, reference="Adenocarcinoma, NOS")
    assert score_exact(e, "adenocarcinoma nos.").score == 10 and score_exact(e, "squamous cell").score == 0
    silent = _expected(Comparison.EXACT, reference="Not documented", documented=False)
    assert score_exact(silent, "None").score == 10 and score_exact(silent, "adenocarcinoma").score == 0


def test_date_scorer_same_day_or_same_month_and_first_date_counts():
    e = _expected(Comparison.DATE, reference="2012-11-21", accepted_dates=(dt.date(2012, 11, 21),))
    assert score_date(e, "11/21/2012").score == 10
    assert score_date(e, "November 2012").score == 10
    assert score_date(e, "2012-11-22").score == 0
    assert score_date(e, "2012-12-01 (first seen 2012-11-21)").score == 0  # the first date written is the answer
    assert score_date(e, "Not documented").score == 0 and "no date" in score_date(e, "unknown").rationale
    silent = _expected(Comparison.DATE, reference="Not documented", documented=False)
    assert score_date(silent, "Not documented").score == 10 and score_date(silent, "2012-11-21").score == 0


def test_set_scorer_compares_normalized_sets():
    e = _expected(Comparison.SET, reference="bone, liver", items=("bone", "liver"))
    assert score_set(e, "Liver mets and osseous metastases").score == 10
    assert score_set(e, "bone").score == 0 and "missing liver" in score_set(e, "bone").rationale
    none = _expected(Comparison.SET, reference="None", items=())
    assert score_set(none, "No metastases").score == 10 and score_set(none, "brain").score == 0
    with pytest.raises(ValueError, match="needs Expected.items"):
        score_set(_expected(Comparison.SET, reference="x"), "x")


# ------------------------------------------------------------------------------------------------ expected values
def test_every_packaged_variable_has_a_rule_and_unsettled_ones_say_why():
    assert {s.key for s in SPECS} <= set(RULES)
    expected = expected_values(TRUTH, SPECS)
    assert set(expected) == {s.key for s in SPECS}
    unscorable = {k: e.reason for k, e in expected.items() if not e.scorable}
    assert set(unscorable) == {"demographics", "code_status", "height_weight", "allergies", "prior_conditions",
                               "medications"} and all(unscorable.values())
    assert "clinician reference answers" in unscorable["allergies"]
    for key, e in expected.items():
        if e.scorable:
            assert e.reference and e.rubric_hint and e.comparison == next(s.comparison for s in SPECS if s.key == key)
    assert expected["treatment_history"].reference.startswith("Line 1: Carboplatin/paclitaxel (palliative), "
                                                              "2012-12-23 to 2013-03-22, ended: progression; Line 2")
    assert "died" in expected["current_therapy"].rubric_hint
    assert expected["surgery"].reference == "No" and expected["radiation"].reference == "No"
    assert expected["performance_status"].reference == "ECOG 2 (2013-04-08)"


def test_demographics_and_unknown_variables():
    demo = Demographics(birth=dt.date(1933, 6, 1), sex="M", race="White", ethnicity="Not Hispanic or Latino")
    extra = VariableSpec(key="favourite_colour", label="Colour", question="?", comparison="judge")
    expected = expected_values(TRUTH, [*SPECS[:1], extra], demographics=demo)
    assert expected["demographics"].reference == "80 years, male, race White, ethnicity Not Hispanic or Latino"
    assert not expected["favourite_colour"].scorable and "no ground-truth rule" in expected["favourite_colour"].reason


def test_as_of_leaves_out_later_facts():
    early = expected_values(TRUTH, SPECS, dt.date(2013, 1, 10))
    assert early["treatment_history"].reference == ("Line 1: Carboplatin/paclitaxel (palliative), 2012-12-23 to "
                                                    "ongoing, ended: ongoing")
    assert early["current_therapy"].reference.startswith("Carboplatin/paclitaxel (line 1")
    assert early["progression"].reference == "No" and early["performance_status"].reference == "Not documented"
    assert not early["metastatic_sites"].scorable  # sites are not dated in the truth
    before = expected_values(TRUTH, SPECS, dt.date(2012, 6, 1))
    assert before["diagnosis_date"].documented is False and before["stage"].reference == "Not documented"
    assert before["treatment_history"].reference == "None"


def test_expected_values_for_generated_lung_truths():
    from graph_fixtures import synth_root

    truths = load_oncology_truths(synth_root())
    lung = [t for t in truths.values() if t.cancer == "lung" and t.is_incident_case]
    assert lung
    for truth in lung:
        expected = expected_values(truth, SPECS)
        assert expected["diagnosis_date"].accepted_dates[0] == truth.clinical_diagnosis_date
        assert expected["stage"].reference.startswith(truth.stage.system)
        assert expected["metastatic_sites"].items is not None
        assert all(e.scorable or e.reason for e in expected.values())


def test_load_oncology_truths_names_file_line_and_field(tmp_path):
    (tmp_path / "ground_truth").mkdir()
    path = tmp_path / "ground_truth" / "oncology.jsonl"
    bad = json.loads(EXAMPLE_TRUTH)
    bad["stage"]["group"] = None
    path.write_text(EXAMPLE_TRUTH.replace("\n", "") + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(EvaluationError, match=r"oncology.jsonl:2: field 'stage.group'"):
        load_oncology_truths(tmp_path)
    path.write_text(EXAMPLE_TRUTH.replace("\n", "") + "\n")
    assert list(load_oncology_truths(tmp_path)) == [2]
    with pytest.raises(EvaluationError, match=r"no oncology record for subject\(s\) \[5\]"):
        load_oncology_truths(tmp_path, [2, 5])


# ------------------------------------------------------------------------------------------------ judge + evaluate
def reference_of(request) -> tuple[str, str]:
    body = request.messages[1].content
    fields = dict(line.split(": ", 1) for line in body.splitlines())
    return fields["Reference answer"], fields["Candidate answer"]


def fair_judge(request):
    """A scripted judge: 9 when the candidate repeats the reference, else 2."""
    reference, candidate = reference_of(request)
    return JudgeScore(score=9 if candidate == reference else 2, rationale="compared")


def judge_gateway(script, model: str = "judge-model") -> LLMGateway:
    return open_gateway(LLMConfig(model=model, max_retries=0, max_reasks=0), backend=ScriptedBackend(script))


def display(subject_id: int, method: str, answers: dict[str, str], failed: set[str] = frozenset(),
            model: str = "writer-model") -> TumorBoardDisplay:
    values = []
    for spec in SPECS:
        if spec.key in failed:
            values.append(VariableValue(key=spec.key, value="Not available", origin="failed", error="timeout: slow"))
        else:
            values.append(VariableValue(key=spec.key, value=answers.get(spec.key, "Not documented"), origin="llm",
                                        source_refs=("e1",)))
    return TumorBoardDisplay(subject_id=subject_id, method=method, model=model, content_hash="h", values=tuple(values),
                             calls=5, prompt_tokens=100, completion_tokens=20)


def right_answers(truth: OncologyRecord) -> dict[str, str]:
    expected = expected_values(truth, SPECS)
    return {k: e.reference for k, e in expected.items() if e.scorable}


def test_evaluate_scores_counts_failures_and_names_the_models():
    truths = {sid: truth_for(sid) for sid in (1, 2, 3)}
    good = right_answers(truths[1])
    wrong = dict(good, diagnosis_date="2011-01-01", metastatic_sites="brain", stage="Stage IIB")
    displays = [display(1, "vista", good), display(2, "vista", good), display(3, "vista", good, failed={"histology"}),
                display(1, "rag", wrong, model="writer-model"), display(2, "rag", wrong), display(3, "rag", good)]
    backend_calls = []

    def script(request):
        backend_calls.append(request)
        reference, candidate = reference_of(request)
        if "Line 1" in reference and candidate != reference:
            return BackendError(ErrorKind.SERVER_ERROR, "judge down", status=500)
        return fair_judge(request)

    report = run(evaluate(displays, truths, judge_gateway(script), n_resamples=500))
    vista, rag = report.method("vista"), report.method("rag")
    assert vista.display_models == ("writer-model",) and report.judge_model == "judge-model"
    assert vista.n_patients == rag.n_patients == 3
    histology = report.variable("vista", "histology")
    assert (histology.display_failures, histology.n_evaluated, histology.n_correct) == (1, 3, 2)
    assert report.variable("vista", "diagnosis_date").accuracy.value == 1.0
    assert report.variable("rag", "diagnosis_date").accuracy.value == pytest.approx(1 / 3)
    assert report.variable("rag", "metastatic_sites").n_correct == 1
    stage = report.variable("rag", "stage")
    assert stage.n_correct == 1 and stage.mean_score.value == pytest.approx((2 + 2 + 9) / 3)
    code = report.variable("vista", "code_status")
    assert code.unscorable == 3 and code.unscorable_reasons and not code.scored
    assert report.variable("vista", "demographics").unscorable == 3
    # scored variables: 15 minus demographics (no demographics given) → 14 evaluated per patient
    assert vista.n_evaluated == 3 * 14 and vista.n_correct == 3 * 14 - 1 and vista.display_failures == 1
    assert vista.accuracy.value == pytest.approx(41 / 42)
    assert rag.n_correct == 3 * 14 - 2 * 3 and rag.judge_failures == 0
    assert report.difference_methods == ("vista", "rag")
    assert report.difference.value == pytest.approx(41 / 42 - 36 / 42)
    assert len(backend_calls) == report.judge_calls  # identical questions were asked once
    items = [i for i in report.items if i.scorer == "judge"]
    assert items and all(i.rationale == "compared" for i in items)

    markdown = report.to_markdown()
    assert "VISTA displays written by: writer-model (3 patients; 15 calls, 300 prompt + 60 completion" in markdown and "Judge: judge-model" in markdown
    assert "| Date of diagnosis [date] | 100% [100, 100]" in markdown
    assert "(not scored)" in markdown and "1 display failed" in markdown
    console = Console(file=io.StringIO(), width=250)
    console.print(report.to_table())
    text = console.file.getvalue()
    assert "RAG accuracy" in text and "writer-model" in text and "OVERALL" in text


def test_judge_failures_are_counted_not_dropped_and_invalid_answers_fail():
    truths = {1: truth_for(1), 2: truth_for(2)}
    answers = right_answers(truths[1])
    displays = [display(1, "vista", answers), display(2, "vista", dict(answers, histology="squamous"))]

    def script(request):
        reference, candidate = reference_of(request)
        if candidate == "squamous":
            return '{"score": 14, "rationale": "out of range"}'  # invalid: fails validation, no re-ask allowed
        if reference.startswith("AJCC"):
            return BackendError(ErrorKind.TIMEOUT, "no answer")
        return fair_judge(request)

    report = run(evaluate(displays, truths, judge_gateway(script), n_resamples=200))
    # the defect: a failed judge call left the denominator, so a failing judge raised the accuracy (stage: None,
    # histology 1/1); now each failure counts as a wrong answer with score 0 and is reported
    histology = report.variable("vista", "histology")
    assert (histology.judge_failures, histology.n_evaluated, histology.n_correct) == (1, 2, 1)
    assert histology.accuracy.value == pytest.approx(0.5)
    stage = report.variable("vista", "stage")
    assert stage.judge_failures == 2 and stage.n_evaluated == 2 and stage.accuracy.value == 0.0
    failed = [i for i in report.items if i.scorer == "judge_failed"]
    assert len(failed) == 3 and all(i.score == 0 and i.correct is False for i in failed)
    assert any("invalid_output" in i.rationale for i in failed) and any("timeout" in i.rationale for i in failed)
    vista = report.method("vista")
    assert vista.judge_failures == 3 and vista.n_evaluated == 2 * 14
    assert vista.n_correct == 2 * 14 - 3 and vista.accuracy.value == pytest.approx(25 / 28)
    markdown = report.to_markdown()
    assert "2 judge failed (counted wrong)" in markdown and "3 judge call(s) failed" in markdown


def test_truth_cases_carry_demographics_and_as_of():
    demo = Demographics(birth=dt.date(1950, 1, 1), sex="F", race="Asian", ethnicity="Not Hispanic or Latino")
    case = TruthCase(truth_for(4), demographics=demo, as_of=dt.date(2013, 1, 10))
    expected = expected_values(case.record, SPECS, case.as_of, demographics=demo)
    answers = {k: e.reference for k, e in expected.items() if e.scorable}
    report = run(evaluate([display(4, "rag", answers)], {4: case}, judge_gateway(fair_judge), n_resamples=100))
    demographics = report.variable("rag", "demographics")
    assert demographics.n_correct == 1 and demographics.unscorable == 0
    assert report.variable("rag", "metastatic_sites").unscorable == 1
    assert report.method("rag").accuracy.lower is None  # one patient: no interval
    assert report.difference is None


def test_evaluate_rejects_unmatched_or_duplicate_displays():
    truths = {1: truth_for(1)}
    gateway = judge_gateway(fair_judge)
    with pytest.raises(EvaluationError, match="subject 7: vista display has no ground truth"):
        run(evaluate([display(7, "vista", {})], truths, gateway))
    with pytest.raises(EvaluationError, match="subject 1: two rag displays"):
        run(evaluate([display(1, "rag", {}), display(1, "rag", {})], truths, gateway))
    partial = display(1, "rag", {}).model_copy(update={"values": display(1, "rag", {}).values[:3]})
    with pytest.raises(EvaluationError, match="has no variable 'diagnosis_date'"):
        run(evaluate([partial], truths, gateway))
    with pytest.raises(EvaluationError, match="truths\\[2\\] holds the record of subject 1"):
        run(evaluate([display(1, "rag", {})], {2: truth_for(1)}, gateway))
    with pytest.raises(EvaluationError, match="threshold"):
        run(evaluate([display(1, "rag", {})], truths, gateway, threshold=11))


# ------------------------------------------------------------------------------------------------ intervals
def test_patient_bootstrap_interval_covers_the_true_accuracy_about_95_percent_of_the_time():
    """Known case: 40 patients × 5 variables, each right with probability 0.7 → true accuracy 0.7."""
    rng = np.random.default_rng(1)
    trials, hits = 300, 0
    for trial in range(trials):
        correct = rng.binomial(5, 0.7, size=40)
        ci = patient_interval(correct, np.full(40, 5), n_resamples=400, seed=trial)
        hits += ci.lower <= 0.7 <= ci.upper
    assert 0.90 <= hits / trials <= 0.99


def test_patient_interval_is_seeded_and_validates_input():
    a = patient_interval([1, 0, 1, 1], [1, 1, 1, 1], n_resamples=300, seed=3)
    b = patient_interval([1, 0, 1, 1], [1, 1, 1, 1], n_resamples=300, seed=3)
    assert a == b and a.value == 0.75 and a.n_patients == 4
    assert patient_interval([2, 2], [2, 2]).lower == patient_interval([2, 2], [2, 2]).upper == 1.0
    with pytest.raises(ValueError, match="positive denominator"):
        patient_interval([1, 0], [1, 0])
    with pytest.raises(ValueError, match="equal-length"):
        patient_interval([1], [1, 1])


def test_paired_difference_of_identical_methods_is_zero():
    d = paired_difference([1, 0, 1], [1, 1, 1], [1, 0, 1], [1, 1, 1], n_resamples=200)
    assert (d.value, d.lower, d.upper) == (0.0, 0.0, 0.0)
    d = paired_difference([2, 2, 1], [2, 2, 2], [0, 1, 0], [2, 2, 2], n_resamples=500)
    assert d.value == pytest.approx(5 / 6 - 1 / 6) and d.lower > 0
