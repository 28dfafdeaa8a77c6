"""The streaming predict job on the session's 2-CPU local head: two-stage with default settings, rows written while
the slowest patient of their block still runs, the retry policy across runs, reruns with a smaller --limit, and
the stall watchdog. The LLM is the synthetic endpoint of `vista.shared.testing.synthetic_server` on 127.0.0.1 (subclassed here to
fail or slow down the requests about chosen patients)."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from rich.console import Console

from vista.shared.runs.parts import latest_states, part_files
from vista.shared.meds.task_key import TaskKey
from trajonco.prediction_files import read_predictions
from vista.shared.testing.synthetic_server import SyntheticLLMServer, prompt_text

pytestmark = pytest.mark.ray

N_PATIENTS = 8


class ScriptedFaultsServer(SyntheticLLMServer):
    """The synthetic endpoint, plus: HTTP 500 for prompts containing a ``transient`` marker (while ``failing``), and a
    delay of ``slow_s`` per request for prompts containing a ``slow`` marker. Counts requests per marker."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transient: list[str] = []
        self.slow: list[str] = []
        self.slow_s = 0.0
        self.failing = True
        self.seen: dict[str, int] = {}

    async def _chat(self, request: web.Request) -> web.Response:
        prompt = prompt_text(await request.json())
        for marker in (*self.transient, *self.slow, *self.fail_markers):
            if marker in prompt:
                self.seen[marker] = self.seen.get(marker, 0) + 1
        if self.failing and any(marker in prompt for marker in self.transient):
            return web.json_response({"error": {"message": "overloaded", "type": "server_error"}}, status=500)
        if any(marker in prompt for marker in self.slow):
            await asyncio.sleep(self.slow_s)
        return await super()._chat(request)


def marker(subject: int) -> str:
    return f'<patient id="{subject}" '


