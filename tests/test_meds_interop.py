"""The MEDS files the project writes, read by the MEDS tools themselves, unmodified.

- ``trajonco cohort``'s label files against ``meds.LabelSchema`` (meds 0.4.1): ``validate`` and ``align`` refuse any
  column outside the MEDS label schema, so the cohort's own columns live in ``COHORT/label_details/``.
- The predict job's ``predictions.parquet`` against MEDS-DEV's evaluator (PyPI ``meds-evaluation`` 0.0.6):
  ``PredictionSchema.validate`` and ``evaluate_binary_classification``, which refuse extra columns, a float64
  probability, null labels and (in the metrics) null scores. The rows are those of the real predict actor, run here
  without Ray on the synthetic OpenAI-compatible endpoint, consolidated as `jobs.runner` consolidates them.

Every project command reads the cohort's columns and the prediction details back through one reader each
(`vista.shared.meds.labels.read_label_table`, `trajonco.prediction_files.read_predictions`).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import meds
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cohort_meds import write_dataset
from meds_evaluation.evaluate import evaluate_binary_classification
from meds_evaluation.schema import PredictionSchema
from test_cohort_build import small_population

from baselines import read_labels
from jobs.predict import prediction_outputs
from jobs.predict_actor import PredictActor, PredictSettings
from vista.shared.runs.parts import consolidate_parts
from vista.shared.meds.tasks import read_label_tasks, task_keys
from trajonco.cli import main as trajonco_main
from trajonco.cohorts import LABELS_SCHEMA
from trajonco.pipeline import PipelineConfig
from trajonco.prediction_files import (
    DETAILS_FILE,
    MEDS_DEV_COLUMNS,
    PREDICTIONS_FILE,
    PredictionFilesError,
    read_predictions,
)
from trajonco.prediction_rows import PREDICTION_SCHEMA
from vista.shared.llm import LLMConfig
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.shared.meds.labels import LabelFileError, label_details_path, read_label_table

UNKNOWN_SUBJECT = 999_999  # in the labels, not in the dataset: an error row without a score


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """``trajonco cohort lung`` on a hand-made dataset: 8 cases + 8 controls for test, the same for train."""
    root = tmp_path_factory.mktemp("interop")
    dataset = write_dataset(root / "meds", small_population())
    assert trajonco_main(["cohort", "lung", "--dataset", str(dataset), "--out", str(root / "lung")]) == 0
    return {"dataset": dataset, "cohort": root / "lung"}


@pytest.fixture(scope="module")
def server():
    with SyntheticLLMServer() as server:
        yield server


# ------------------------------------------------------------------------------------------------ labels
def test_cohort_label_files_pass_meds_label_schema_as_written(cohort):
    for split in ("test", "train"):
        path = cohort["cohort"] / "labels" / f"{split}.parquet"
        table = pq.read_table(path)
        meds.LabelSchema.validate(table)  # raises on any extra column or wrong type
        assert meds.LabelSchema.align(table).num_rows == table.num_rows == 16
        assert label_details_path(path) == cohort["cohort"] / "label_details" / f"{split}.parquet"


def test_every_label_reader_gets_the_cohort_columns_back(cohort):
    path = cohort["cohort"] / "labels" / "test.parquet"
    table = read_label_table(path)
    assert table.column_names == LABELS_SCHEMA.names and table.schema.field("matched_to").type == pa.int64()
    labels = pl.from_arrow(table)
    assert sorted(labels.filter(pl.col("role") == "control")["matched_to"].to_list()) == list(range(1, 9))
    assert read_labels(path).columns == LABELS_SCHEMA.names  # the baselines' reader: the same columns
    assert read_label_tasks(path).table.column_names == ["subject_id", "prediction_time", "boolean_value"]


def _with_details(cohort, tmp_path, edit) -> Path:
    """A copy of the cohort's test label file whose label_details file is ``edit(details)``; the copy's path."""
    folder = tmp_path / "c"
    (folder / "labels").mkdir(parents=True)
    (folder / "label_details").mkdir()
    source = cohort["cohort"]
    pq.write_table(pq.read_table(source / "labels" / "test.parquet"), folder / "labels" / "test.parquet")
    details = pq.read_table(source / "label_details" / "test.parquet")
    pq.write_table(edit(details), folder / "label_details" / "test.parquet")
    return folder / "labels" / "test.parquet"


def test_a_label_details_file_that_does_not_match_its_labels_is_refused(cohort, tmp_path):
    path = _with_details(cohort, tmp_path, lambda details: details.slice(1))
    with pytest.raises(LabelFileError, match=r"test\.parquet: subject \d+: .*label_details.*1 label row\(s\)"):
        read_label_table(path)


def test_a_label_details_file_with_a_repeated_row_is_refused(cohort, tmp_path):
    path = _with_details(cohort, tmp_path, lambda details: pa.concat_tables(  # as many rows, one twice, one missing
        [details.slice(0, 1), details.slice(0, details.num_rows - 1)]))
    with pytest.raises(LabelFileError, match=r"1 label row\(s\) without a details row, 16 details rows"):
        read_label_table(path)


# ------------------------------------------------------------------------------------------------ predictions
def predict(cohort, server, out, *, labelled: bool = True):
    """The predict actor over the test cohort plus one unknown subject, then the job's consolidation."""
    tasks = read_label_tasks(cohort["cohort"] / "labels" / "test.parquet").table
    unknown = tasks.slice(0, 1).set_column(0, tasks.schema.field(0), pa.array([UNKNOWN_SUBJECT], pa.int64()))
    tasks = pa.concat_tables([tasks, unknown])
    if not labelled:
        tasks = tasks.set_column(2, "boolean_value", pa.nulls(tasks.num_rows, pa.bool_()))
    llm = LLMConfig(backend="openai", base_url=server.base_url, model="synthetic", cache_dir=out / "llm_cache")
    settings = PredictSettings(dataset=cohort["dataset"], out=out, pipeline=PipelineConfig(context_tokens=32768),
                               llm=llm, patients_per_actor=4, run_id="interop")

    async def stream() -> list[dict]:
        actor = PredictActor(settings)
        return [row async for table in actor(tasks) for row in table.to_pylist()]

    statuses = asyncio.run(stream())
    assert len(statuses) == tasks.num_rows
    return consolidate_parts(out, prediction_outputs(out, labelled=labelled), task_keys(tasks))


