"""The benchmark's gold plans answer every generated question exactly as the MEDS rows do (truth computed with
polars over the parquet shards, independently of the graph and the query layer), and its text scorer is strict."""

from __future__ import annotations

import datetime as dt

from benchmarks.bench_query_bridge import KINDS, Question, correct_text, generate_questions, gold_outcomes
from graph_fixtures import synth_root
from test_query_bridge import store_root
from vista.query.plan import Plan


def test_gold_plans_answer_every_generated_question_as_the_meds_rows_do():
    questions = generate_questions(synth_root())
    assert {q.kind for q in questions} == set(KINDS) and len(questions) >= 20
    outcomes = gold_outcomes(store_root(), questions)
    wrong = [o.question.text for o in outcomes if not o.correct]
    assert not wrong, wrong[:5]
    dated = [q for q in questions if q.kind in ("line_start", "progression")]
    assert sum(q.agrees for q in dated) >= 0.8 * len(dated)  # the rows mostly bear the generator's own dates


def test_text_answers_are_scored_on_the_exact_date_or_value():
    q = Question("lab", 1, "lowest hgb?", Plan(measure="hgb", aggregate="min"), 9.1, dt.date(2020, 2, 5))
    assert correct_text(q, "The lowest hemoglobin was 9.1 g/dL on 2020-02-05.")
    assert not correct_text(q, "The lowest hemoglobin was 9.4 g/dL.") and not correct_text(q, "It was on 2009-01-01.")
    d = Question("line_start", 1, "when?", Plan(events=["X//1"], aggregate="first"), None, dt.date(2020, 2, 5))
    assert correct_text(d, "Line 2 started 2020-02-05.") and not correct_text(d, "Line 2 started 2020-02-06.")
