"""Fail fast: a predict job against a wrong base URL, a wrong model name or an endpoint that refuses every call stops
within a minute, with a non-zero exit and one clear line, instead of paying for every patient."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from vista.shared.testing.synthetic_server import SyntheticLLMServer

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """A small synthetic MEDS dataset and a label file of 12 of its subjects."""
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("failfast")
    dataset = root / "meds"
    generate(SynthConfig(n_subjects=40, seed=11, workers=1), dataset, progress=False)
    events = pl.read_parquet(dataset / "data" / "**" / "*.parquet").drop_nulls("time")
    last = events.group_by("subject_id").agg(pl.col("time").max().alias("prediction_time")).sort("subject_id").head(12)
    labels = last.with_columns(pl.lit(False).alias("boolean_value"))
    labels.write_parquet(root / "labels.parquet")
    return {"dataset": dataset, "labels": root / "labels.parquet", "root": root}


def predict(tiny, out: Path, *extra: str, env: dict[str, str] | None = None, timeout_s: float = 60.0):
    """``python -m jobs.predict`` as a user runs it; returns (completed process, seconds it took)."""
    command = [sys.executable, "-m", "jobs.predict", "--labels", str(tiny["labels"]), "--dataset", str(tiny["dataset"]),
               "--out", str(out), "--backend", "openai", "--progress-every", "0", *extra]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT,
                          env=env or {**os.environ, "OPENAI_API_KEY": "test-key"})
    return done, time.monotonic() - started


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


def test_a_wrong_base_url_stops_before_any_actor_with_one_line(tiny, tmp_path):
    out = tmp_path / "wrong-url"
    done, _ = predict(tiny, out, "--base-url", "http://127.0.0.1:9/v1", "--model", "synthetic")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: LLM endpoint http://127.0.0.1:9/v1: connection refused — check --base-url"
    assert not out.exists()  # nothing started, nothing written


def test_a_wrong_model_name_stops_before_any_actor_with_one_line(tiny, tmp_path):
    out = tmp_path / "wrong-model"
    with SyntheticLLMServer() as server:
        done, _ = predict(tiny, out, "--base-url", server.base_url, "--model", "gpt-nope")
        asked = len(server.stats.arrivals)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: LLM endpoint {server.base_url}: model 'gpt-nope' is not served there "
                                   "(it lists synthetic) — check --model")
    assert asked == 0 and not out.exists()


def test_an_unknown_context_window_is_one_error_naming_the_option(tiny, tmp_path):
    with SyntheticLLMServer(model="local-7b", context_window=None) as server:
        done, _ = predict(tiny, tmp_path / "no-context", "--base-url", server.base_url, "--model", "local-7b")
    assert done.returncode == 2
    assert "context window of model 'local-7b'" in done.stderr and last_line(done.stderr).endswith(
        "pass --context-tokens N")


@pytest.mark.ray
@pytest.mark.parametrize(
    ("server", "line", "most"),
    [
        ({"reject_status": 401}, "the API key was refused (HTTP 401) on 3 consecutive calls — check --api-key-env "
                                 "(the variable holding the API key)", 3 + 4),
        ({"quota_exhausted": True}, "quota exhausted (insufficient_quota: You exceeded your current quota, please check "
                                    "your plan and billing details.) — add credit or raise the quota, then rerun", 1 + 4),
    ],
    ids=["auth", "quota"],
)
def test_an_endpoint_refusing_every_call_stops_the_job_with_one_line(tiny, ray_session, tmp_path, server, line, most):
    out = tmp_path / "refused"
    with SyntheticLLMServer(**server) as endpoint:  # lists its model (the check passes), refuses every call
        done, seconds = predict(tiny, out, "--base-url", endpoint.base_url, "--model", "synthetic", "--context-tokens",
                                "32768", "--in-flight", "4", "--address", ray_session.gcs_address,
                                env=ray_session.env() | {"OPENAI_API_KEY": "test-key"}, timeout_s=240)
        refused = sum(status != 200 for _, status in endpoint.stats.arrivals)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    assert last_line(done.stderr) == f"error: LLM endpoint {endpoint.base_url}: {line}"
    assert 1 <= refused <= most  # the breaker's calls and what the budget had in flight: not one per patient
    print(f"stopped after {seconds:.1f} s with {refused} refused requests")
