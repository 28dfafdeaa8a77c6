"""MEDS-DEV's own tools on the predict job's output, each in the venv its pins ask for.

- meds-evaluation 0.0.6 (the project's venv): ``PredictionSchema.validate`` wants the score float32 and refuses
  float64; its ``evaluate_binary_classification`` casts through ``PredictionSchema.align`` and takes both.
- meds-evaluation 0.0.3 and ``meds-dev-evaluation`` (MEDS-DEV 0.0.14 pins meds 0.3.3, meds-evaluation 0.0.3 and
  es-aces 0.6.1 with polars 1.x: the side venv ``.side-venvs/meds-dev`` of scripts/side_venvs.sh): its schema check
  wants float64 and refuses float32. So the job writes ``predictions.parquet`` (float32) and, alone in
  ``meds_dev/`` (``summary.json``: ``meds_dev_predictions_dir``), the same rows with float64 scores.
- TrajOnco as a MEDS-DEV model (meds_dev/models/trajonco/model.yaml): its ``supervised.predict`` command, formatted
  as MEDS-DEV formats it, run by bash with the embedded model, then scored by ``meds-dev-evaluation``.

The runs are real `jobs.predict` runs on the session's Ray head (the synthetic OpenAI-compatible endpoint for the
first, the embedded model for the model command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from trajonco.prediction_files import MEDS_DEV_DIR, PREDICTIONS_FILE, meds_dev_file
from vista.shared.testing.synthetic_server import SyntheticLLMServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).parents[1]
MODEL_DIR = REPO / "meds_dev" / "models" / "trajonco"
N_PATIENTS = 8


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def meds_dev_venv() -> Path:
    """``.side-venvs/meds-dev`` (created on first use, about 70 s; then a stamp check)."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "side_venvs.sh"), "meds-dev"], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


def side_env(venv: Path) -> dict[str, str]:
    """The environment of a MEDS-DEV command: the side venv's executables first (meds-dev-evaluation runs
    ``meds-evaluation-cli`` through the shell)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {"PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv)}


def in_side_venv(venv: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code, *args], capture_output=True, text=True,
                          env=side_env(venv), timeout=300)


def meds_dev_evaluation(venv: Path, predictions_dir: Path, output_dir: Path) -> dict:
    """``meds-dev-evaluation predictions_dir=… output_dir=…`` as a user runs it; its results.json."""
    done = subprocess.run([str(venv / "bin" / "meds-dev-evaluation"), f"predictions_dir={predictions_dir}",
                           f"output_dir={output_dir}"], capture_output=True, text=True, env=side_env(venv),
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((output_dir / "results.json").read_text())


@pytest.fixture(scope="module")
def run(lung_cohort_1500, ray_session, tmp_path_factory):
    """jobs.predict on 8 lung patients (cases and controls) with the synthetic endpoint."""
    from jobs import predict

    root = tmp_path_factory.mktemp("meds_dev")
    labels = lung_cohort_1500.first_train_labels(N_PATIENTS)
    assert 0 < labels["boolean_value"].sum() < N_PATIENTS
    pq.write_table(labels.to_arrow(), root / "labels.parquet")
    out = root / "out"
    with SyntheticLLMServer() as server:
        summary = predict.run(predict.build_parser().parse_args([
            "--labels", str(root / "labels.parquet"), "--dataset", str(lung_cohort_1500.dataset), "--out", str(out),
            "--backend", "openai", "--base-url", server.base_url, "--model", "synthetic", "--context-tokens", "32768",
            "--actors", "1", "--patients-per-actor", "4"]))
    assert summary.complete and summary.by_status == {"ok": N_PATIENTS}
    return {"out": out, "summary": summary, "root": root}


# ------------------------------------------------------------------------------------------------ the folder
def test_the_meds_dev_folder_holds_one_file_and_the_summary_names_it(run):
    out, summary = run["out"], run["summary"]
    folder = out / MEDS_DEV_DIR
    assert summary.meds_dev_predictions_dir == str(folder)
    assert json.loads((out / "summary.json").read_text())["meds_dev_predictions_dir"] == str(folder)
    assert sorted(p.name for p in folder.rglob("*")) == [PREDICTIONS_FILE]
    assert summary.output_rows == {"prediction_details": N_PATIENTS, "predictions": N_PATIENTS,
                                   "meds_dev_predictions": N_PATIENTS}
    strict, meds_dev = pq.read_table(out / PREDICTIONS_FILE), pq.read_table(meds_dev_file(out))
    assert strict.schema.field("predicted_boolean_probability").type == pa.float32()
    assert meds_dev.schema.field("predicted_boolean_probability").type == pa.float64()
    assert strict.column_names == meds_dev.column_names
    scores = meds_dev.column("predicted_boolean_probability").to_pylist()
    assert scores == pytest.approx(strict.column("predicted_boolean_probability").to_pylist(), abs=1e-7)
    assert all(round(s * 10) == s * 10 for s in scores)  # risk / 10 exactly in float64


def test_meds_evaluation_006_validates_the_float32_file_and_evaluates_both(run):
    from flexible_schema import SchemaValidationError
    from meds_evaluation.evaluate import evaluate_binary_classification
    from meds_evaluation.schema import PredictionSchema

    out = run["out"]
    PredictionSchema.validate(pq.read_table(out / PREDICTIONS_FILE))
    with pytest.raises(SchemaValidationError, match="predicted_boolean_probability"):
        PredictionSchema.validate(pq.read_table(meds_dev_file(out)))  # 0.0.6's strict check: float32 only
    aurocs = {evaluate_binary_classification(pl.read_parquet(path))["samples_equally_weighted"]["roc_auc_score"]
              for path in (out / PREDICTIONS_FILE, meds_dev_file(out))}
    assert len(aurocs) == 1 and 0.0 <= aurocs.pop() <= 1.0


CHECK_003 = """
import json, sys
import polars as pl
from meds_evaluation.evaluate import evaluate_binary_classification
from meds_evaluation.schema import validate_binary_classification_schema
frame = pl.read_parquet(sys.argv[1])
try:
    validate_binary_classification_schema(frame)
