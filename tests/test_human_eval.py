"""Human evaluation: Cohen's kappa (checked against scikit-learn), blinded packet export, answers import with clear
errors, and kappa between reviewers and between each reviewer and the LLM judge."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json

import pytest
from sklearn.metrics import cohen_kappa_score

from judge_fixtures import prediction_row, write_run
from meds_builders import good_dataset
from test_judge import biased_judge
from trajonco.human_eval import agreement_report, export_packets, read_answers, read_key, read_packets
from trajonco.human_eval import cli as review_cli
from trajonco.judge import EvaluationInputError, compare_runs
from trajonco.judge.stats import cohen_kappa
from vista.shared.errors import CommandLineError
from vista.shared.llm import LLMConfig
from vista.shared.testing.scripted import ScriptedBackend

SUBJECTS = (1, 2, 3, 4, 5, 6)


# ------------------------------------------------------------------------------------------------ kappa
def _from_table(table: list[list[int]], labels: list[str]) -> tuple[list[str], list[str]]:
    """Two raters' labels reproducing a confusion table (rows: rater 1, columns: rater 2)."""
    first, second = [], []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            first += [labels[i]] * count
            second += [labels[j]] * count
    return first, second


@pytest.mark.parametrize("table, labels, expected", [
    ([[20, 5], [10, 15]], ["yes", "no"], 0.4),                  # po 0.70, pe 0.50
    ([[45, 15], [25, 15]], ["yes", "no"], 0.1304),              # po 0.60, pe 0.54
    ([[9, 1, 0], [2, 7, 1], [0, 2, 8]], ["A", "B", "tie"], None),
    ([[3, 0], [0, 0]], ["correct", "inaccurate"], None),        # one label only: undefined
])
def test_cohen_kappa_matches_scikit_learn(table, labels, expected):
    first, second = _from_table(table, labels)
    ours = cohen_kappa(first, second)
    assert ours.n == sum(map(sum, table))
    if sum(table[i][i] for i in range(len(table))) == ours.n and len({*first, *second}) == 1:
        assert ours.kappa is None  # scikit-learn returns nan (with a warning) here
        return
    assert ours.kappa == pytest.approx(cohen_kappa_score(first, second))
    if expected is not None:
        assert ours.kappa == pytest.approx(expected, abs=1e-4)
    assert ours.observed == pytest.approx(sum(table[i][i] for i in range(len(table))) / ours.n)


# ------------------------------------------------------------------------------------------------ export / import
def _events(n: int) -> list[dict]:
    return [{"timestamp": "2020-01-02", "description": "Haemoglobin 11.2 g/dL",
             "sources": [{"event_id": "e3", "shard": "data/train/0.parquet", "row": 3}]},
            {"timestamp": "2020-01-06", "description": f"Progress note ({n})", "sources": []}][:n]


def _runs(tmp_path):
    dataset = good_dataset(tmp_path / "meds", ((1, 2, 3), (4, 5, 6)), n_timed=8)
    rows_a = [prediction_row(s, variant="one_stage", model="model-x", summary=f"Summary {s}: anaemia in 2020.",
                             events=_events(2), reasoning="Low haemoglobin.") for s in SUBJECTS]
    rows_b = [prediction_row(s, variant="two_stage", model="model-x", summary=f"Summary {s}: one visit.",
                             events=_events(1), reasoning="Nothing of note.") for s in SUBJECTS]
    rows_b.append(prediction_row(9, variant="two_stage", model="model-x"))  # only in run B
    return (write_run(tmp_path / "one", rows_a, dataset=dataset), write_run(tmp_path / "two", rows_b, dataset=dataset))


def _fill(template, out, reviewer, choose):
    """A reviewer's copy of the template: ``choose(row) -> answer`` ('' leaves the question blank)."""
    with template.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "reviewer": reviewer, "answer": choose(row)})
    return out


def test_export_writes_blinded_packets_and_a_separate_key(tmp_path):
    one, two = _runs(tmp_path)
    out, key_path = tmp_path / "packets", tmp_path / "secret" / "key.json"
    summary = export_packets([one, two], out, key_path, n=4, seed=3)
    assert summary.n_packets == 4 and summary.n_available == 6 and "1 only in run B" in summary.left_out
    packets, key = read_packets(out), read_key(key_path)
    assert [p.packet_id for p in packets.packets] == ["P001", "P002", "P003", "P004"]
    assert {f.name for f in out.iterdir()} == {"packets.json", "answers_template.csv", "index.html",
                                              *(f"P00{i}.html" for i in range(1, 5))}
    for file in out.iterdir():  # nothing handed to reviewers names a run, a model or a patient id
        text = file.read_text()
        assert "one_stage" not in text and "two_stage" not in text and "model-x" not in text
        assert str(one) not in text
    # the same sample and draw for the same seed; both assignments occur
    sides = [e.sides["A"].name for e in key.entries]
    assert set(sides) == {"one_stage · model-x", "two_stage · model-x"}
    export_packets([one, two], tmp_path / "again", tmp_path / "key2.json", n=4, seed=3)
    assert read_key(tmp_path / "key2.json") == key
    # the packet shows what the key says is behind A
    entry, packet = key.entries[0], packets.packets[0]
    a_summary = packet.answers[0].summary
    assert a_summary.startswith(f"Summary {entry.subject_id}:")
    assert ("anaemia" in a_summary) == (entry.sides["A"].name.startswith("one_stage"))
    # the timeline excerpt holds the cited element's timestamp; provenance is shown with each event
    assert packet.timeline_excerpt is not None and 'id="e3"' in packet.timeline_excerpt
    assert f'<patient id="{entry.subject_id}"' in packet.timeline_excerpt
    html = (out / "P001.html").read_text()
    assert "e3 (data/train/0.parquet row 3)" in html and "rubric.temporal_reasoning" in html
    questions = [q.question_id for q in packet.questions]
    assert questions.count("rubric.clinical_correctness") == 1 and "A.summary" in questions
    assert len([q for q in questions if ".event." in q]) == 3  # 2 events of one run, 1 of the other
    with pytest.raises(EvaluationInputError, match="must be outside the packet folder"):
        export_packets([one], out, out / "key.json", n=2)


