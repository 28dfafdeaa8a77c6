"""Labels from ACES (PyPI ``es-aces``) are accepted wherever the project takes a label file.

The fixtures are real ACES 0.7.3 output for the task ``tests/data/aces_lung.yaml`` (lung cancer within a year of an
outpatient encounter) on the ``tuning`` split of the synthetic dataset ``trajonco synth --subjects 80 --seed 5``:

- ``aces_labels.parquet``: what ``aces-cli ... data.standard=meds`` wrote (``bash scripts/aces_labels.sh DATASET
  tests/data/aces_lung.yaml OUT`` -> ``OUT/shards/tuning/0.parquet``): the MEDS label schema, one row per trigger
  (the script's merged ``OUT/tuning.parquet`` leaves out the label columns ACES wrote all null).
- ``aces_query.parquet``: the same task through ACES's Python API (``aces.query.query(cfg, predicates_df)
  .write_parquet(...)``, the table ACES's docs show): ``index_timestamp``, ``label`` as an int64 count, ``trigger``
  and one struct ``*_summary`` column per window.

ACES cannot share the project's venv (es-aces needs polars<2), so it is not run here: scripts/aces_labels.sh runs it
in a venv of its own. The dataset is regenerated (same seed, same bytes) and the fixture checked against it, so the
readers below see labels that really belong to the data.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from baselines import read_labels as baseline_read_labels
from baselines.errors import LabelDataError
from vista.shared.meds.task_key import TaskKey
from trajonco.cli import _label_time, main
from trajonco.cohort_timelines import iter_cohort_timelines, read_labels as timeline_read_labels
from vista.shared.errors import CommandLineError
from vista.shared.meds.labels import LabelFileError, merge_label_files, read_label_table
from vista.shared.meds.reader import MedsDataset
from vista.shared.meds.schema import LABEL_SCHEMA
from vista.shared.meds.tasks import read_label_tasks, task_keys
from vista.shared.synth import SynthConfig, generate

DATA = Path(__file__).parent / "data"
ACES_CLI = DATA / "aces_labels.parquet"
ACES_QUERY = DATA / "aces_query.parquet"
ROWS, SUBJECTS, TRUE = 129, 8, 26  # what ACES extracted (read from its own log and file)
MEDS = ["subject_id", "prediction_time", "boolean_value"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("aces") / "meds"
    generate(SynthConfig(n_subjects=80, seed=5, workers=1), root, progress=False)
    return root


def _sorted(table: pa.Table) -> pl.DataFrame:
    return pl.from_arrow(table.select(MEDS)).sort("subject_id", "prediction_time")


# ------------------------------------------------------------------------------------------------ what ACES writes
def test_aces_cli_writes_exactly_the_meds_label_schema_one_row_per_trigger():
    schema = pq.read_schema(ACES_CLI)
    assert [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in LABEL_SCHEMA]
    raw = pl.read_parquet(ACES_CLI)
    assert (raw.height, raw["subject_id"].n_unique(), raw["boolean_value"].sum()) == (ROWS, SUBJECTS, TRUE)
    assert raw.group_by("subject_id").len()["len"].max() > 1  # several prediction times per subject
    assert raw.select("integer_value", "float_value", "categorical_value").null_count().row(0) == (ROWS, ROWS, ROWS)


def test_the_merged_split_file_passes_meds_label_schema_though_aces_own_shard_does_not(tmp_path):
    """ACES leaves its three other label columns null in every row, which meds.LabelSchema refuses; the split file
    scripts/aces_labels.sh writes (`merge_label_files`) leaves them out and keeps every row."""
    import meds
    from flexible_schema import TableValidationError

    with pytest.raises(TableValidationError, match="integer_value, float_value, categorical_value"):
        meds.LabelSchema.validate(pq.read_table(ACES_CLI))
    half = pq.read_table(ACES_CLI)
    pq.write_table(half.slice(0, 60), tmp_path / "0.parquet")
    pq.write_table(half.slice(60), tmp_path / "1.parquet")
    merge_label_files([tmp_path / "0.parquet", tmp_path / "1.parquet"], tmp_path / "tuning.parquet")
    merged = pq.read_table(tmp_path / "tuning.parquet")
    meds.LabelSchema.validate(merged)
    assert merged.column_names == MEDS and _sorted(merged).equals(_sorted(read_label_table(ACES_CLI)))


def test_the_aces_rows_are_the_task_on_the_regenerated_dataset(dataset):
    """Every row is an outpatient encounter of the tuning split; label = a C34 code within 365 days after it."""
    events = pl.read_parquet(dataset / "data" / "tuning" / "*.parquet").select("subject_id", "time", "code")
    outpatient = events.filter(pl.col("code") == "ENCOUNTER//AMB").select("subject_id", prediction_time="time").unique()
    lung = events.filter(pl.col("code").str.starts_with("ICD10CM//C34")).select("subject_id", lung_time="time")
    rows = _sorted(read_label_table(ACES_CLI))
    assert rows.join(outpatient, on=["subject_id", "prediction_time"], how="anti").height == 0
    expected = (
        rows.join(lung, on="subject_id", how="left")
        .group_by("subject_id", "prediction_time", "boolean_value")
        .agg(within=((pl.col("lung_time") > pl.col("prediction_time"))
                     & (pl.col("lung_time") <= pl.col("prediction_time") + timedelta(days=365))).any(),
             before=(pl.col("lung_time") < pl.col("prediction_time")).any())
    )
    assert expected.filter(pl.col("within").fill_null(False) != pl.col("boolean_value")).height == 0
    assert not expected["before"].fill_null(False).any()  # the input window holds no lung cancer code


def test_the_python_api_table_reads_as_the_cli_file():
    raw = pl.read_parquet(ACES_QUERY)
    assert {"index_timestamp", "label", "trigger"} <= set(raw.columns) and raw["label"].max() > 1  # a count
    table = read_label_table(ACES_QUERY)
    assert table.column_names[:3] == MEDS and table.schema.field("boolean_value").type == pa.bool_()
    assert "trigger" in table.column_names and "index_timestamp" not in table.column_names
    assert _sorted(table).equals(_sorted(read_label_table(ACES_CLI)))


# ------------------------------------------------------------------------------------------------ every reader
@pytest.mark.parametrize("path", [ACES_CLI, ACES_QUERY], ids=["aces-cli", "aces-query"])
def test_job_tasks_read_aces_labels(path):
    table = read_label_tasks(path).table
    assert table.num_rows == ROWS and pc.sum(table.column("boolean_value")).as_py() == TRUE
    keys = task_keys(table)
    assert len(set(keys)) == ROWS and all(isinstance(k, TaskKey) and k.prediction_time is not None for k in keys)


@pytest.mark.parametrize("path", [ACES_CLI, ACES_QUERY], ids=["aces-cli", "aces-query"])
def test_baselines_read_aces_labels(path):
    frame = baseline_read_labels(path)
    assert frame.height == ROWS and frame["boolean_value"].dtype == pl.Boolean and frame["boolean_value"].sum() == TRUE
    assert frame.schema["prediction_time"] == pl.Datetime("us")


@pytest.mark.parametrize("path", [ACES_CLI, ACES_QUERY], ids=["aces-cli", "aces-query"])
def test_cohort_timelines_render_one_timeline_per_aces_row_before_its_time(dataset, path):
    rows = timeline_read_labels(path)
    assert len(rows) == ROWS and sum(r.is_case for r in rows) == TRUE
    meds = MedsDataset(dataset)
    records = meds.load_patients({r.subject_id for r in rows})
    seen = []
    for label, timeline in iter_cohort_timelines(meds, rows):
        times = {e.event_id: e.time for e in records[label.subject_id].events}
        assert all(times[e] is not None and times[e] < label.prediction_time for e in timeline.event_ids())
        seen.append((label.subject_id, label.prediction_time))
    assert sorted(seen) == sorted((r.subject_id, r.prediction_time) for r in rows)  # no row dropped or merged


def test_trajonco_chunk_takes_aces_labels(dataset, capsys):
    assert main(["chunk", "--dataset", str(dataset), "--labels", str(ACES_CLI), "--max-tokens", "4000"]) == 0
    out = capsys.readouterr().out
    assert f"{ROWS:,}" in out and str(TRUE) in out


def test_predict_one_takes_the_time_of_a_subjects_only_aces_row_and_lists_several(dataset, capsys):
    only = pl.read_parquet(ACES_CLI).filter(pl.col("subject_id") == 4)
    assert only.height == 1 and _label_time(str(ACES_QUERY), 4) == only["prediction_time"][0]
    code = main(["predict-one", "--dataset", str(dataset), "--subject", "39", "--cancer", "lung",
                 "--labels", str(ACES_CLI)])
    err = capsys.readouterr().err
    assert code == 2 and "has 56 prediction times for subject 39 (" in err and "pass one of them as --prediction-time" in err
    with pytest.raises(CommandLineError, match="has no row for subject 5;"):
        _label_time(str(ACES_CLI), 5)


# ------------------------------------------------------------------------------------------------ unusable ACES output
def _aces_without(tmp_path: Path, column: str) -> Path:
    """The CLI file as ACES writes it when the task config lacks ``index_timestamp`` / ``label`` (a null column)."""
    table = pq.read_table(ACES_CLI)
    index = table.column_names.index(column)
    path = tmp_path / f"no_{column}.parquet"
    pq.write_table(table.set_column(index, table.schema.field(index), pa.nulls(table.num_rows, table.schema.field(index).type)), path)
    return path


def test_aces_labels_without_prediction_times_are_refused_by_every_reader(tmp_path):
    path = _aces_without(tmp_path, "prediction_time")
    message = rf"no_prediction_time\.parquet: subject 4: field 'prediction_time': {ROWS} of {ROWS} rows have no prediction time .*index_timestamp: end"
    with pytest.raises(LabelFileError, match=message):
        read_label_table(path)
    with pytest.raises(LabelFileError, match=message):
        read_label_tasks(path)
    with pytest.raises(LabelDataError, match=message):
        baseline_read_labels(path)
    with pytest.raises(LabelFileError, match=message):
        timeline_read_labels(path)
    with pytest.raises(CommandLineError, match=message):
        _label_time(str(path), 4)


def test_aces_labels_without_outcomes(tmp_path):
    path = _aces_without(tmp_path, "boolean_value")
    assert read_label_tasks(path).table.column("boolean_value").null_count == ROWS  # predict runs unlabelled tasks
    with pytest.raises(LabelDataError, match=r"field 'boolean_value': column is missing"):
        baseline_read_labels(path)
    assert baseline_read_labels(path, require_outcome=False).height == ROWS
    with pytest.raises(LabelFileError, match=rf"subject 4: field 'boolean_value': {ROWS} of {ROWS} rows have no label .*`label:`"):
        timeline_read_labels(path)


def test_other_label_layouts_and_bad_files(tmp_path):
    table = pq.read_table(ACES_QUERY).select(["subject_id", "index_timestamp", "label"])
    pandas_like = table.set_column(1, "index_timestamp", table.column(1).cast(pa.timestamp("ns")))
    pandas_like = pandas_like.set_column(0, "subject_id", table.column(0).cast(pa.int32()))
    pq.write_table(pandas_like, tmp_path / "ns.parquet")
    assert _sorted(read_label_table(tmp_path / "ns.parquet")).equals(_sorted(read_label_table(ACES_CLI)))

    both = pq.read_table(ACES_QUERY).append_column("boolean_value", pa.nulls(ROWS, pa.bool_()))
    pq.write_table(both, tmp_path / "both.parquet")
    with pytest.raises(LabelFileError, match="both.parquet: field 'boolean_value': both 'boolean_value' and 'label'"):
        read_label_table(tmp_path / "both.parquet")
    zoned = table.set_column(1, "index_timestamp", table.column(1).cast(pa.timestamp("us", tz="UTC")))
    pq.write_table(zoned, tmp_path / "tz.parquet")
    with pytest.raises(LabelFileError, match="field 'prediction_time': carries time zone UTC"):
        read_label_table(tmp_path / "tz.parquet")
    words = table.set_column(2, "label", pa.array(["yes"] * ROWS))
    pq.write_table(words, tmp_path / "words.parquet")
    with pytest.raises(LabelFileError, match="field 'boolean_value': has type string, expected boolean"):
        read_label_table(tmp_path / "words.parquet")
    with pytest.raises(LabelFileError, match="is a directory; pass one label file"):
        read_label_table(tmp_path)
    with pytest.raises(LabelFileError, match="absent.parquet: label file not found"):
        read_label_table(tmp_path / "absent.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(LabelFileError, match="junk.parquet: not a readable parquet label file"):
        read_label_table(tmp_path / "junk.parquet")


# ------------------------------------------------------------------------------------------------ build-graphs (Ray)
@pytest.mark.ray
def test_build_graphs_runs_the_rows_of_an_aces_python_api_table(dataset, ray_session, tmp_path):
    from jobs import build_graphs

    out = tmp_path / "graphs"
    args = build_graphs.build_parser().parse_args(["--dataset", str(dataset), "--labels", str(ACES_QUERY),
                                                   "--out", str(out), "--limit", "3"])
    summary = build_graphs.run(args)
    assert summary.complete and summary.by_status == {"ok": 3}
    rows = pl.read_parquet(out / "patients.parquet").select("subject_id", "prediction_time")
    expected = _sorted(read_label_table(ACES_CLI)).select("subject_id", "prediction_time").head(3)
    assert rows.sort("subject_id", "prediction_time").equals(expected)