except ValueError as exc:
    print(json.dumps({"refused": str(exc)}))
else:
    metrics = evaluate_binary_classification(frame)
    print(json.dumps({"auroc": metrics["samples_equally_weighted"]["roc_auc_score"]}))
"""


def test_meds_evaluation_003_checks_and_evaluates_the_meds_dev_file(run, meds_dev_venv):
    from meds_evaluation.evaluate import evaluate_binary_classification

    out = run["out"]
    version = in_side_venv(meds_dev_venv, "import importlib.metadata as m; print(m.version('meds-evaluation'))")
    assert version.stdout.strip() == "0.0.3"
    done = in_side_venv(meds_dev_venv, CHECK_003, str(meds_dev_file(out)))
    assert done.returncode == 0, done.stderr[-3000:]
    expected = evaluate_binary_classification(pl.read_parquet(out / PREDICTIONS_FILE))
    assert json.loads(done.stdout)["auroc"] == pytest.approx(expected["samples_equally_weighted"]["roc_auc_score"])
    refused = in_side_venv(meds_dev_venv, CHECK_003, str(out / PREDICTIONS_FILE))  # why there are two files
    assert "Mismatched type for predicted_boolean_probability" in json.loads(refused.stdout)["refused"]


def test_meds_dev_evaluation_scores_the_named_folder_as_it_is(run, meds_dev_venv, tmp_path):
    results = meds_dev_evaluation(meds_dev_venv, Path(run["summary"].meds_dev_predictions_dir), tmp_path / "eval")
    for weighting in ("samples_equally_weighted", "subjects_equally_weighted"):
        assert 0.0 <= results[weighting]["roc_auc_score"] <= 1.0 and "average_precision_score" in results[weighting]
    with pytest.raises(AssertionError, match="ColumnNotFoundError|cancer|SchemaError|schema"):
        meds_dev_evaluation(meds_dev_venv, run["out"], tmp_path / "whole")  # the run folder itself: refused


# ------------------------------------------------------------------------------------------------ the model
def short_patients(cohort, per_class: int, max_tokens: int = 1400) -> pl.DataFrame:
    """``per_class`` cases and as many controls of the cohort's test labels whose timeline fits one chunk of the
    embedded model."""
    from vista.shared.meds.reader import MedsDataset
    from vista.shared.timeline import render_timeline

    labels = pl.read_parquet(cohort.lung / "labels" / "test.parquet").sort("subject_id")
    dataset = MedsDataset(cohort.dataset)
    records = dataset.load_patients(labels["subject_id"].to_list())
    keep: dict[bool, list[int]] = {True: [], False: []}
    for row in labels.iter_rows(named=True):
        chosen = keep[row["boolean_value"]]
        if len(chosen) < per_class and render_timeline(records[row["subject_id"]], dataset.code_catalog(),
                                                       row["prediction_time"]).n_tokens() <= max_tokens:
            chosen.append(row["subject_id"])
    assert all(len(ids) == per_class for ids in keep.values())
    return labels.filter(pl.col("subject_id").is_in(keep[True] + keep[False]))


def test_model_folder_has_meds_devs_layout(meds_dev_venv):
    """model.yaml's keys and placeholders, its metadata checked by MEDS-DEV's own ``Metadata``."""
    spec = yaml.safe_load((MODEL_DIR / "model.yaml").read_text())
    assert set(spec) == {"metadata", "commands"}
    done = in_side_venv(meds_dev_venv, "import sys, yaml; from MEDS_DEV.utils import Metadata; "
                        "print(Metadata(**yaml.safe_load(open(sys.argv[1]))['metadata']).contacts[0].name)",
                        str(MODEL_DIR / "model.yaml"))
    assert done.returncode == 0 and done.stdout.strip() == "TrajOnco maintainers", done.stderr[-2000:]
    assert spec["commands"]["unsupervised"] is None and spec["commands"]["supervised"]["train"] is None
    predict = spec["commands"]["supervised"]["predict"]
    assert all(f"{{{name}}}" in predict for name in ("dataset_dir", "labels_dir", "split", "output_dir"))
    assert (MODEL_DIR / "requirements.txt").is_file() and (MODEL_DIR / "README.md").is_file()


@pytest.mark.llm
def test_the_model_predict_command_runs_zero_shot_and_meds_dev_evaluation_scores_it(
        lung_cohort_1500, ray_session, meds_dev_venv, tmp_path):
    """MEDS-DEV's contract: labels in ACES's shard layout (LABELS/held_out/<n>.parquet), the command formatted with
    ``str.format`` as MEDS-DEV's ``fmt_command`` does and run by bash; only predictions.parquet in the output."""
    labels = short_patients(lung_cohort_1500, 1)
    shards = tmp_path / "labels" / "held_out"
    shards.mkdir(parents=True)
    for n, frame in enumerate(labels.select("subject_id", "prediction_time", "boolean_value").partition_by(
            "boolean_value", maintain_order=True)):
        pq.write_table(frame.to_arrow(), shards / f"{n}.parquet")
    spec = yaml.safe_load((MODEL_DIR / "model.yaml").read_text())
    output_dir = tmp_path / "task" / "supervised" / "predict"
    command = spec["commands"]["supervised"]["predict"].format(
        dataset_dir=lung_cohort_1500.dataset, labels_dir=tmp_path / "labels", split="held_out",
        output_dir=output_dir, model_dir=MODEL_DIR, demo=False)
    env = {k: v for k, v in ray_session.env().items() if not k.startswith(("VISTA_LLM_", "TRAJONCO_LLM_"))}
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(REPO),
            "TRAJONCO_PREDICT_ARGS": "--actors 1 --actor-cpus 1 --patients-per-actor 1 --llm max_tokens=256"}
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[meds-dev] held_out: 2 label rows from 2 file(s)" in done.stdout
    assert sorted(p.name for p in output_dir.rglob("*")) == [PREDICTIONS_FILE]
    run = Path(f"{output_dir}.trajonco") / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["llm"]["backend"] == "embedded" and summary["complete"]
    predictions = pl.read_parquet(output_dir / PREDICTIONS_FILE)
    assert predictions.height == summary["output_rows"]["meds_dev_predictions"] == 2
    assert predictions["predicted_boolean_probability"].dtype == pl.Float64
    results = meds_dev_evaluation(meds_dev_venv, output_dir, tmp_path / "eval")
    assert 0.0 <= results["samples_equally_weighted"]["roc_auc_score"] <= 1.0

    again = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert again.returncode == 0 and pl.read_parquet(output_dir / PREDICTIONS_FILE).equals(predictions)
    rerun = json.loads((run / "summary.json").read_text())
    assert rerun["ran"] == 0 and rerun["skipped"] == 2  # the run beside the output folder: nothing paid twice


