"""Cohort questions: the plan's row per patient equals the single-patient answer; a question is planned once and its
plan read back on a resumed run; the Ray job (``vista query-cohort``) resumes after its driver is killed, re-running
only the patients without a row."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from test_query_bridge import HGB, store_root
from vista.query.cohort import cohort_plan, cohort_rows
from vista.query.entry import open_entry
from vista.query.errors import PlanError
from vista.query.execute import run_plan
from vista.query.plan import Plan
from vista.query.state import open_graph_store
from vista.shared.runs.parts import latest_states

PLAN = Plan(measure="hemoglobin", where={"op": "<", "value": 12}, aggregate="min")


def test_rows_equal_the_single_patient_answers_and_absent_labs_are_unmatched():
    ids = open_graph_store(store_root()).subject_ids()[:12]
    rows = cohort_rows(store_root(), PLAN, ids)
    assert [r.subject_id for r in rows] == ids and all(r.status == "ok" for r in rows)
    for row in rows:
        entry = open_entry(store_root(), row.subject_id)
        if HGB not in entry.vocabulary:
            assert not row.matched and "no measurement" in row.error
            continue
        result = run_plan(entry, PLAN)
        assert row.matched == (result.n > 0) and json.loads(row.cited) == list(result.cited)
        assert row.value == result.value


def test_a_question_is_planned_once_and_read_back(tmp_path):
    asked = []

    async def planner(question: str) -> Plan:
        asked.append(question)
        return PLAN

    assert cohort_plan(tmp_path, None, "lowest hgb below 12", planner) == PLAN
    assert cohort_plan(tmp_path, None, "lowest hgb below 12", planner) == PLAN
    assert asked == ["lowest hgb below 12"]
    with pytest.raises(PlanError, match="another plan"):
        cohort_plan(tmp_path, Plan(measure="wbc"), None, None)


@pytest.mark.ray
@pytest.mark.slow
def test_job_killed_mid_run_resumes_without_redoing_answered_patients(ray_session, tmp_path):
    out = tmp_path / "cohort"
    argv = ["--store", str(store_root()), "--out", str(out), "--plan", PLAN.compact(), "--address",
            ray_session.gcs_address, "--actors", "1", "--batch-size", "1", "--flush-rows", "1",
            "--patients-per-actor", "1"]
    command = [sys.executable, "-m", "jobs.query_cohort", *argv]
    root = Path(__file__).parents[1]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ray_session.env(),
                               cwd=root)
    deadline = time.monotonic() + 300
    while len(latest_states(out)) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    time.sleep(3)  # the job's actors die with their driver
    done_at_kill = latest_states(out)
    assert len(done_at_kill) >= 2, "no row was written before the kill"
    first_rows = {k.subject_id: s.run_id for k, s in done_at_kill.items()}
    resumed = subprocess.run(command, env=ray_session.env(), cwd=root, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    n = len(open_graph_store(store_root()).subject_ids())
    assert summary["skipped"] == len(done_at_kill) and summary["ran"] == n - len(done_at_kill)
    answers = pl.read_parquet(out / "answers.parquet")
    assert answers.height == n and answers["subject_id"].n_unique() == n
    kept = answers.filter(pl.col("subject_id").is_in(list(first_rows)))
    assert all(first_rows[s] == r for s, r in zip(kept["subject_id"], kept["run_id"]))  # answered once, not again
