"""The cohort evaluation job (``python -m jobs.evaluate``) on the session's Ray head: stored displays scored against
generator and clinician truth by a judge endpoint distinct from the display model, every judge request within the
job's LLM budget; a patient whose display cannot be read gets an error row naming the file (exit status 3); a rerun
resumes (no new judge request). The job's parts without Ray: tests/test_jobs_evaluate.py."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from cohort_eval_fixtures import judge_argv, run_job, write_inputs
from jobs.evaluate import EVALUATED_FILE
from vista.evaluation import EvaluationReport
from vista.shared.testing.synthetic_server import SyntheticLLMServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_cohort_evaluation_on_ray_keeps_the_budget_resumes_and_counts_errors(ray_session, tmp_path):
    store, dataset = write_inputs(tmp_path, (2, 3, 4))
    (store / "display" / "4.json").write_text("{not json")
    out = tmp_path / "eval"
    with SyntheticLLMServer(model="judge-model", latency_s=0.05) as server:
        # one actor whose gateway would send 8 requests at once: the job's budget lets 2 through
        argv = judge_argv(store, dataset, out, server.base_url, "--in-flight", "2", "--max-concurrency", "8",
                          "--actors", "1")
        first = run_job(argv)
        asked = server.stats.requests
        assert (first.selected, first.skipped, first.ran) == (3, 0, 3) and asked > 0
        assert first.by_status == {"ok": 2, "error": 1} and first.exit_status() == 3
        budget = first.llm_budget  # every judge request of every actor went through the job's one budget
        assert budget is not None and budget.in_flight_limit == 2 and budget.requests == asked
        assert budget.in_flight_peak == 2 and server.stats.max_in_flight == 2 and budget.waited_s > 0
        rows = {r["subject_id"]: r for r in pq.read_table(out / EVALUATED_FILE).to_pylist()}
        assert rows[4]["status"] == "error" and "4.json" in rows[4]["error"] and "subject 4" in rows[4]["error"]
        report = EvaluationReport.model_validate_json((out / "evaluation.json").read_text())
        assert report.judge_model == "judge-model" and report.method("vista").n_patients == 2

        again = run_job(argv)  # resume: every patient has its row (the error one is permanent), no judge request
        assert (again.skipped, again.ran) == (3, 0) and server.stats.requests == asked
        assert EvaluationReport.model_validate_json((out / "evaluation.json").read_text()).items == report.items