def test_answers_round_trip_and_kappa_between_reviewers_and_with_the_judge(tmp_path):
    one, two = _runs(tmp_path)
    out, key_path = tmp_path / "packets", tmp_path / "key.json"
    export_packets([one, two], out, key_path, n=5, seed=0)
    packets, key = read_packets(out), read_key(key_path)
    template = out / "answers_template.csv"

    def side_of(row, run_prefix):
        entry = key.entry(row["packet_id"])
        return next(s for s, r in entry.sides.items() if r.name.startswith(run_prefix))

    def ann(row):  # prefers run one_stage on every rubric; marks events 2 inaccurate
        if row["question_id"].startswith("rubric."):
            return side_of(row, "one_stage")
        if row["question_id"].endswith(".event.2"):
            return "inaccurate"
        return "correct" if ".event." in row["question_id"] else "faithful"

    def bob(row):  # agrees with ann except on temporal reasoning (tie) and on patient P002's summaries
        if row["packet_id"] == "P005":
            return ""  # bob did not finish
        if row["question_id"] == "rubric.temporal_reasoning":
            return "tie"
        if row["packet_id"] == "P002" and row["question_id"].endswith("summary"):
            return "unfaithful"
        return ann(row)

    files = [_fill(template, tmp_path / "ann.csv", "ann", ann), _fill(template, tmp_path / "bob.csv", "bob", bob)]
    answers = read_answers(files, packets)
    assert answers.reviewers == ["ann", "bob"]
    n_p5 = len(packets.packet("P005").questions)
    assert answers.unanswered == {"bob": n_p5}
    assert len(answers.answers) == 2 * sum(len(p.questions) for p in packets.packets) - n_p5

    judge = asyncio.run(compare_runs(one, two, LLMConfig(max_reasks=0, max_retries=0), n_resamples=50,
                                     backend=ScriptedBackend(_judge_without_names)))
    report = agreement_report(answers, len(packets.packets), key=key, judge=judge)
    by_kind = {a.kind: a.kappa for a in report.between_reviewers}
    # recompute every kappa independently with scikit-learn from the CSV rows
    rows = {name: list(csv.DictReader(f.open())) for name, f in zip(("ann", "bob"), files)}
    for kind, match in (("event", ".event."), ("summary", ".summary"), ("rubric", "rubric.")):
        pairs = [(x["answer"], y["answer"]) for x, y in zip(rows["ann"], rows["bob"])
                 if match in x["question_id"] and y["answer"]]
        first, second = zip(*pairs)
        if len(set(first) | set(second)) > 1:
            assert by_kind[kind].kappa == pytest.approx(cohen_kappa_score(first, second))
        assert by_kind[kind].n == len(pairs)
    assert by_kind["event"].kappa == 1.0 and by_kind["summary"].kappa < 1.0
    ann_summary = next(r for r in report.reviewers if r.reviewer == "ann")
    n_events = sum(1 for p in packets.packets for q in p.questions if q.kind == "event")
    n_second = sum(1 for p in packets.packets for q in p.questions if q.question_id.endswith(".event.2"))
    assert ann_summary.events_correct == pytest.approx(1 - n_second / n_events)

    # reviewer vs judge: the judge's consensus per rubric (see biased_judge) is a, tie, b, tie, a/tie by parity
    judged = {(j.subject_id): j for j in judge.judgements}
    not_judged = 0
    for agreement in report.reviewer_vs_judge:
        mine, theirs = [], []
        for row in rows[agreement.rater_1]:
            if not row["question_id"].startswith("rubric.") or not row["answer"]:
                continue
            entry = key.entry(row["packet_id"])
            run = "tie" if row["answer"] == "tie" else ("a" if entry.sides[row["answer"]].name.startswith("one")
                                                         else "b")
            verdict = judged[entry.subject_id].consensus(row["question_id"].removeprefix("rubric."))
            if verdict is None:  # patient 6: one judge call failed -> counted, not compared
                not_judged += 1
                continue
            mine.append(run)
            theirs.append(verdict)
        assert agreement.kappa.n == len(mine) and agreement.rater_2 == judge.judge_model
        assert agreement.kappa.kappa == pytest.approx(cohen_kappa_score(mine, theirs))
    assert {a.rater_1 for a in report.reviewer_vs_judge} == {"ann", "bob"}
    assert report.not_judged == not_judged and (6 not in [e.subject_id for e in key.entries] or not_judged > 0)
    assert "kappa ann vs bob [event]: 1.00" in "\n".join(report.lines())


