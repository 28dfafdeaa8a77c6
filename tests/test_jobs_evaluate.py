"""The cohort evaluation job on the shared driver, without Ray: its actor run in this process (one judge gateway for
all its patients, rows in part files, error and failed rows), and the driver's lock, manifest and resume from those
rows (a run with nothing left to do consolidates and reports without starting Ray)."""

from __future__ import annotations

import asyncio
import json

import pyarrow.parquet as pq
import pytest

from cohort_eval_fixtures import REFERENCES, judge_argv, run_job, write_inputs
from jobs import actor_base
from vista.shared.runs.errors import JobError, JobInputError, JobSettingsMismatch
from jobs.evaluate import EVALUATED_FILE
from jobs.evaluate_actor import EvaluateActor, EvaluateSettings
from vista.shared.runs.lock import OutputLock
from vista.shared.runs.parts import latest_states
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import keys_table
from vista.evaluation import EvaluationReport
from vista.shared.llm import LLMConfig
from vista.shared.testing.synthetic_server import SyntheticLLMServer

SUBJECTS = (2, 3, 4, 5)
FAIL = "FAIL-THIS-JUDGE-CALL"


@pytest.fixture(scope="module")
def server():
    with SyntheticLLMServer(model="judge-model", fail_markers=(FAIL,)) as server:
        yield server


def actor_settings(store, dataset, out, server: SyntheticLLMServer) -> EvaluateSettings:
    judge = LLMConfig(backend="openai", base_url=server.base_url, model="judge-model", max_retries=0,
                      cache_dir=out / "llm_cache")
    return EvaluateSettings(store=store, truth=dataset, references=REFERENCES, out=out, llm=judge, run_id="r1",
                            patients_per_actor=2)


def run_actor(settings: EvaluateSettings, blocks: list[list[int]]) -> list[dict]:
    """One actor's status rows over ``blocks``, each handed to it as Ray Data would (an async generator call)."""
    async def stream() -> list[dict]:
        actor = EvaluateActor(settings)
        rows = []
        for block in blocks:
            rows += [row async for table in actor(keys_table([TaskKey(s) for s in block])) for row in table.to_pylist()]
        return rows

    return asyncio.run(stream())


@pytest.fixture
def scored(tmp_path, server, monkeypatch):
    """Every subject scored by one actor (in two blocks); returns the inputs, the gateways made and the statuses."""
    store, dataset = write_inputs(tmp_path, SUBJECTS)
    out = tmp_path / "eval"
    made = []
    real = actor_base.job_llm_gateway

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(actor_base, "job_llm_gateway", counting)
    statuses = run_actor(actor_settings(store, dataset, out, server), [[2, 3], [4, 5]])
    return store, dataset, out, len(made), statuses


def test_one_judge_gateway_serves_every_patient_of_an_actor_and_rows_land_in_part_files(scored, server):
    store, dataset, out, gateways, statuses = scored
    assert gateways == 1  # not one per patient: the embedded model would load again for each
    assert sorted(s["subject_id"] for s in statuses) == list(SUBJECTS)
    assert {s["status"] for s in statuses} == {"ok"} and all(s["llm_calls"] > 0 for s in statuses)
    states = latest_states(out)
    assert sorted(k.subject_id for k in states) == list(SUBJECTS) and {s.run_id for s in states.values()} == {"r1"}


def test_a_rerun_skips_scored_patients_consolidates_and_reports_without_asking_the_judge(scored, server, capsys):
    store, dataset, out, _, _ = scored
    asked = server.stats.requests
    summary = run_job(judge_argv(store, dataset, out, server.base_url))
    assert (summary.selected, summary.skipped, summary.ran) == (4, 4, 0) and server.stats.requests == asked
    assert summary.totals == {"ok": 4} and summary.exit_status() == 0
    assert "all 4 selected tasks already have an output" in capsys.readouterr().out
    table = pq.read_table(out / EVALUATED_FILE)
    assert table.column("subject_id").to_pylist() == list(SUBJECTS)
    report = EvaluationReport.model_validate_json((out / "evaluation.json").read_text())
    assert report.judge_model == "judge-model" and not report.judge_is_display_model
    assert report.method("vista").n_patients == 4 and report.method("vista").display_models == ("writer-model",)
    assert any(s.startswith("clinician reference answers") for s in report.truth_sources)
    assert any(s.startswith("generator ground truth") for s in report.truth_sources)
    assert report.variable("vista", "demographics").unscorable == 4  # no graphs in this store
    assert "judge-model" in (out / "evaluation.md").read_text()
    assert summary.outputs["evaluation"] == str(out.resolve() / "evaluation.json")


