"""The `trajonco` CLI lists its commands with one-line descriptions."""

import subprocess
import sys

from trajonco.cli import build_parser

COMMANDS = ["synth", "validate", "cohort", "timeline", "chunk", "predict-one", "profile"]


def test_help_lists_every_command():
    text = build_parser().format_help()
    for name in COMMANDS:
        assert name in text


def test_console_script_help_runs():
    out = subprocess.run([sys.executable, "-m", "trajonco.cli", "--help"], capture_output=True, text=True, check=True)
    assert "synth" in out.stdout and "generate a seeded synthetic MEDS dataset" in out.stdout


# ------------------------------------------------------------------------------------------------ predict-one
import json  # noqa: E402

import pytest  # noqa: E402

from trajonco.cli import main  # noqa: E402
from vista.shared.testing.synthetic_server import SyntheticLLMServer  # noqa: E402
from vista.shared.synth import SynthConfig, generate  # noqa: E402


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "ds"
    generate(SynthConfig(n_subjects=30, seed=4, workers=1), root, progress=False)
    return root


def first_subject(root) -> int:
    import polars as pl

    return int(pl.scan_parquet(str(root / "data" / "**" / "*.parquet")).select("subject_id").first().collect().item())


def test_predict_one_prints_a_json_result_from_an_endpoint_on_localhost(small_dataset, capsys):
    subject = first_subject(small_dataset)
    with SyntheticLLMServer() as server:
        code = main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--json",
                     "--all-history", "--variant", "two_stage", "--llm", "backend=openai", "--llm", f"base_url={server.base_url}",
                     "--llm", "model=synthetic", "--llm", "cache_dir="])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["subject_id"] == subject
    assert 1 <= result["risk_score"] <= 10


def test_predict_one_names_a_missing_subject_in_one_line(small_dataset, capsys):
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", "987654321", "--all-history"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "987654321" in err and "Traceback" not in err


def test_predict_one_rejects_bad_options_in_one_line(small_dataset, capsys):
    subject = first_subject(small_dataset)
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--cancer", "spleen",
                 "--all-history"]) == 2
    err = capsys.readouterr().err
    assert "spleen" in err and "lung" in err  # names the valid keys
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject),
                 "--prediction-time", "yesterday"]) == 2
    assert "--prediction-time" in capsys.readouterr().err
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--chunk-tokens", "5",
                 "--prediction-time", "2030-01-01"]) == 2
    assert "--chunk-tokens" in capsys.readouterr().err


def test_predict_one_never_reads_the_outcome_silently(small_dataset, capsys, tmp_path):
    subject = first_subject(small_dataset)
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject)]) == 2
    err = capsys.readouterr().err
    assert "--prediction-time" in err and "--labels" in err and "--all-history" in err
    labels = tmp_path / "labels.parquet"
    import polars as pl
    from datetime import datetime

    pl.DataFrame({"subject_id": [subject, subject], "prediction_time": [datetime(2020, 1, 1), datetime(2021, 1, 1)]}
                 ).write_parquet(labels)
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--labels", str(labels)]) == 2
    assert "2 prediction times" in capsys.readouterr().err


def test_predict_one_warns_when_the_history_already_codes_the_cancer(tmp_path, capsys):
    """A MIMIC-style record with a lung cancer code before the prediction time: the command says so."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from vista.shared.meds.reader import MedsDataset
    from trajonco.outcome_guard import leak_warning

    (tmp_path / "data").mkdir()
    rows = [(None, "GENDER//M"), (datetime(2019, 1, 1), "HOSPITAL_ADMISSION//EW EMER.//ER"),
            (datetime(2019, 5, 1), "DIAGNOSIS//ICD//10//C3411"), (datetime(2020, 5, 1), "DIAGNOSIS//ICD//10//R059")]
    pq.write_table(pa.table({"subject_id": pa.array([5] * 4, pa.int64()),
                             "time": pa.array([r[0] for r in rows], pa.timestamp("us")), "code": [r[1] for r in rows],
                             "numeric_value": pa.array([None] * 4, pa.float32())}), tmp_path / "data" / "0.parquet")
    record = MedsDataset(tmp_path).load_patients([5])[5]
    warning = leak_warning(record, "lung", datetime(2020, 1, 1))
    assert warning is not None and "DIAGNOSIS//ICD//10//C3411" in warning and "2019-05-01" in warning
    assert leak_warning(record, "lung", datetime(2019, 2, 1)) is None
    assert leak_warning(record, "breast", datetime(2020, 1, 1)) is None


# ------------------------------------------------------------------------------------------------ help and version
def test_every_command_has_a_description_an_example_and_its_defaults():
    from benchmarks.bench_cli_help import commands
    from jobs.cli import TRAJONCO_JOBS, VISTA_JOBS
    from trajonco.cli import build_parser as trajonco_parser
    from vista.cli import build_parser as vista_parser

    import argparse
    import importlib

    parsers = {"trajonco": trajonco_parser(), "vista": vista_parser()}
    jobs = {job.name: job for job in (*TRAJONCO_JOBS, *VISTA_JOBS)}
    for tool, argv in commands():
        if not argv:
            continue
        if argv[0] in jobs:
            options = importlib.import_module(jobs[argv[0]].options)
            text = options.build_parser(f"{tool} {argv[0]}").format_help()
        else:
            sub = next(a for a in parsers[tool]._actions if isinstance(a, argparse._SubParsersAction))
            text = sub.choices[argv[0]].format_help()
        assert "example:" in text, f"{tool} {argv[0]} --help shows no example"
    synth = next(a for a in parsers["trajonco"]._actions if isinstance(a, argparse._SubParsersAction)).choices["synth"]
    assert "(default: 10000)" in synth.format_help() and "(default: 2)" in synth.format_help()  # shard size, workers
    cohort = next(a for a in parsers["trajonco"]._actions
                  if isinstance(a, argparse._SubParsersAction)).choices["cohort"].format_help()
    assert "multiple_myeloma" in " ".join(cohort.split())  # the full cancer list, not "lung, breast, ..."


def test_version(capsys):
    from jobs.cli import trajonco_main, vista_main

    for main_ in (trajonco_main, vista_main):
        with pytest.raises(SystemExit) as stop:
            main_(["--version"])
        assert stop.value.code == 0
    assert capsys.readouterr().out.count("trajonco ") == 2


def test_predict_one_exits_3_when_the_prediction_failed(small_dataset, capsys):
    """No score (every call rejected): exit status 3 and a closing line on stderr, not 0."""
    from trajonco.cli import PREDICTION_FAILED

    subject = first_subject(small_dataset)
    with SyntheticLLMServer(reject_status=400) as server:
        code = main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--json",
                     "--all-history", "--base-url", server.base_url, "--model", "synthetic", "--llm", "cache_dir="])
    captured = capsys.readouterr()
    assert code == PREDICTION_FAILED == 3
    assert json.loads(captured.out)["status"] == "failed" and "the prediction failed" in captured.err
