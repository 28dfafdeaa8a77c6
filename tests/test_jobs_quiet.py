"""A job is quiet by default: a small `trajonco predict` run on its own local Ray prints no Ray warning or error line
on stderr (no token-auth notice, no core_worker E-line, no "Progress bars disabled", no "execution finished"); with
--verbose, Ray's own lines are there."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.shared.synth import SynthConfig, generate

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY_LINE = re.compile(r"(WARNING|INFO|ERROR)\s+\S+\.py:\d+ --|^\[\d{4}-\d\d-\d\d [\d:,]+ [EWI] \d+ \d+\]|"
                      r"core_worker|Progress bars|execution finished|authentication|Started a local Ray")


@pytest.fixture(scope="module")
def small_job(tmp_path_factory):
    root = tmp_path_factory.mktemp("quiet")
    dataset = root / "ds"
    generate(SynthConfig(n_subjects=30, seed=2, workers=1), dataset, progress=False)
    subjects = sorted(pq.read_table(next((dataset / "data").rglob("*.parquet")), columns=["subject_id"])
                      .column("subject_id").unique().to_pylist())[:2]
    labels = root / "labels.parquet"
    pq.write_table(pa.table({"subject_id": pa.array(subjects, pa.int64()),
                             "prediction_time": pa.array([datetime(2030, 1, 1)] * 2, pa.timestamp("us")),
                             "boolean_value": [True, False]}), labels)
    return root, dataset, labels


def run_predict(root, dataset, labels, server, env: dict[str, str], out: str, *extra: str) -> subprocess.CompletedProcess:
    """The job in its own Ray (``env``: `conftest.own_ray_env`), as a user's first run starts one."""
    command = [sys.executable, "-c", "from jobs.cli import trajonco_main; raise SystemExit(trajonco_main())",
               "predict", "--labels", str(labels), "--dataset", str(dataset), "--out", str(root / out),
               "--backend", "openai", "--base-url", server.base_url, "--model", "synthetic", "--num-cpus", "2",
               "--startup-timeout", "300", *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=root)


def test_a_job_prints_no_ray_lines_unless_verbose(small_job, own_ray_env):
    root, dataset, labels = small_job
    with SyntheticLLMServer() as server:
        quiet = run_predict(root, dataset, labels, server, own_ray_env, "quiet")
        verbose = run_predict(root, dataset, labels, server, own_ray_env, "verbose", "--verbose")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    ray_lines = [line for line in quiet.stderr.splitlines() if RAY_LINE.search(line)]
    assert ray_lines == [], "\n".join(ray_lines)
    assert "2/2" in quiet.stdout  # the job's own progress line is there
    raylet_lines = [line for line in quiet.stdout.splitlines() if "(raylet" in line or "Raylet is terminated" in line]
    assert raylet_lines == [], "\n".join(raylet_lines)  # what Ray publishes to drivers stays in its logs
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    assert any(RAY_LINE.search(line) for line in verbose.stderr.splitlines()), verbose.stderr[-2000:]