def _judge_without_names(request):
    """`biased_judge` for the runs of this module (summaries say 'anaemia' for one_stage)."""
    text = request.messages[-1].content
    first = text.split("<assessment_A>")[1].split("</assessment_A>")[0]
    subject = int(first.split("Summary: Summary ")[1].split(":")[0])
    variant = "one_stage" if "anaemia" in first else "two_stage"
    fake = type(request)(messages=(*request.messages[:-1], type(request.messages[-1])(
        role="user", content=f"<assessment_A>Patient {subject} summary by {variant}</assessment_A>")),
        model=request.model, max_tokens=request.max_tokens, timeout_s=request.timeout_s)
    return biased_judge(fake)


def _write(path, header, *rows):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_bad_answers_are_named_by_file_row_and_field(tmp_path):
    one, two = _runs(tmp_path)
    out = tmp_path / "packets"
    export_packets([one, two], out, tmp_path / "key.json", n=2, seed=0)
    packets = read_packets(out)
    header = ["packet_id", "question_id", "reviewer", "answer"]
    ok = ["P001", "A.summary", "ann", "faithful"]
    cases = [
        (["P001", "A.summary", "ann", "maybe"], r"bad.csv: row 3: field answer: 'maybe' is not one of faithful, "
                                                "unfaithful"),
        (["P009", "A.summary", "ann", "faithful"], r"row 3: field packet_id: unknown packet 'P009'"),
        (["P001", "C.summary", "ann", "faithful"], r"row 3: field question_id: packet P001 has no question"),
        (["P001", "rubric.completeness", "", "A"], r"row 3: field reviewer: an answer without a reviewer"),
        (["P001", "A.summary", "ann", "unfaithful"], r"row 3: field answer: reviewer 'ann' answered P001 A.summary "
                                                     r"twice, differently \('faithful' in .*bad.csv row 2\)"),
    ]
    for row, message in cases:
        bad = _write(tmp_path / "bad.csv", header, ok, row)
        with pytest.raises(EvaluationInputError, match=message):
            read_answers([bad], packets)
    _write(tmp_path / "nohead.csv", ["packet_id", "question_id", "answer"], ["P001", "A.summary", "faithful"])
    with pytest.raises(EvaluationInputError, match=r"nohead.csv: row 1: missing column\(s\) reviewer"):
        read_answers([tmp_path / "nohead.csv"], packets)
    # case and spaces in an answer are forgiven; a repeated identical answer is not an error
    fine = read_answers([_write(tmp_path / "fine.csv", header, ok, ["P001", "A.summary", "ann", " Faithful "])],
                        packets)
    assert [a.answer for a in fine.answers] == ["faithful"]


def test_cli_export_and_import(tmp_path, capsys):
    one, two = _runs(tmp_path)
    parser = argparse.ArgumentParser()
    review_cli.add_parser(parser.add_subparsers(dest="command"))
    out, key = tmp_path / "packets", tmp_path / "key.json"
    args = parser.parse_args(["review-export", str(one), "--out", str(out), "--key", str(key), "--n", "3",
                              "--seed", "1"])
    assert args.handler(args) == 0
    packets = read_packets(out)
    assert packets.n_runs == 1 and all(len(p.answers) == 1 for p in packets.packets)
    assert not any(q.kind == "rubric" for p in packets.packets for q in p.questions)
    first = _fill(out / "answers_template.csv", tmp_path / "r1.csv", "r1", lambda row: (
        "correct" if ".event." in row["question_id"] else "faithful"))
    second = _fill(out / "answers_template.csv", tmp_path / "r2.csv", "r2", lambda row: (
        "inaccurate" if row["question_id"].endswith(".event.2") else
        "correct" if ".event." in row["question_id"] else "faithful"))
    report_file = tmp_path / "human.json"
    args = parser.parse_args(["review-import", str(first), str(second), "--packets", str(out), "--out",
                              str(report_file)])
    assert args.handler(args) == 0
    written = json.loads(report_file.read_text())
    assert {a["kind"] for a in written["between_reviewers"]} == {"event", "summary"}
    assert "kappa r1 vs r2 [event]" in capsys.readouterr().out
    args = parser.parse_args(["review-import", str(first), "--packets", str(out), "--judge", "j.json"])
    with pytest.raises(CommandLineError, match="--judge needs --key"):
        args.handler(args)
    args = parser.parse_args(["review-export", str(one), "--out", str(tmp_path / "p2"), "--key",
                              str(tmp_path / "k2.json"), "--dataset", str(tmp_path / "nowhere")])
    with pytest.raises(CommandLineError, match="nowhere not found"):
        args.handler(args)
