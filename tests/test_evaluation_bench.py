"""The evaluation benchmark runs end to end against an OpenAI-compatible endpoint (the synthetic stand-in LLM)."""

from __future__ import annotations

import json

import pytest

from benchmarks.bench_vista_eval import main
from vista.shared.testing.synthetic_server import SyntheticLLMServer

pytestmark = pytest.mark.slow


def test_benchmark_prints_both_methods_with_cis_and_names_the_llms(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BENCH_TEST_KEY", "not-a-secret")
    with SyntheticLLMServer(model="stand-in") as server:
        main(["--base-url", server.base_url, "--model", "stand-in", "--api-key-env", "BENCH_TEST_KEY",
              "--patients", "2", "--subjects", "30", "--resamples", "200", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "display LLM: stand-in" in out and "judge LLM: stand-in" in out
    assert "VISTA displays written by: stand-in (2 patients; " in out and "RAG displays written by: stand-in" in out
    assert "query ms" in out and "large (" in out and "OVERALL" in out and "Accuracy difference vista - rag" in out
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert [m["method"] for m in report["methods"]] == ["vista", "rag"]
    assert all(m["accuracy"]["lower"] is not None for m in report["methods"])
    displays = [json.loads(line) for line in (tmp_path / "displays.jsonl").read_text().splitlines()]
    assert sorted(d["method"] for d in displays) == ["rag", "rag", "vista", "vista"]
    assert "| Date of diagnosis [date] |" in (tmp_path / "evaluation.md").read_text()
