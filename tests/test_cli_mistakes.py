"""Every command, walked with the mistakes users make: each ends as one line on stderr, exit status 2, no traceback —
and before any expensive work (no dataset generated, no cohort built, no Ray started)."""

from __future__ import annotations

import pytest

from jobs.cli import trajonco_main, vista_main
from vista.shared.synth import SynthConfig, generate


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("mistakes")
    dataset = root / "ds"
    generate(SynthConfig(n_subjects=30, seed=4, workers=1), dataset, progress=False)
    taken = root / "taken"
    taken.mkdir()
    (taken / "something.txt").write_text("not ours")
    return {"ds": str(dataset), "taken": str(taken), "root": root}


MISTAKES = [
    # (which command line, argv with {placeholders}, a word the one line must contain)
    ("trajonco", ["frobnicate"], "invalid choice"),
    ("trajonco", ["synth", "--subjects", "10", "--out", "/etc/hostname/x"], "is a file"),
    ("trajonco", ["synth", "--subjects", "10", "--out", "/proc/x"], "not writable"),
    ("trajonco", ["synth", "--subjects", "10", "--out", "{taken}"], "--overwrite"),
    ("trajonco", ["synth", "--subjects", "0", "--out", "{root}/new"], "at least 1"),
    ("trajonco", ["synth", "--subjects", "ten", "--out", "{root}/new"], "invalid int value"),
    ("trajonco", ["cohort", "lung", "--dataset", "{ds}", "--out", "/etc/hostname/c"], "is a file"),
    ("trajonco", ["cohort", "lung", "--dataset", "{ds}", "--out", "{taken}"], "--overwrite"),
    ("trajonco", ["cohort", "lungs", "--dataset", "{ds}", "--out", "{root}/c1"], "unknown cohort definition"),
    ("trajonco", ["cohort", "lung", "--dataset", "{root}/nowhere", "--out", "{root}/c2"], "no such directory"),
    ("trajonco", ["timeline", "--dataset", "{ds}", "--subject", "1", "--prediction-time", "2014-13-45"],
     "not a valid ISO date"),
    ("trajonco", ["validate", "{ds}", "--fix-duplicates", "{taken}"], "new or empty"),
    ("trajonco", ["validate", "{ds}", "--report", "r.json"], "--quarantine"),
    ("trajonco", ["chunk", "--dataset", "{ds}", "--labels", "x.parquet", "--chunk-tokens", "0"], "at least 1"),
    ("trajonco", ["predict-one", "--dataset", "{ds}", "--subject", "1", "--cancer", "lungs"], "unknown cancer"),
    ("trajonco", ["predict-one", "--dataset", "{ds}", "--subject", "1", "--prediction-time", "yesterday"],
     "not a valid ISO date"),
    ("trajonco", ["predict", "--labels", "x.parquet", "--dataset", "{ds}", "--out", "{root}/p", "--cancer", "lungs"],
     "unknown cancer"),
    ("trajonco", ["predict", "--labels", "{root}/missing.parquet", "--dataset", "{ds}", "--out", "{root}/p"],
     "missing.parquet"),
    ("trajonco", ["predict", "--dataset", "{ds}", "--out", "{root}/p"], "--labels"),
    ("trajonco", ["predict", "--labels", "x.parquet", "--dataset", "{ds}", "--out", "{root}/p", "--limit", "0"],
     "--limit"),
    ("trajonco", ["report", "--cohorts", "lungs", "--out", "{root}/r"], "unknown cohort definition"),
    ("trajonco", ["report", "--cohorts", "lung", "--stratify", "breast", "--out", "{root}/r"], "--stratify"),
    ("trajonco", ["report", "--out", "/etc/hostname/r"], "is a file"),
    ("trajonco", ["report", "--predictions", "{root}/nope.parquet", "--out", "{root}/r"], "no such file"),
    ("trajonco", ["insights", "{root}/no-run", "--out", "{root}/i"], "no-run"),
    ("trajonco", ["judge", "{root}/a", "{root}/b", "--out", "{root}/j", "--limit", "0"], "--limit"),
    ("vista", ["build", "--dataset", "s3://bucket/meds", "--out", "{root}/b"], "object storage"),
    ("vista", ["build", "--dataset", "{ds}", "--out", "{root}/b", "--chunk-tokens", "many"], "invalid int"),
    ("vista", ["evaluate", "--store", "{root}/no-store"], "does not exist"),
    ("vista", ["ask", "--store", "{root}/no-store", "--subject", "1", "what?"], "no-store"),
    ("vista", ["graph", "--dataset", "{root}/nowhere", "--store", "{root}/s"], "no such directory"),
    ("vista", ["source", "--store", "{root}/no-store", "--subject", "x", "e1"], "invalid int value"),
]


@pytest.mark.parametrize("tool,argv,word", MISTAKES, ids=[" ".join(m[1][:2]) + f"-{i}" for i, m in enumerate(MISTAKES)])
def test_a_mistake_is_one_line_and_exit_2(tool, argv, word, data, capsys):
    main = trajonco_main if tool == "trajonco" else vista_main
    argv = [a.format(**data) for a in argv]
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert word in lines[0], lines[0]


def test_overwrite_replaces_a_cohort_and_a_dataset(data, capsys):
    out = data["root"] / "cohort-ow"
    assert trajonco_main(["cohort", "lung", "--dataset", data["ds"], "--out", str(out), "--train-splits"]) in (0, 2)
    capsys.readouterr()
    (out / "labels" / "stale.parquet").parent.mkdir(parents=True, exist_ok=True)
    (out / "labels" / "stale.parquet").write_bytes(b"old")
    status = trajonco_main(["cohort", "lung", "--dataset", data["ds"], "--out", str(out), "--overwrite"])
    assert not (out / "labels" / "stale.parquet").exists()  # nothing of the earlier cohort survives --overwrite
    assert status in (0, 2)  # 30 subjects may hold no lung case: an empty cohort is its own one-line message
