"""The Ray jobs end to end on the session's local head: predict (killed and resumed, an actor killed, two-stage with
its preprocessor pool, the embedded model), build-graphs through `ray job submit`. (Streaming, retries, the default
two-stage plan and reruns with a smaller selection: tests/test_jobs_stream.py.)

The LLM is the synthetic OpenAI-compatible endpoint of `vista.shared.testing.synthetic_server` on 127.0.0.1 (schema-valid answers that
depend only on the request), so every run's outputs are comparable and the endpoint counts what was asked.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from vista.shared.runs.parts import ROWS, latest_states, part_files
from trajonco.prediction_rows import RUN_DEPENDENT_COLUMNS
from trajonco.prediction_files import read_predictions
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.shared.llm.cache import ResponseCache

pytestmark = pytest.mark.ray

N_PATIENTS = 40
MISSING_SUBJECT = 10_000_000  # in the labels, not in the dataset: a bad-data error row


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cohort(lung_cohort_1500, tmp_path_factory) -> dict[str, Path | int]:
    """The session's synthetic MEDS dataset and a label file of 40 of its lung patients plus one unknown subject."""
    root = tmp_path_factory.mktemp("jobs_cohort")
    dataset = lung_cohort_1500.dataset
    labels = lung_cohort_1500.first_train_labels(N_PATIENTS)
    failing = int(labels["subject_id"][7])
    extra = labels.head(1).with_columns(pl.lit(MISSING_SUBJECT, pl.Int64).alias("subject_id"))
    pq.write_table(pl.concat([labels, extra]).to_arrow(), root / "labels.parquet")
    return {"dataset": dataset, "labels": root / "labels.parquet", "failing": failing, "root": root}


@pytest.fixture(scope="module")
def llm(cohort, tmp_path_factory):
    """The synthetic endpoint; every prompt about the failing subject is rejected (HTTP 400)."""
    log = tmp_path_factory.mktemp("llm") / "requests.log"
    with SyntheticLLMServer(fail_markers=[f'<patient id="{cohort["failing"]}" '], request_log=log) as server:
        yield server


def predict_args(cohort, llm, out: Path, *extra: str) -> list[str]:
    return [
        "--labels", str(cohort["labels"]), "--dataset", str(cohort["dataset"]), "--out", str(out),
        "--backend", "openai", "--base-url", llm.base_url, "--model", "synthetic", "--context-tokens", "32768",
        "--actors", "2", "--patients-per-actor", "2", "--progress-every", "1", *extra,
    ]


def run_in_process(module, argv: list[str]):
    """A job's `run` in this process (already a driver of the session's head)."""
    return module.run(module.build_parser().parse_args(argv))


