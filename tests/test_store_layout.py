"""One store layout: a ``jobs.build_graphs`` output directory opens in ``vista ask/source/display/evaluate``.

Before, the job wrote ``vista/<bucket>/<task>/graph.graphml`` (+ per-task ``toa/``, ``display/``) and one
``index.parquet``, while the commands opened ``manifest.parquet`` + ``patients/<sid>.graphml`` + ``toa/<sid>.json``:
``vista ask --store OUT`` said "is not a graph store". Now the output directory is a `vista.graph.GraphStore`.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from graph_fixtures import synth_root
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.cli import main as vista_main
from vista.graph import GraphStore

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_job_output_directory_opens_in_the_vista_commands(ray_session, tmp_path, capsys):
    from jobs import build_graphs

    out = tmp_path / "job"
    with SyntheticLLMServer() as server:
        llm = ["--llm", "backend=openai", "--llm", f"base_url={server.base_url}", "--llm", "model=synthetic"]
        argv = ["--dataset", str(synth_root()), "--out", str(out), "--limit", "2", "--backend", "openai",
                "--base-url", server.base_url, "--model", "synthetic", "--actors", "1", "--patients-per-actor", "2",
                "--progress-every", "0"]
        summary = build_graphs.run(build_graphs.build_parser().parse_args(argv))
        assert summary.complete and summary.by_status == {"ok": 2}
        capsys.readouterr()
        subject = 1  # a lung case with a diagnosis in the generator's ground truth

        store = GraphStore(out)
        assert store.subject_ids() == [1, 2]
        assert store.load(subject) == store.load_graphml(subject)  # columnar copy == GraphML
        rows = pl.read_parquet(out / "patients.parquet")
        assert store.scan_index().select(pl.len()).collect().item() == rows["n_nodes"].sum()

        asked = server.stats.requests
        code = vista_main(["ask", "--store", str(out), "--subject", str(subject), "When was the cancer diagnosed?",
                           "--json", *llm])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        answer = json.loads(printed.out)
        assert answer["subject_id"] == subject and answer["usage"]["calls"] == 1  # the job's timeline, read back
        assert server.stats.requests == asked + 1
        job_timeline = json.loads((out / rows.filter(pl.col("subject_id") == subject)["toa_file"].item()).read_text())
        assert answer["timeline_hash"] == job_timeline["content_hash"]

        code = vista_main(["source", "--store", str(out), "--subject", str(subject), "t0", "--json"])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        sources = json.loads(printed.out)
        assert sources and all(store.load(subject).has_event(s["event_id"]) for s in sources)

        code = vista_main(["display", "--store", str(out), "--subject", str(subject), "--json", *llm])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert json.loads(printed.out)["subject_id"] == subject

        code = vista_main(["evaluate", "--store", str(out), "--truth", str(synth_root()), "--subjects", str(subject),
                           "--resamples", "50", "--json", *llm])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert {m["method"] for m in json.loads(printed.out)["methods"]} == {"vista", "rag"}