def test_meds_evaluation_reads_the_predict_jobs_predictions_file_unmodified(cohort, server, tmp_path):
    report = predict(cohort, server, tmp_path)
    assert report.complete and report.file_rows == {"prediction_details": 17, "predictions": 16,
                                                 "meds_dev_predictions": 16}
    table = pq.read_table(tmp_path / PREDICTIONS_FILE)
    assert table.column_names == list(MEDS_DEV_COLUMNS)
    PredictionSchema.validate(table)
    metrics = evaluate_binary_classification(pl.read_parquet(tmp_path / PREDICTIONS_FILE))
    for weighting in ("samples_equally_weighted", "subjects_equally_weighted"):
        assert 0.0 <= metrics[weighting]["roc_auc_score"] <= 1.0 and "brier_score" in metrics[weighting]

    rows = pl.from_arrow(read_predictions(tmp_path))  # the project's view: every task, its columns
    assert rows.columns == PREDICTION_SCHEMA.names and rows.height == 17
    bad = rows.filter(pl.col("subject_id") == UNKNOWN_SUBJECT).row(0, named=True)
    assert (bad["status"], bad["error_kind"], bad["predicted_boolean_probability"]) == ("error", "data", None)
    assert bad["boolean_value"] is not None  # the label of a task without a score is kept in the details
    scored = rows.filter(pl.col("predicted_boolean_probability").is_not_null())
    assert scored.height == 16  # risk_score / 10 exactly, through the float32 MEDS-DEV stores
    assert scored["predicted_boolean_probability"].to_list() == [r / 10 for r in scored["risk_score"].to_list()]
    assert read_predictions(tmp_path / PREDICTIONS_FILE, columns=["subject_id", "status"]).column_names == [
        "subject_id", "status"]


def test_an_unlabelled_run_writes_a_valid_file_without_labels(cohort, server, tmp_path):
    report = predict(cohort, server, tmp_path, labelled=False)
    table = pq.read_table(tmp_path / PREDICTIONS_FILE)
    assert "boolean_value" not in table.column_names and table.num_rows == report.file_rows["predictions"] == 16
    PredictionSchema.validate(table)
    assert read_predictions(tmp_path).column("boolean_value").null_count == 17


def test_a_plain_meds_dev_file_is_read_as_it_is_and_mismatched_files_are_refused(tmp_path):
    when = datetime(2020, 1, 1)
    plain = tmp_path / "other.parquet"
    pq.write_table(pa.table({"subject_id": [1, 2], "prediction_time": [when] * 2, "boolean_value": [True, False],
                             "predicted_boolean_probability": pa.array([0.7, 0.2], pa.float32())}), plain)
    assert read_predictions(plain).column("predicted_boolean_probability").to_pylist() == [0.7, 0.2]
    run = tmp_path / "run"
    run.mkdir()
    pq.write_table(pq.read_table(plain), run / PREDICTIONS_FILE)
    pq.write_table(pa.table({"subject_id": [1], "prediction_time": [when], "status": ["ok"]}), run / DETAILS_FILE)
    with pytest.raises(PredictionFilesError, match=r"predictions\.parquet: subject 2: 1 scored task\(s\) are not in "
                                                   r".*prediction_details\.parquet"):
        read_predictions(run)