def test_two_runs_at_once_refuse_one_output_directory(scored, server):
    store, dataset, out, _, _ = scored
    with OutputLock(out):
        with pytest.raises(JobError, match="another run is writing"):
            run_job(judge_argv(store, dataset, out, server.base_url))


def test_other_settings_or_other_code_are_refused_in_the_same_output(scored, server):
    store, dataset, out, _, _ = scored
    argv = judge_argv(store, dataset, out, server.base_url)
    run_job(argv)  # records the settings and the code in job.json
    with pytest.raises(JobSettingsMismatch, match="threshold"):
        run_job([*argv, "--threshold", "7"])
    manifest = json.loads((out / "job.json").read_text())
    manifest["code"]["git_commit"] = "0" * 40  # as if the outputs were made by another commit
    manifest["code"]["prompts"] = {**manifest["code"]["prompts"], "vista/evaluation/prompts/judge.txt": "0" * 16}
    (out / "job.json").write_text(json.dumps(manifest))
    with pytest.raises(JobSettingsMismatch, match="other code .*prompt vista/evaluation/prompts/judge.txt changed"):
        run_job(argv)
    assert run_job([*argv, "--resume-with-changed-code"]).skipped == 4


def test_an_unreadable_display_is_an_error_row_and_failed_judge_calls_a_failed_row_retried(tmp_path, server):
    store, dataset = write_inputs(tmp_path, (2, 3, 4), judged_values={3: f"{FAIL} stage IV"})
    (store / "display" / "4.json").write_text("{not json")
    out = tmp_path / "eval"
    statuses = {s["subject_id"]: s for s in run_actor(actor_settings(store, dataset, out, server), [[2, 3, 4]])}
    assert [statuses[s]["status"] for s in (2, 3, 4)] == ["ok", "failed", "error"]
    rows = {r["subject_id"]: r for r in pq.read_table(next((out / "rows").rglob("*.parquet"))).to_pylist()}
    assert rows[3]["error_kind"] == "judge_failed" and rows[3]["retry_class"] == "transient"
    assert rows[3]["judge_failures"] >= 1 and rows[3]["result"] is not None  # scored: the failures count as wrong
    assert rows[4]["error_kind"] == "input" and rows[4]["retry_class"] == "permanent" and rows[4]["result"] is None
    assert "4.json" in rows[4]["error"] and "subject 4" in rows[4]["error"]

    # --retry none: nothing to run (no Ray); the report has the two scored patients, the exit status says 3
    summary = run_job(judge_argv(store, dataset, out, server.base_url, "--retry", "none"))
    assert summary.totals == {"ok": 1, "failed": 1, "error": 1} and summary.exit_status() == 3
    report = EvaluationReport.model_validate_json((out / "evaluation.json").read_text())
    assert report.method("vista").n_patients == 2 and report.method("vista").judge_failures >= 1


def test_outputs_of_the_marker_version_and_bad_options_are_refused_in_one_line(tmp_path, server):
    store, dataset = write_inputs(tmp_path, (2,))
    out = tmp_path / "eval"
    (out / "evaluated" / "02").mkdir(parents=True)
    with pytest.raises(JobInputError, match="markers .*evaluated/.* choose another --out"):
        run_job(judge_argv(store, dataset, out, server.base_url))
    with pytest.raises(JobInputError, match="--threshold must be within 0..10"):
        run_job(judge_argv(store, dataset, tmp_path / "other", server.base_url, "--threshold", "11"))


