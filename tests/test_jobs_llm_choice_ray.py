"""`trajonco predict` asks the endpoint its options name, and says so: the README's form (``--base-url URL --model
M``, no ``--backend``) sends every request to that server, and the rows and the summary record the backend, the
endpoint's host:port and the model the server named. (A run left to the embedded model, labelled with it in rows,
summary and report: tests/test_jobs_ray.py; the rule itself, without Ray: tests/test_llm_choice.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from vista.shared.testing.synthetic_server import SyntheticLLMServer

pytestmark = pytest.mark.ray


def rows_of(out: Path) -> pl.DataFrame:
    """Every row the job wrote (its part files hold every column, wherever the consolidated files put them)."""
    from vista.shared.runs.parts import part_files

    return pl.concat([pl.read_parquet(path) for path in part_files(out)], how="diagonal_relaxed")

N_PATIENTS = 4


@pytest.fixture(scope="module")
def cohort(lung_cohort_1500, tmp_path_factory) -> dict[str, Path]:
    """A few lung-cohort patients of the session's shared synthetic dataset (tests/conftest.py)."""
    root = tmp_path_factory.mktemp("llm_choice")
    pq.write_table(lung_cohort_1500.first_train_labels(N_PATIENTS).to_arrow(), root / "labels.parquet")
    return {"dataset": lung_cohort_1500.dataset, "labels": root / "labels.parquet", "root": root}


def test_predict_with_a_base_url_and_no_backend_asks_that_endpoint(cohort, ray_session, tmp_path, monkeypatch):
    from jobs.cli import trajonco_main

    for var in ("VISTA_LLM_BACKEND", "VISTA_LLM_BASE_URL", "VISTA_LLM_MODEL", "TRAJONCO_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "out"
    with SyntheticLLMServer(model="M", served_model="M-2026-01-15") as server:
        code = trajonco_main(["predict", "--labels", str(cohort["labels"]), "--dataset", str(cohort["dataset"]),
                              "--out", str(out), "--base-url", server.base_url, "--model", "M",
                              "--context-tokens", "32768", "--actors", "1", "--patients-per-actor", "2"])
        asked = server.stats.requests
    assert code == 0 and asked > 0  # the server answered the job's calls (0 when the embedded model ran instead)
    port = server.base_url.split(":")[2].split("/")[0]
    frame = rows_of(out)
    assert frame.height == N_PATIENTS
    assert set(frame["backend"]) == {"openai"} and set(frame["endpoint_host"]) == {f"127.0.0.1:{port}"}
    assert set(frame["model"]) == {"M"} and set(frame["served_model"]) == {"M-2026-01-15"}
    summary = (out / "summary.json").read_text()
    llm = json.loads(summary)["llm"]
    assert (llm["backend"], llm["endpoint_host"], llm["model"]) == ("openai", f"127.0.0.1:{port}", "M")
    assert llm["served_models"] == ["M-2026-01-15"] and server.base_url not in summary
