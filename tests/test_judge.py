"""The pairwise judge with a scripted judge model: both candidate orders, verdicts mapped back to the runs,
position bias, rubric aggregation, pairing of the two runs, failures and the CLI."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from judge_fixtures import prediction_row, write_run
from trajonco.judge import RUBRIC_KEYS, JudgeReport, compare_runs, load_run, pair_runs, read_report
from trajonco.judge.runs import RunFileError
from trajonco.judge.stats import cohen_kappa
from trajonco.prediction_files import read_predictions
from vista.shared.llm import LLMConfig
from vista.shared.llm.backend import ChatRequest
from vista.shared.testing.scripted import ScriptedBackend

PATIENTS = (1, 2, 3, 4, 5, 6)


def _runs(tmp_path):
    rows_a = [prediction_row(s, variant="one_stage", risk=8) for s in PATIENTS]
    rows_a.append(prediction_row(50, variant="one_stage"))  # only in run A
    rows_a.append(prediction_row(60, variant="one_stage"))  # failed in run B
    rows_b = [prediction_row(s, variant="two_stage", risk=3) for s in PATIENTS]
    rows_b += [prediction_row(70, variant="two_stage"), prediction_row(71, variant="two_stage"),  # only in B
               prediction_row(60, variant="two_stage", status="failed")]
    return write_run(tmp_path / "one", rows_a), write_run(tmp_path / "two", rows_b)


def _shown(request: ChatRequest) -> tuple[str, int]:
    """Which run is shown first ('one_stage' or 'two_stage') and the patient, read from the user prompt."""
    text = request.messages[-1].content
    first = text.split("<assessment_A>")[1].split("</assessment_A>")[0]
    subject = int(re.search(r"Patient (\d+) summary", first).group(1))
    return ("one_stage" if "by one_stage" in first else "two_stage"), subject


def biased_judge(request: ChatRequest) -> str:
    """A judge with known habits, by rubric:

    clinical_correctness: always prefers run A (one_stage) -> consistent;  completeness: always tie;
    clinical_reasoning: always prefers run B;  temporal_reasoning: always picks whatever is shown first (pure
    position bias);  clarity_actionability: prefers run A for even patients, tie for odd ones.
    Patient 6 in the order where two_stage comes first gets an answer that is not JSON (a failed call).
    """
    first, subject = _shown(request)
    if subject == 6 and first == "two_stage":
        return "I think A is better."
    a_label = "A" if first == "one_stage" else "B"
    b_label = "B" if a_label == "A" else "A"
    winners = {"clinical_correctness": a_label, "completeness": "tie", "clinical_reasoning": b_label,
               "temporal_reasoning": "A", "clarity_actionability": a_label if subject % 2 == 0 else "tie"}
    return json.dumps({k: {"reason": f"{k} for {subject}", "winner": w} for k, w in winners.items()})


def _compare(tmp_path, script=biased_judge, **options):
    path_a, path_b = _runs(tmp_path)
    backend = ScriptedBackend(script)
    config = LLMConfig(max_reasks=0, max_retries=0, model="judge-model")
    report = asyncio.run(compare_runs(path_a, path_b, config, backend=backend, n_resamples=400, **options))
    return report, backend


def test_pairing_counts_every_left_out_patient(tmp_path):
    path_a, path_b = _runs(tmp_path)
    paired = pair_runs(load_run(path_a), load_run(path_b))
    assert [p.a.subject_id for p in paired.pairs] == list(PATIENTS)
    p = paired.pairing
    assert (p.n_a, p.n_b, p.n_paired, p.only_in_a, p.only_in_b, p.unusable_a, p.unusable_b) == (8, 9, 6, 1, 2, 0, 1)
    assert "6 patients compared" in p.sentence() and "2 only in run B" in p.sentence()
    sampled = pair_runs(load_run(path_a), load_run(path_b), limit=4, seed=1)
    assert len(sampled.pairs) == 4 and sampled.pairing.not_sampled == 2
    assert [x.a.subject_id for x in sampled.pairs] == [x.a.subject_id for x in
                                                      pair_runs(load_run(path_a), load_run(path_b), limit=4,
                                                                seed=1).pairs]


def test_both_orders_are_asked_and_mapped_back_to_the_runs(tmp_path):
    report, backend = _compare(tmp_path)
    assert len(backend.requests) == 2 * len(PATIENTS) == report.judge_calls
    seen = {}
    for request in backend.requests:
        first, subject = _shown(request)
        seen.setdefault(subject, set()).add(first)
        assert "one_stage" not in request.messages[0].content  # the system prompt names no run
        assert "True outcome: the patient WAS diagnosed with lung cancer within 1 year" in request.messages[-1].content
    assert all(v == {"one_stage", "two_stage"} for v in seen.values())  # each patient in both orders
    j = next(x for x in report.judgements if x.subject_id == 2)
    assert [o.order for o in j.orders] == ["ab", "ba"]
    assert [o.shown["clinical_correctness"] for o in j.orders] == ["first", "second"]
    assert j.orders[0].verdicts["clinical_correctness"] == j.orders[1].verdicts["clinical_correctness"] == "a"
    assert [o.verdicts["temporal_reasoning"] for o in j.orders] == ["a", "b"]
    assert j.consensus("temporal_reasoning") == "tie" and j.consensus("clinical_reasoning") == "b"


def test_rubric_aggregation_and_position_bias(tmp_path):
    report, _ = _compare(tmp_path)
    assert report.run_a.name == "one_stage · scripted-model" and report.run_b.name == "two_stage · scripted-model"
    assert report.n_judged == 5 and report.n_failed == 1  # patient 6: one order failed -> left out, not a tie
    failed = next(j for j in report.judgements if j.subject_id == 6)
    assert failed.orders[0].ok and not failed.orders[1].ok and failed.consensus("completeness") is None
    cc, comp, reas, temp, clar = (report.rubric(k) for k in RUBRIC_KEYS)
    assert (cc.win.value, cc.tie.value, cc.loss.value, cc.score.value) == (1.0, 0.0, 0.0, 1.0)
    assert (comp.win.value, comp.tie.value, comp.score.value) == (0.0, 1.0, 0.5)
    assert (reas.loss.value, reas.score.value) == (1.0, 0.0)
    assert (temp.win.value, temp.loss.value, temp.score.value) == (0.5, 0.5, 0.5)
    # patients 1..5 judged: 2 and 4 even -> A wins in both orders; 1, 3, 5 ties
    assert (clar.win.value, clar.tie.value) == (pytest.approx(0.4), pytest.approx(0.6))
    assert clar.win.lower <= 0.4 <= clar.win.upper and clar.win.n == 5 and clar.win.lower < clar.win.upper
    assert cc.win.lower == cc.win.upper == 1.0  # no variation: a degenerate interval, not a made-up one
    # position bias: only temporal reasoning flips, every time; its decisive verdicts all go to the first shown
    assert (temp.bias.flips, temp.bias.n, temp.bias.flip_rate, temp.bias.first_share) == (5, 5, 1.0, 1.0)
    assert (cc.bias.flips, cc.bias.agreement, cc.bias.first_share) == (0, 1.0, 0.5)
    assert comp.bias.first_share is None and comp.bias.order_kappa.kappa is None  # all ties: nothing decisive
    overall = report.overall_bias
    assert (overall.n, overall.flips) == (25, 5)
    # decisive verdicts given to the first shown: cc 5/10, reas 5/10, temp 10/10, clar 2/4 (completeness: all ties)
    assert overall.first_share == pytest.approx((5 + 5 + 10 + 2) / (10 + 10 + 10 + 4))
    ab = [j.orders[0].verdicts[k] for j in report.judgements if j.ok for k in RUBRIC_KEYS]
    ba = [j.orders[1].verdicts[k] for j in report.judgements if j.ok for k in RUBRIC_KEYS]
    assert overall.order_kappa == cohen_kappa(ab, ba)
    text = "\n".join(report.lines())
    assert "flips 5/5" in text and "1 failed in the judge" in text


def test_report_round_trips_through_json_and_the_cli(tmp_path, monkeypatch, capsys):
    report, _ = _compare(tmp_path)
    path = tmp_path / "judge.json"
    path.write_text(report.model_dump_json(), encoding="utf-8")
    assert read_report(path) == report
    # the CLI: parser registered by add_parser, the judge's model replaced by the scripted double
    import argparse

    from trajonco.judge import cli as judge_cli
    from vista.shared.llm import gateway as gateway_module

    monkeypatch.setattr(gateway_module, "build_backend", lambda config: ScriptedBackend(biased_judge))
    parser = argparse.ArgumentParser()
    judge_cli.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "cli"
    args = parser.parse_args(["judge", str(tmp_path / "one"), str(tmp_path / "two" / "predictions.parquet"),
                              "--out", str(out), "--judge-llm", "max_reasks=0", "--resamples", "100",
                              "--names", "chain", "filtered"])
    assert args.handler(args) == 0
    written = JudgeReport.model_validate_json((out / "judge.json").read_text())
    assert (written.run_a.name, written.run_b.name, written.n_judged) == ("chain", "filtered", 5)
    assert "Temporal reasoning" in capsys.readouterr().out
    assert any((out / "llm_cache").iterdir())  # answers cached: a rerun asks only the call that failed again
    rerun = ScriptedBackend(biased_judge)
    monkeypatch.setattr(gateway_module, "build_backend", lambda config: rerun)
    assert args.handler(args) == 0
    assert [_shown(r) for r in rerun.requests] == [("two_stage", 6)]
    assert JudgeReport.model_validate_json((out / "judge.json").read_text()).rubrics == written.rubrics


def test_bad_runs_fail_with_one_clear_message(tmp_path):
    from vista.shared.errors import CommandLineError
    from trajonco.judge import cli as judge_cli
    import argparse

    folder = write_run(tmp_path / "x", [prediction_row(1, variant="one_stage")])
    other = write_run(tmp_path / "y", [prediction_row(1, variant="two_stage", label=False)])
    with pytest.raises(RunFileError, match="subject 1: field boolean_value differs"):
        pair_runs(load_run(folder), load_run(other))
    longer = write_run(tmp_path / "z", [prediction_row(1, variant="two_stage")], horizon_days=730)
    with pytest.raises(RunFileError, match="different horizons"):
        pair_runs(load_run(folder), load_run(longer))
    import polars as pl

    pl.from_arrow(read_predictions(folder)).drop("summary").write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(RunFileError, match=r"bad.parquet: missing column\(s\) summary"):
        load_run(tmp_path / "bad.parquet")
    alone = tmp_path / "alone"  # the MEDS-DEV file without its details
    alone.mkdir()
    (alone / "predictions.parquet").write_bytes((folder / "predictions.parquet").read_bytes())
    with pytest.raises(RunFileError, match=r"missing column\(s\) cancer, status.*prediction_details.parquet beside it"):
        load_run(alone)
    parser = argparse.ArgumentParser()
    judge_cli.add_parser(parser.add_subparsers(dest="command"))
    disjoint = write_run(tmp_path / "w", [prediction_row(2, variant="two_stage")])
    args = parser.parse_args(["judge", str(folder), str(disjoint), "--out", str(tmp_path / "o")])
    with pytest.raises(CommandLineError, match=r"no patient to compare: 0 patients compared .*1 only in run A"):
        args.handler(args)
    args = parser.parse_args(["judge", str(tmp_path / "nowhere"), str(folder), "--out", str(tmp_path / "o")])
    with pytest.raises(CommandLineError, match="nowhere: no predictions.parquet"):
        args.handler(args)


def test_report_section_shows_rates_bias_and_the_figure(tmp_path):
    from benchmarks.report.html import render_html
    from benchmarks.report.judge_section import judge_section

    report, _ = _compare(tmp_path)
    section = judge_section(report, tmp_path / "figures")
    assert section.id == "pairwise-judge" and (tmp_path / "figures" / "fig-judge.png").read_bytes()[:4] == b"\x89PNG"
    table = section.tables[0]
    assert [row[0] for row in table.rows][:5] == [r.title for r in report.rubrics]
    temporal = next(row for row in table.rows if row[0] == "Temporal reasoning")
    assert temporal[1] == "5" and temporal[6] == "5/5" and temporal[7] == "100%"
    assert temporal[2] == "0.50 (too few for a CI)"  # 5 patients: the interval stays in judge.json only
    assert "1 patient(s) left out because a judge call failed" in section.paragraphs[0]
    assert "n = 5" in section.figures[0].caption
    assert [f.id for f in section.figures] == ["fig-judge", "fig-judge-length"]
    from benchmarks.report.judge_section import length_points

    assert sorted(length_points(report, "temporal_reasoning")) == [(1000 + s, 0.5) for s in range(1, 6)]
    colored = judge_section(report, tmp_path / "c", colors={report.run_a.name: "#d62728"})  # the report's palette
    assert colored.figures[0].png != section.figures[0].png
    empty = judge_section(None, tmp_path / "none")
    assert not empty.tables and "trajonco judge RUN_A RUN_B" in empty.paragraphs[0]
    assert 'id="fig-judge"' in render_html("t", [section])
