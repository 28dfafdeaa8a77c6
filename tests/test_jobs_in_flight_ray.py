"""The whole LLM budget reaches the endpoint: ``--in-flight 256`` on a job's own local Ray (2 CPUs) puts 256 requests
in flight at once at a server that counts them, when the cohort has the work for it (300 patients, each with one
call in flight at a time). The endpoint holds every request until 256 are open at once (or until 100 s, within a
request's 120 s limit, have passed since the first), then answers at once: the first calls wait while two cores
start the patients, and the rest of the job costs no latency (about 30-70 s, against 324 s with a 15 s latency per
call). A job that falls short opens the gate only at its timeout and fails on its peak; one that sends more than its
budget fails on its peak too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.bench_predict_throughput import make_inputs
from vista.shared.testing.synthetic_server import SyntheticLLMServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PATIENTS = 300
BUDGET = 256


def test_a_local_job_puts_its_whole_budget_in_flight(tmp_path, own_ray_env):
    dataset, labels = make_inputs(tmp_path, 320, PATIENTS)
    command = [sys.executable, "-m", "jobs.predict", "--labels", str(labels), "--dataset", str(dataset),
               "--out", str(tmp_path / "out"), "--backend", "openai", "--model", "synthetic", "--context-tokens", "32768",
               "--chunk-tokens", "6000", "--in-flight", str(BUDGET), "--num-cpus", "2", "--startup-timeout", "300"]
    with SyntheticLLMServer(hold_until_in_flight=BUDGET, hold_timeout_s=100.0, context_window=32768) as server:
        done = subprocess.run([*command, "--base-url", server.base_url], capture_output=True, text=True,
                              env=own_ray_env, timeout=900, cwd=tmp_path)
        peak, answered = server.stats.max_in_flight, server.stats.requests
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert answered >= PATIENTS, done.stdout[-3000:]
    assert peak == BUDGET, (peak, done.stdout[-3000:])