def job_command(module: str, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", module, *argv]


def digests(server: SyntheticLLMServer) -> Counter[str]:
    with server._lock:
        return Counter(server.stats.digests)


def content_columns(path: Path) -> pl.DataFrame:
    frame = pl.from_arrow(read_predictions(path))
    return frame.drop(list(RUN_DEPENDENT_COLUMNS)).sort("subject_id", "prediction_time")


def cache_entries(out: Path) -> int:
    return len(ResponseCache(out / "llm_cache"))


def finished_in_log(log: Path) -> int:
    """Tasks the job's last progress line counts as finished."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("[predict] ") and "/" in line]
    counts = [int(line.split()[1].split("/")[0]) for line in lines if line.split()[1].split("/")[0].isdigit()]
    return counts[-1] if counts else 0


def wait_for_markers(out: Path, at_least: int, process: subprocess.Popen, timeout_s: float = 300,
                     log: Path | None = None) -> int:
    """Wait until ``at_least`` tasks have a row on disk (or, with ``log``, are counted finished by the driver)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = finished_in_log(log) if log is not None else len(latest_states(out))
        if found >= at_least:
            return found
        if process.poll() is not None:
            pytest.fail(f"the job ended before it could be interrupted (exit {process.returncode})")
        time.sleep(0.05)
    pytest.fail(f"fewer than {at_least} outputs after {timeout_s} s")


@pytest.fixture(scope="module")
def reference(cohort, llm, ray_session, tmp_path_factory):
    """An uninterrupted predict run (fresh cache) and the requests it made."""
    from jobs import predict

    out = tmp_path_factory.mktemp("reference") / "out"
    before, tokens_before = digests(llm), (llm.stats.prompt_tokens, llm.stats.completion_tokens)
    summary = run_in_process(predict, predict_args(cohort, llm, out))
    asked = digests(llm) - before
    answered = (llm.stats.prompt_tokens - tokens_before[0], llm.stats.completion_tokens - tokens_before[1])
    return {"out": out, "summary": summary, "asked": asked, "answered": answered}


# ------------------------------------------------------------------------------------------------ predict
def test_uninterrupted_run_gives_every_patient_one_row_and_isolates_failures(cohort, reference):
    summary = reference["summary"]
    assert summary.complete and summary.selected == N_PATIENTS + 1 and summary.ran == N_PATIENTS + 1
    assert summary.by_status == {"ok": N_PATIENTS - 1, "failed": 1, "error": 1}
    assert summary.failed_by_reason == {"data": 1, "llm_call_failed": 1}
    frame = pl.from_arrow(read_predictions(reference["out"]))  # predictions.parquet + prediction_details.parquet
    assert frame.height == N_PATIENTS + 1 and frame.select("subject_id", "prediction_time").is_unique().all()
    bad = frame.filter(pl.col("subject_id") == MISSING_SUBJECT).row(0, named=True)
    assert (bad["status"], bad["error_kind"]) == ("error", "data") and "not in the dataset" in bad["error"]
    failed = frame.filter(pl.col("subject_id") == cohort["failing"]).row(0, named=True)
    assert failed["status"] == "failed" and failed["risk_score"] is None and "http_error" in failed["error"]
    assert (failed["retry_class"], failed["call_error_kinds"], bad["retry_class"]) == ("permanent", "http_error", "permanent")
    ok = frame.filter(pl.col("status") == "ok")
    assert ok["risk_score"].is_between(1, 10).all()
    assert (ok["predicted_boolean_probability"] - ok["risk_score"] / 10).abs().max() < 1e-9
    assert (ok["llm_calls"] > 0).all() and (ok["cache_hits"] == 0).all()
    events = [e for text in ok["events"] for e in json.loads(text)]
    linked = [s for e in events for s in e["sources"]]
    assert linked and all(s["shard"].startswith("data/") and s["row"] >= 0 for s in linked)
    assert sum(reference["asked"].values()) == len(reference["asked"]) == cache_entries(reference["out"])
    assert summary.llm_calls == ok["llm_calls"].sum() + failed["llm_calls"]
    # the summary's tokens are what the endpoint answered (the job's budget ledger), and a fresh output has no hits
    assert (summary.prompt_tokens, summary.completion_tokens) == reference["answered"]
    assert summary.llm_accounting.source == "ledger" and summary.llm_accounting.paid_for_rows_lost_and_rerun.tokens == 0
    assert summary.cache_hits == summary.shared_cache_hits == 0


def test_a_predict_jobs_output_is_private(reference):
    """Rows, predictions, the LLM cache, the lock, the manifest and the summary: nothing another user can read."""
    from tests.test_data_at_rest import readable_by_others

    out = reference["out"]
    assert (out / "llm_cache").is_dir() and list((out / "rows").rglob("*.parquet"))
    assert readable_by_others(out, "o") == [] and readable_by_others(out, "g") == []


def test_meds_evaluation_reads_the_jobs_predictions_file_unmodified(reference):
    """MEDS-DEV's evaluator on the file as the job wrote it: the scored tasks, its five columns, float32 scores."""
    from meds_evaluation.evaluate import evaluate_binary_classification
    from meds_evaluation.schema import PredictionSchema

    path = reference["out"] / "predictions.parquet"
    table = pq.read_table(path)
    PredictionSchema.validate(table)
    metrics = evaluate_binary_classification(pl.read_parquet(path))
    assert 0.0 <= metrics["samples_equally_weighted"]["roc_auc_score"] <= 1.0
    assert table.num_rows == N_PATIENTS - 1  # the failed and the error task have no score: in the details only
    assert reference["summary"].output_rows == {"prediction_details": N_PATIENTS + 1, "predictions": N_PATIENTS - 1,
                                                "meds_dev_predictions": N_PATIENTS - 1}  # tests/test_meds_dev.py


def test_driver_killed_mid_run_then_resumed_recomputes_nothing(cohort, llm, ray_session, reference, tmp_path):
    out = tmp_path / "killed"
    argv = predict_args(cohort, llm, out, "--address", ray_session.gcs_address, "--flush-rows", "1")
    before_kill = digests(llm)
    llm.latency_s = 0.3  # slow answers, so the run is caught halfway
    log = (tmp_path / "killed.log").open("w")
    try:
        process = subprocess.Popen(job_command("jobs.predict", argv), stdout=log, stderr=subprocess.STDOUT,
                                   env=ray_session.env(), cwd=Path(__file__).parents[1])
        wait_for_markers(out, 8, process)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        llm.latency_s = 0.0
        log.close()
    time.sleep(5)  # the job's actors die with their driver; nothing more may be written
    done_at_kill = latest_states(out)
    time.sleep(3)
    assert latest_states(out) == done_at_kill
    assert 8 <= len(done_at_kill) < N_PATIENTS + 1
    assert not (out / "predictions.parquet").exists()
    cached_at_kill = cache_entries(out)
    asked_before_kill = digests(llm) - before_kill

    resumed = subprocess.run(job_command("jobs.predict", argv), env=ray_session.env(), cwd=Path(__file__).parents[1],
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    asked_on_resume = digests(llm) - before_kill - asked_before_kill
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped"] == len(done_at_kill)
    assert summary["ran"] == N_PATIENTS + 1 - len(done_at_kill)
    assert "[predict]" in resumed.stdout and "patients/min" in resumed.stdout

    # every patient ends exactly once, with the same content as the uninterrupted run
    assert len(latest_states(out)) == N_PATIENTS + 1 and not list((out / ROWS).rglob("*.tmp"))
    assert content_columns(out / "predictions.parquet").equals(content_columns(reference["out"] / "predictions.parquet"))
    # nothing paid twice: the resumed run asked exactly the requests whose answers were not cached when the driver died
    reference_asked = set(reference["asked"])
    assert set(asked_before_kill) | set(asked_on_resume) == reference_asked
    assert len(asked_on_resume) == len(reference_asked) - cached_at_kill
    assert sum(asked_on_resume.values()) == len(asked_on_resume)
    assert len(set(asked_before_kill) & set(asked_on_resume)) == len(asked_before_kill) - cached_at_kill


def test_an_actor_killed_mid_run_is_replaced_and_its_batch_resumed(cohort, llm, ray_session, reference, tmp_path):
    from ray.util.state import list_actors

    out = tmp_path / "actor_killed"
    argv = predict_args(cohort, llm, out, "--address", ray_session.gcs_address)  # rows buffered: a kill loses some
    before = digests(llm)
    llm.latency_s = 0.3
    log = (tmp_path / "actor.log").open("w")
    try:
        process = subprocess.Popen(job_command("jobs.predict", argv), stdout=log, stderr=subprocess.STDOUT,
                                   env=ray_session.env(), cwd=Path(__file__).parents[1])
        wait_for_markers(out, 6, process, log=tmp_path / "actor.log")
        actors = [a for a in list_actors(address=ray_session.gcs_address, filters=[("state", "=", "ALIVE")], limit=1000)
                  if "PredictActor" in a.class_name]
        assert actors, "no predict actor found"
        os.kill(actors[0].pid, signal.SIGKILL)
        llm.latency_s = 0.0
        assert process.wait(timeout=600) == 0, (tmp_path / "actor.log").read_text()[-3000:]
    finally:
        llm.latency_s = 0.0
        log.close()
        if process.poll() is None:
            process.kill()
    asked = digests(llm) - before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["skipped"] == 0 and summary["ran"] == N_PATIENTS + 1
    assert content_columns(out / "predictions.parquet").equals(content_columns(reference["out"] / "predictions.parquet"))
    assert set(asked) == set(reference["asked"])
    in_flight = 2 * 2 * 4  # patients per actor x actor calls x gateway concurrency: the most a killed actor held
    assert sum(asked.values()) - len(asked) <= in_flight


def test_two_stage_sends_chunk_filters_to_the_preprocessor_pool(cohort, llm, ray_session, tmp_path):
    from jobs import predict
    from trajonco.pipeline import PipelineConfig, run_patient
    from vista.shared.llm import LLMConfig, open_gateway
    from vista.shared.meds.reader import MedsDataset

    out = tmp_path / "two_stage"
    summary = run_in_process(predict, predict_args(cohort, llm, out, "--variant", "two_stage", "--limit", "6",
                                                   "--chunk-tokens", "1500", "--actors", "1", "--preprocess-actors", "2"))
    assert summary.complete and summary.by_status == {"ok": 6}
    frame = pl.from_arrow(read_predictions(out)).sort("subject_id")
    assert (frame["n_chunks_reduced"] <= frame["n_chunks"]).all() and frame["n_chunks"].max() > 1
    dataset = MedsDataset(cohort["dataset"])
    config = PipelineConfig(variant="two_stage", chunk_tokens=1500, context_tokens=32768)
    newest = (pl.scan_parquet(part_files(out)).select("subject_id", "prediction_time", "finished_at", "usage_json",
                                                      "result_json")
              .sort("finished_at").unique(["subject_id", "prediction_time"], keep="last").collect())
    details = {(d["subject_id"], d["prediction_time"]): d for d in newest.iter_rows(named=True)}  # the part files' JSON
    for row in frame.iter_rows(named=True):
        detail = details[(row["subject_id"], row["prediction_time"])]
        saved = {"usage": json.loads(detail["usage_json"]), "result": json.loads(detail["result_json"])}
        assert saved["usage"]["remote_calls"] == row["n_chunks"] == saved["result"]["usage"]["preprocessor"]["calls"]
        record = dataset.load_patients([row["subject_id"]])[row["subject_id"]]

        async def in_process(record=record, when=row["prediction_time"]):
            gateway = open_gateway(LLMConfig(backend="openai", base_url=llm.base_url, model="synthetic"))
            return await run_patient(record, dataset.code_catalog(), gateway, config, prediction_time=when)

        local = asyncio.run(in_process())
        assert (local.risk_score, local.chunks.n_chunks_reduced) == (row["risk_score"], row["n_chunks_reduced"])
        assert json.dumps([e.model_dump(mode="json") for e in local.events]) == row["events"]


# ------------------------------------------------------------------------------------------------ build-graphs
def test_build_graphs_submitted_with_ray_job_submit(cohort, ray_session, tmp_path):
    from ray.job_submission import JobStatus, JobSubmissionClient

    from jobs import build_graphs
    from vista.shared.meds.reader import MedsDataset

    out = tmp_path / "graphs"
    entrypoint = job_command("jobs.build_graphs", [
        "--dataset", str(cohort["dataset"]), "--labels", str(cohort["labels"]), "--out", str(out), "--limit", "5",
        "--progress-every", "1",
    ])
    ray_session.wait_for_job_agent()
    submitted = subprocess.run(
        [str(Path(sys.executable).with_name("ray")), "job", "submit", "--address", ray_session.dashboard_url,
         "--submission-id", f"graphs-{os.getpid()}", "--no-wait", "--", *entrypoint],
        env=ray_session.env(), capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1],
    )
    assert submitted.returncode == 0, submitted.stderr
    client = JobSubmissionClient(ray_session.dashboard_url)
    job_id = f"graphs-{os.getpid()}"
    deadline = time.monotonic() + 300
    while client.get_job_status(job_id) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
        assert time.monotonic() < deadline, "the submitted job did not finish in time"
        time.sleep(1)
    logs = subprocess.run([str(Path(sys.executable).with_name("ray")), "job", "logs", "--address",
                           ray_session.dashboard_url, job_id], env=ray_session.env(), capture_output=True, text=True,
                          timeout=120).stdout
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED, logs[-3000:]
    assert "[build-graphs] 5/5 (ok 5)" in logs
    plan_line = next(line for line in logs.splitlines() if line.startswith("[build-graphs] run "))
    port = ray_session.gcs_address.rsplit(":", 1)[1]
    assert "on cluster " in plan_line and f":{port} " in plan_line, plan_line  # it joined the head, no Ray of its own

    from vista.graph.store import read_stored_graph

    rows = pq.read_table(out / "patients.parquet").to_pylist()
    assert [row["status"] for row in rows] == ["ok"] * 5
    assert [row["stages"] for row in rows] == ["graph"] * 5  # no model configured: graph only
    dataset = MedsDataset(cohort["dataset"])
    for row in rows:
        record = dataset.load_patients([row["subject_id"]])[row["subject_id"]]
        graph = read_stored_graph(out, row["graph_file"], graphml=True)
        assert graph.subject_id == row["subject_id"] and graph.n_nodes == row["n_nodes"]
        events = graph.events_in_order()
        assert 0 < len(events) <= row["n_events"]
        for event in events:  # provenance: every source event is the MEDS row it names, before the prediction time
            assert record.provenance(event.event_id) == event.provenance
            assert event.time < row["prediction_time"]
    from vista.graph import GraphStore

    index = GraphStore(out).scan_index(all_tasks=True).collect()  # label tasks: graphs cut at a prediction time
    assert index.height == sum(row["n_nodes"] for row in rows)

    again = run_in_process(build_graphs, ["--dataset", str(cohort["dataset"]), "--labels", str(cohort["labels"]),
                                          "--out", str(out), "--limit", "5"])
    assert (again.skipped, again.ran, again.complete) == (5, 0, True)


def test_build_graphs_over_a_whole_dataset(cohort, ray_session, tmp_path):
    from jobs import build_graphs

    out = tmp_path / "all"
    summary = run_in_process(build_graphs, ["--dataset", str(cohort["dataset"]), "--out", str(out), "--sample", "12",
                                            "--batch-size", "4"])
    assert summary.complete and summary.by_status == {"ok": 12}
    rows = pq.read_table(out / "patients.parquet")
    assert rows.num_rows == 12 and rows.column("prediction_time").null_count == 12
    from tests.test_data_at_rest import readable_by_others  # the graph store with its notes is private

    assert readable_by_others(out, "o") == [] and readable_by_others(out, "g") == []


# ------------------------------------------------------------------------------------------------ the real model
def _short_patients(cohort, n: int, max_tokens: int = 1400) -> Path:
    """A label file of ``n`` patients whose timeline fits one embedded-model chunk."""
    from vista.shared.meds.reader import MedsDataset
    from vista.shared.timeline import render_timeline

    labels = pl.read_parquet(cohort["labels"]).filter(pl.col("subject_id") != MISSING_SUBJECT)
    dataset = MedsDataset(cohort["dataset"])
    records = dataset.load_patients(labels["subject_id"].to_list())
    keep = []
    for row in labels.iter_rows(named=True):
        tokens = render_timeline(records[row["subject_id"]], dataset.code_catalog(), row["prediction_time"]).n_tokens()
        if tokens <= max_tokens and row["subject_id"] != cohort["failing"]:
            keep.append(row["subject_id"])
        if len(keep) == n:
            break
    path = cohort["root"] / f"short_{n}.parquet"
    pq.write_table(labels.filter(pl.col("subject_id").is_in(keep)).to_arrow(), path)
    return path


@pytest.mark.llm
@pytest.mark.slow
def test_embedded_model_predicts_and_resumes_from_its_cache(cohort, ray_session, tmp_path, monkeypatch):
    """A run left to the default LLM (no ``--backend``) answers with the embedded model, says so in rows, summary
    and report, and a rerun without its rows answers every call from the cache."""
    from benchmarks.report.predictions import evaluate_predictions, load_predictions
    from benchmarks.report.sections import ran_embedded
    from benchmarks.report.settings import PredictionSource
    from jobs import predict

    labels = _short_patients(cohort, 1)  # one patient whose timeline fits one chunk of the small model: a worker
    n = pq.read_metadata(labels).num_rows  # and a manager call, each asked again (from the cache) on the rerun
    assert n == 1
    for var in ("VISTA_LLM_BACKEND", "VISTA_LLM_BASE_URL", "VISTA_LLM_MODEL", "TRAJONCO_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "embedded"
    argv = ["--labels", str(labels), "--dataset", str(cohort["dataset"]), "--out", str(out),
            "--actors", "1", "--actor-cpus", "1", "--patients-per-actor", "1", "--llm", "max_tokens=256"]
    first = run_in_process(predict, argv)
    assert first.complete and first.ran == n and first.llm_calls >= 2 * n and first.cache_hits == 0
    frame = pl.from_arrow(read_predictions(out))
    assert frame["status"].to_list() == ["ok"] * n and frame["model"].to_list() == ["smollm2-135m-instruct-q4_1"] * n
    # labelled with the model that answered, in rows, summary and report (the choice itself:
    # tests/test_jobs_llm_choice_ray.py and tests/test_llm_choice.py)
    served = "SmolLM2-135M-Instruct.Q4_1"
    assert first.llm is not None and (first.llm.backend, first.llm.endpoint_host) == ("embedded", "in-process")
    assert first.llm.served_models == [served]
    rows = pl.concat([pl.read_parquet(path) for path in part_files(out)], how="diagonal_relaxed")
    assert set(zip(rows["backend"], rows["endpoint_host"], rows["served_model"])) == {("embedded", "in-process", served)}
    loaded = load_predictions(PredictionSource(path=out / "predictions.parquet", cohort="lung"))
    assert (loaded.llm_backend, loaded.served_model) == ("embedded", served)
    result, _ = evaluate_predictions(loaded, pl.read_parquet(labels), cohort="lung", gap_days=365, n_resamples=10,
                                     seed=0)
    assert ran_embedded(result)  # the report's caveat: machinery only

    for part in part_files(out):  # forget the rows, keep the LLM cache
        part.unlink()
    second = run_in_process(predict, argv)
    assert (second.skipped, second.ran) == (0, n)
    assert second.cache_hits == second.llm_calls > 0 and second.prompt_tokens == second.completion_tokens == 0
    assert content_columns(out / "predictions.parquet").equals(content_columns_from(frame))


def content_columns_from(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop(list(RUN_DEPENDENT_COLUMNS)).sort("subject_id", "prediction_time")
