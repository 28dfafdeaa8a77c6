"""The `trajonco` CLI lists its commands with one-line descriptions."""

import subprocess
import sys

from trajonco.cli import build_parser

COMMANDS = ["synth", "validate", "cohort", "timeline", "chunk", "predict-one"]


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

from jobs.synthetic_llm import SyntheticLLMServer  # noqa: E402
from trajonco.cli import main  # noqa: E402
from vista.synth import SynthConfig, generate  # noqa: E402


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
                     "--variant", "two_stage", "--llm", "backend=openai", "--llm", f"base_url={server.base_url}",
                     "--llm", "model=synthetic", "--llm", "cache_dir="])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["subject_id"] == subject
    assert 1 <= result["risk_score"] <= 10


def test_predict_one_names_a_missing_subject_in_one_line(small_dataset, capsys):
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", "987654321"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "987654321" in err and "Traceback" not in err


def test_predict_one_rejects_bad_options_in_one_line(small_dataset, capsys):
    subject = first_subject(small_dataset)
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--cancer", "spleen"]) == 2
    assert "spleen" in capsys.readouterr().err
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject),
                 "--prediction-time", "yesterday"]) == 2
    assert "--prediction-time" in capsys.readouterr().err
    assert main(["predict-one", "--dataset", str(small_dataset), "--subject", str(subject), "--chunk-tokens", "5"]) == 2
    assert "--chunk-tokens" in capsys.readouterr().err