@pytest.fixture(scope="module")
def cohort(lung_cohort_1500, tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("stream_cohort")
    labels = lung_cohort_1500.first_train_labels(N_PATIENTS)
    pq.write_table(labels.to_arrow(), root / "labels.parquet")
    return {"dataset": lung_cohort_1500.dataset, "labels": root / "labels.parquet", "subjects": labels["subject_id"].to_list()}


@pytest.fixture()
def server():
    with ScriptedFaultsServer() as running:
        yield running


def args(cohort, server, out: Path, *extra: str) -> list[str]:
    return ["--labels", str(cohort["labels"]), "--dataset", str(cohort["dataset"]), "--out", str(out),
            "--backend", "openai", "--base-url", server.base_url, "--model", "synthetic", "--context-tokens", "32768",
            "--progress-every", "0", *extra]


def run(argv: list[str]):
    """The job in this process (a driver of the session's head); returns its summary and what it printed."""
    from jobs import predict

    text = io.StringIO()
    summary = predict.run(predict.build_parser().parse_args(argv), Console(file=text, width=400))
    return summary, text.getvalue()


def test_two_stage_with_default_settings_completes_on_two_cpus(cohort, server, ray_session, tmp_path):
    import ray

    assert ray.cluster_resources()["CPU"] == 2
    summary, printed = run(args(cohort, server, tmp_path / "out", "--variant", "two_stage", "--chunk-tokens", "1500"))
    assert summary.complete and summary.by_status == {"ok": N_PATIENTS} and summary.llm_calls > 2 * N_PATIENTS
    assert "preprocessor actor(s)" in printed and "longest first" in printed
    assert 0 < summary.startup_s <= summary.first_row_s <= summary.wall_s


@pytest.mark.timeout(600)  # the bug it guards against was a hang
def test_two_stage_whose_preprocessors_hold_most_cpus_still_starts(cohort, server, ray_session, tmp_path):
    """The work dataset is made before the preprocessor pool starts: `ray.data.from_arrow` runs a 1-CPU metadata
    task per block, which waited forever behind preprocessors holding 1.2 of the head's 2 CPUs."""
    summary, _ = run(args(cohort, server, tmp_path / "out", "--variant", "two_stage", "--chunk-tokens", "1500",
                          "--preprocess-actors", "2", "--preprocess-cpus", "0.6", "--actors", "1", "--limit", "2",
                          "--stall-timeout", "120", "--startup-timeout", "120"))
    assert summary.complete and summary.by_status == {"ok": 2}


def test_rows_are_written_while_the_slowest_patient_of_their_block_still_runs(cohort, server, ray_session, tmp_path):
    slow = cohort["subjects"][0]
    server.slow, server.slow_s = [marker(slow)], 1.5
    out = tmp_path / "out"
    summary, _ = run(args(cohort, server, out, "--limit", "4", "--order", "key", "--actors", "1", "--max-concurrency", "2",
                          "--patients-per-actor", "2", "--batch-size", "4", "--flush-rows", "1"))
    assert summary.complete and summary.by_status == {"ok": 4}
    files = part_files(out)
    rows = pl.concat([pl.read_parquet(f).with_columns(pl.lit(f.stat().st_mtime_ns).alias("written_ns")) for f in files])
    assert len(files) == 4 and rows.height == 4  # one block of four patients, each row its own part file
    slowest = rows.filter(pl.col("subject_id") == slow).row(0, named=True)
    others = rows.filter(pl.col("subject_id") != slow)
    assert (others["finished_at"] < slowest["finished_at"]).all()
    finished_ns = int(slowest["finished_at"].timestamp() * 1e9)
    assert (others["written_ns"] < finished_ns).all()  # on disk before the slowest of their block had finished
    # two slots: the fourth patient of the block started when the second finished, while the slowest still ran
    assert (others["started_at"] < slowest["finished_at"]).all()


def test_transient_failures_are_retried_on_the_next_run_and_permanent_ones_kept(cohort, ray_session, tmp_path):
    flaky, broken = cohort["subjects"][1], cohort["subjects"][3]
    with ScriptedFaultsServer(fail_markers=[marker(broken)]) as server:
        server.transient = [marker(flaky)]
        out = tmp_path / "out"
        argv = args(cohort, server, out, "--limit", "6", "--llm", "max_retries=0")
        first, _ = run(argv)
        states = latest_states(out)
        assert states[TaskKey(flaky, first_time(cohort, flaky))].retry_class == "transient"
        assert states[TaskKey(broken, first_time(cohort, broken))].retry_class == "permanent"
        assert first.complete and first.by_status.get("ok") == 4

        server.failing = False  # the storm has passed
        asked_broken = server.seen[marker(broken)]
        second, printed = run(argv)
        assert (second.retried, second.retried_by_class, second.kept_by_class) == (1, {"transient": 1}, {"permanent": 1})
        assert second.ran == 1 and second.by_status == {"ok": 1} and second.totals == {"failed": 1, "ok": 5}
        assert server.seen[marker(broken)] == asked_broken  # the permanent failure cost nothing
        assert "rerun with --retry all" in printed

        third, printed = run(argv)
        assert third.ran == 0 and "already have an output" in printed and "--retry all" in printed
        fourth, _ = run([*argv, "--retry", "all"])
        assert fourth.retried_by_class == {"permanent": 1} and server.seen[marker(broken)] > asked_broken
        assert fourth.totals == {"failed": 1, "ok": 5}
        frame = pl.from_arrow(read_predictions(out))
        assert frame.height == 6 and frame.filter(pl.col("subject_id") == flaky)["status"].to_list() == ["ok"]


def first_time(cohort, subject: int):
    labels = pl.read_parquet(cohort["labels"])
    return labels.filter(pl.col("subject_id") == subject)["prediction_time"][0]


def test_a_rerun_with_a_smaller_limit_keeps_every_earlier_row(cohort, server, ray_session, tmp_path):
    out = tmp_path / "out"
    first, _ = run(args(cohort, server, out, "--limit", "6"))
    assert first.complete and first.ran == 6
    smaller, printed = run(args(cohort, server, out, "--limit", "3"))
    assert (smaller.selected, smaller.skipped, smaller.ran, smaller.complete) == (3, 3, 0, True)
    assert "all 3 selected tasks already have an output" in printed
    frame = pl.from_arrow(read_predictions(out))
    assert frame["subject_id"].to_list() == sorted(cohort["subjects"][:6]) and smaller.consolidated_rows == 6
    larger, _ = run(args(cohort, server, out, "--limit", "8"))
    assert (larger.skipped, larger.ran) == (6, 2) and pl.read_parquet(out / "prediction_details.parquet").height == 8


def test_a_job_whose_endpoint_never_answers_stops_with_one_line(cohort, ray_session, tmp_path):
    with ScriptedFaultsServer() as server:  # answers /v1/models, holds every chat request longer than the test waits
        server.slow, server.slow_s = ["<patient id="], 20.0
        argv = args(cohort, server, tmp_path / "out", "--limit", "2", "--llm-timeout", "600", "--stall-timeout", "5",
                    "--address", ray_session.gcs_address)
        done = subprocess.run([sys.executable, "-m", "jobs.predict", *argv], env=ray_session.env(), capture_output=True,
                              text=True, timeout=300, cwd=Path(__file__).parents[1])
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "no task has finished" in errors[0] and server.base_url in errors[0]
    assert "Traceback" not in done.stderr
    summary = tmp_path / "out" / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["ran"] == 0
