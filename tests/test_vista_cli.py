"""The `vista` command end to end on a small synthetic cohort with an OpenAI-compatible stand-in model on 127.0.0.1:
graph → timeline → ask (with verify) → source, the display, XML input, and user errors as one line (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graph_fixtures import synth_records, synth_root
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.cli import build_parser, main
from vista.graph import build_graph, encounter_xml

COMMANDS = ["graph", "timeline", "display", "ask", "source", "evaluate"]


def lung_subjects(n: int = 2) -> list[int]:
    cases = [json.loads(line) for line in (synth_root() / "ground_truth" / "oncology.jsonl").read_text().splitlines()]
    return [c["subject_id"] for c in cases if c["cancer"] == "lung" and c["diagnosis_date"]][:n]


@pytest.fixture(scope="module")
def server():
    with SyntheticLLMServer() as running:
        yield running


@pytest.fixture(scope="module")
def store(tmp_path_factory, server):
    """A graph store of three synthetic patients; the first has a timeline built through the stand-in model."""
    root = tmp_path_factory.mktemp("vista-cli") / "store"
    lung = lung_subjects(2)
    subjects = lung + [min(set(synth_records()[0]) - set(lung))]
    assert main(["graph", "--dataset", str(synth_root()), "--store", str(root), "--subjects", *map(str, subjects)]) == 0
    return root, subjects


def llm(server) -> list[str]:
    return ["--llm", "backend=openai", "--llm", f"base_url={server.base_url}", "--llm", "model=synthetic",
            "--llm", "cache_dir="]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_lists_every_command():
    text = build_parser().format_help()
    assert all(name in text for name in COMMANDS)
    out = subprocess.run([sys.executable, "-m", "vista.cli", "--help"], capture_output=True, text=True, check=True)
    assert "answer a question from a patient's stored timeline" in out.stdout


@pytest.mark.slow
def test_graph_timeline_ask_source_end_to_end(store, server, capsys):
    root, (subject, *_) = store
    code, out, _ = run(capsys, "timeline", "--store", str(root), "--subject", str(subject), *llm(server))
    assert code == 0 and "Episode ep0" in out and "timeline built with model synthetic" in out
    asked = server.stats.requests
    assert asked > 0
    code, out, _ = run(capsys, "timeline", "--store", str(root), "--subject", str(subject), "--json", *llm(server))
    assert code == 0 and server.stats.requests == asked  # unchanged patient: read back, no call
    timeline = json.loads(out)
    refs_of = {e["event_id"]: e["source_event_refs"] for e in timeline["events"]}

    code, out, _ = run(capsys, "ask", "--store", str(root), "--subject", str(subject),
                       "When was the lung cancer diagnosed?", "--verify", "--json", *llm(server))
    assert code == 0
    answer = json.loads(out)
    assert answer["subject_id"] == subject and answer["model"] == "synthetic"
    assert answer["timeline_hash"] == timeline["content_hash"]
    cited = [e["event_id"] for e in answer["cited"]]
    assert all(i in refs_of for i in cited) and not set(answer["dropped_citations"]) & set(cited)
    assert answer["source_refs"] == list(dict.fromkeys(r for i in cited for r in refs_of[i]))
    assert answer["verification"]["verdict"] in ("supported", "not_supported", "not_checked")
    checked = answer["verification"]["sources_checked"]
    assert set(checked) <= set(answer["source_refs"]) and set(answer["verification"]["evidence_event_ids"]) <= set(checked)
    assert answer["usage"]["calls"] == 1 + bool(checked) and answer["usage"]["prompt_tokens"] > 0
    assert server.stats.requests == asked + answer["usage"]["calls"]

    refs = answer["source_refs"] or refs_of["t0"]
    code, out, _ = run(capsys, "source", "--store", str(root), "--subject", str(subject), *refs)
    assert code == 0
    heads = [line for line in out.splitlines() if "; data/" in line]
    assert [line.split("]")[0][1:] for line in heads] == refs and all(" row " in line for line in heads)

    code, out, _ = run(capsys, "source", "--store", str(root), "--subject", str(subject), "t0", "--json")
    assert code == 0 and [s["event_id"] for s in json.loads(out)] == refs_of["t0"]

    code, out, _ = run(capsys, "ask", "--store", str(root), "--subject", str(subject), "What is the stage?", *llm(server))
    assert code == 0 and out.startswith("Q: What is the stage?\nA (") and "Model: synthetic; 1 call(s)" in out


@pytest.mark.slow
def test_display_is_built_once_then_served_from_the_store(store, server, capsys):
    root, (_, subject, *_) = store
    code, out, _ = run(capsys, "display", "--store", str(root), "--subject", str(subject), *llm(server))
    assert code == 0 and "Summary note" in out and "built with model synthetic" in out
    assert "display values: " in out and "shown as Not found (uncited)" in out  # the citation summary line
    asked = server.stats.requests
    code, out, _ = run(capsys, "display", "--store", str(root), "--subject", str(subject), *llm(server))
    assert code == 0 and "loaded from the store" in out and server.stats.requests == asked


def test_xml_directory_input(tmp_path, capsys):
    records, catalog = synth_records()
    chosen = sorted(records)[:2]
    xml_dir = tmp_path / "xml"
    xml_dir.mkdir()
    for subject in chosen:
        (xml_dir / f"patient_{subject}.xml").write_text(encounter_xml(build_graph(records[subject], catalog)))
    store = tmp_path / "store"
    code, out, _ = run(capsys, "graph", "--xml-dir", str(xml_dir), "--store", str(store), "--subjects", str(chosen[1]))
    assert code == 0 and "built 1 graph(s)" in out and "holds 1 subject(s)" in out
    code, out, _ = run(capsys, "graph", "--xml-dir", str(xml_dir), "--store", str(store))
    assert code == 0 and "built 1 graph(s)" in out and "skipped 1 unchanged" in out
    code, _, err = run(capsys, "graph", "--xml-dir", str(xml_dir), "--store", str(store), "--subjects", "424242")
    assert code == 2 and "no XML file" in err and "424242" in err


def one_line_error(capsys, *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_user_errors_are_one_line_with_exit_status_2(store, server, tmp_path, capsys):
    root, (subject, other, third) = store
    s = ["--store", str(root)]
    err = one_line_error(capsys, "ask", *s, "--subject", "987654", "Stage?", *llm(server))
    assert "no graph for subject 987654" in err and str(root) in err
    err = one_line_error(capsys, "source", *s, "--subject", str(subject), "e1", "e99999999")
    assert f"subject {subject}: no source event 'e99999999'" in err and "e1'" not in err
    assert run(capsys, "timeline", *s, "--subject", str(subject), *llm(server))[0] == 0  # (served from the store
    err = one_line_error(capsys, "source", *s, "--subject", str(subject), "t99999")        # if built already)
    assert "no timeline event 't99999'" in err
    err = one_line_error(capsys, "ask", "--store", str(tmp_path / "missing"), "--subject", "1", "Stage?")
    assert "does not exist" in err and "vista graph" in err
    err = one_line_error(capsys, "ask", *s, "--subject", str(third), "Stage?", *llm(server))
    assert f"no timeline for subject {third}" in err and "vista timeline" in err
    err = one_line_error(capsys, "timeline", *s, "--subject", str(subject), "--llm", "temprature=0.2")
    assert "unknown LLM setting" in err
    err = one_line_error(capsys, "graph", "--dataset", str(tmp_path / "nope"), "--store", str(tmp_path / "s"))
    assert "no such directory" in err
    err = one_line_error(capsys, "graph", "--dataset", str(synth_root()), "--store", str(tmp_path / "s2"),
                         "--subjects", "987654")
    assert "987654" in err


@pytest.mark.slow
def test_evaluate_scores_vista_and_rag_against_the_ground_truth(store, server, capsys, tmp_path):
    root, subjects = store
    lung = subjects[:2]
    code, out, err = run(capsys, "evaluate", "--store", str(root), "--truth", str(synth_root()), "--subjects",
                         *map(str, lung), "--resamples", "200", "--json", "--out", str(tmp_path), *llm(server))
    assert code == 0, err
    report = json.loads(out)
    assert report["judge_model"] == "synthetic"
    assert {m["method"] for m in report["methods"]} == {"vista", "rag"}
    assert (tmp_path / "evaluation.md").read_text().count("synthetic") >= 1
    code, _, err = run(capsys, "evaluate", "--store", str(root), "--truth", str(synth_root()), "--subjects",
                       *map(str, lung), "--resamples", "200", "--json", *llm(server))
    assert code == 0 and err.count("VISTA display (0 new calls)") == len(lung)  # stored: not rebuilt


def test_evaluate_names_a_subject_without_ground_truth(store, server, capsys):
    root, subjects = store
    control = subjects[-1]
    code, _, err = run(capsys, "evaluate", "--store", str(root), "--truth", str(synth_root()), "--subjects",
                       str(control), *llm(server))
    assert code == 2 and str(control) in err and "oncology" in err