# ------------------------------------------------------------------------------------------------ submitting
def test_a_result_packs_and_validates_once_the_task_and_model_are_in_meds_dev(run, meds_dev_venv, tmp_path):
    """docs/meds-dev.md's last two steps. The released MEDS-DEV 0.0.14 packs results of its registered tasks and
    models only, so ours is refused until this repository's meds_dev/ folders are merged into it; a copy of the
    installed package with them added (what that pull request does) packs a result that its validator accepts."""
    import shutil

    results = meds_dev_evaluation(meds_dev_venv, Path(run["summary"].meds_dev_predictions_dir), tmp_path / "eval")
    names = ["dataset=MIMIC-IV", "task=cancer/lung/gap_1y_within_1y", "model=trajonco",
             f"evaluation_fp={tmp_path / 'eval' / 'results.json'}", f"result_fp={tmp_path / 'result.json'}"]
    env = side_env(meds_dev_venv)
    released = subprocess.run([str(meds_dev_venv / "bin" / "meds-dev-pack-result"), *names], capture_output=True,
                              text=True, env=env | {"HYDRA_FULL_ERROR": "1"}, timeout=120)
    assert released.returncode != 0 and "Unknown task: cancer/lung/gap_1y_within_1y" in released.stderr

    site = next((meds_dev_venv / "lib").glob("python3*/site-packages"))
    merged = tmp_path / "merged"
    shutil.copytree(site / "MEDS_DEV", merged / "MEDS_DEV")
    shutil.copytree(MODEL_DIR, merged / "MEDS_DEV" / "models" / "trajonco")
    shutil.copytree(REPO / "meds_dev" / "tasks" / "cancer", merged / "MEDS_DEV" / "tasks" / "cancer")
    env["PYTHONPATH"] = str(merged)
    for command in (["meds-dev-pack-result", *names], ["meds-dev-validate-result", f"result_fp={tmp_path / 'result.json'}"]):
        done = subprocess.run([str(meds_dev_venv / "bin" / command[0]), *command[1:]], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
    packed = json.loads((tmp_path / "result.json").read_text())
    assert (packed["model"], packed["result"]) == ("trajonco", results)
    assert (tmp_path / "result.json").stat().st_size <= 1.5 * 1024
