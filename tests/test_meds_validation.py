"""Every kind of bad MEDS input is caught, named (file, subject, field), raised or quarantined."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from meds_builders import NOW, good_dataset, meds_table, patient_rows, with_column, write_dataset, write_shard

from vista.shared.meds.checks import epoch_us
from vista.shared.meds.errors import (
    MedsDataError,
    MedsFileError,
    MedsMetadataError,
    MedsOrderError,
    MedsSchemaError,
    MedsValueError,
)
from vista.shared.meds.reader import MedsDataset
from vista.shared.meds.reports import QuarantineReport
from vista.shared.meds.validation import validate_dataset

SHARD = "data/train/0.parquet"
DATA_SCHEMA_NULLABLE = pa.schema([pa.field(f.name, f.type, nullable=True) for f in meds_table([]).schema])


def one_shard(tmp_path: Path, rows, **kwargs) -> Path:
    return write_dataset(tmp_path, {SHARD: rows}, **kwargs)


def raised(root: Path, error_type: type[MedsDataError] = MedsDataError, **kwargs) -> MedsDataError:
    with pytest.raises(error_type) as info:
        validate_dataset(root, on_error="raise", now=NOW, **kwargs)
    return info.value


def assert_names(err: MedsDataError, *, file: str, subject: int | None, field: str | None, problem: str) -> None:
    """The error's attributes and its one-line message name where the problem is."""
    assert (err.file, err.subject_id, err.field) == (file, subject, field)
    message = str(err)
    assert message.startswith(f"{file}: ")
    if subject is not None:
        assert f"subject {subject}: " in message
    if field is not None:
        assert f"field '{field}': " in message
    assert problem in message, message


def rows_with(subject_id: int, extra: list) -> list:
    """A good patient with extra timed rows appended after its last event."""
    return patient_rows(subject_id) + extra


# ------------------------------------------------------------------------------------------- good data
def test_good_dataset_validates_clean(tmp_path):
    good_dataset(tmp_path, row_group_size=4)
    report = validate_dataset(tmp_path, now=NOW)
    assert report.ok and report.issues_found == 0
    assert (report.files_checked, report.subjects_checked, report.rows_checked) == (2, 5, 25)
    assert report.files_quarantined == report.subjects_quarantined == 0
    assert "OK" in str(report)


@pytest.mark.parametrize("string_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_every_arrow_string_layout_is_accepted(tmp_path, string_type):
    table = meds_table(patient_rows(1) + patient_rows(2))
    table = with_column(table, "code", table.column("code").cast(string_type))
    table = with_column(table, "text_value", table.column("text_value").cast(string_type))
    one_shard(tmp_path, table)
    assert validate_dataset(tmp_path, now=NOW).ok
    records = list(MedsDataset(tmp_path, now=NOW, batch_size=3).iter_patients())
    assert [r.events[-1].text_value for r in records] == ["note of 1", "note of 2"]


def test_optional_columns_may_be_absent(tmp_path):
    one_shard(tmp_path, meds_table(patient_rows(1)).drop_columns(["numeric_value", "text_value"]))
    assert validate_dataset(tmp_path, now=NOW).ok


# ------------------------------------------------------------------------------------------- schema
def test_missing_required_column(tmp_path):
    one_shard(tmp_path, meds_table(patient_rows(1)).drop_columns(["code"]))
    err = raised(tmp_path, MedsSchemaError)
    assert_names(err, file=SHARD, subject=None, field="code", problem="required column is missing")


@pytest.mark.parametrize(("column", "arrow_type", "found", "expected"), [
    ("numeric_value", pa.float64(), "double", "float"),
    ("time", pa.timestamp("ns"), "timestamp[ns]", "timestamp[us]"),
    ("subject_id", pa.int32(), "int32", "int64"),
    ("time", pa.timestamp("us", tz="UTC"), "timestamp[us, tz=UTC]", "timestamp[us]"),
])
def test_mistyped_column_names_found_and_expected_types(tmp_path, column, arrow_type, found, expected):
    table = meds_table(patient_rows(1))
    one_shard(tmp_path, with_column(table, column, table.column(column).cast(arrow_type)))
    err = raised(tmp_path, MedsSchemaError)
    assert_names(err, file=SHARD, subject=None, field=column, problem=f"wrong type: found {found}, expected {expected}")


def test_code_of_wrong_type(tmp_path):
    table = meds_table(patient_rows(1))
    one_shard(tmp_path, with_column(table, "code", pa.array(range(table.num_rows), pa.int64())))
    err = raised(tmp_path, MedsSchemaError)
    assert_names(err, file=SHARD, subject=None, field="code", problem="found int64, expected string or large_string")


# ------------------------------------------------------------------------------------------- order
def test_subject_ids_decreasing(tmp_path):
    one_shard(tmp_path, patient_rows(1) + patient_rows(3) + patient_rows(2))
    err = raised(tmp_path, MedsOrderError)
    assert_names(err, file=SHARD, subject=2, field="subject_id",
                 problem="rows out of order: subject 2 starts at row 10 after subject 3")


def test_time_decreasing_within_subject(tmp_path):
    rows = rows_with(4, [(4, datetime(2019, 5, 1), "ICD10CM//R05.1", None, None)])  # after 2020-01-03
    one_shard(tmp_path, patient_rows(3) + rows)
    err = raised(tmp_path, MedsOrderError)
    assert_names(err, file=SHARD, subject=4, field="time",
                 problem="1 row whose time is earlier than the row before (first at row 10)")


def test_static_row_after_timed_rows(tmp_path):
    one_shard(tmp_path, rows_with(5, [(5, None, "RACE//White", None, None)]))
    err = raised(tmp_path, MedsOrderError)
    assert_names(err, file=SHARD, subject=5, field="time",
                 problem="1 static row (null time) after timed rows (first at row 5); static rows must come before")


def test_subject_interrupted_by_another(tmp_path):
    rows1 = patient_rows(1)
    one_shard(tmp_path, rows1[:3] + patient_rows(2) + rows1[3:])
    err = raised(tmp_path, MedsOrderError)
    assert_names(err, file=SHARD, subject=1, field="subject_id",
                 problem="rows are not contiguous: 2 separate blocks (rows 0-2, then 8-9)")


def test_subject_in_two_shards(tmp_path):
    write_dataset(tmp_path, {"data/a.parquet": patient_rows(1) + patient_rows(2),
                             "data/b.parquet": patient_rows(2) + patient_rows(3)})
    err = raised(tmp_path, MedsOrderError)
    assert_names(err, file="data/a.parquet", subject=2, field="subject_id",
                 problem="subject also present in data/b.parquet")


def test_time_order_is_checked_across_batch_boundaries(tmp_path):
    rows = patient_rows(1, 6)
    rows[5], rows[6] = rows[6], rows[5]  # swap two timed rows
    one_shard(tmp_path, rows)
    for batch_size in (1, 2, 3, 6):
        err = raised(tmp_path, MedsOrderError, batch_size=batch_size)
        assert_names(err, file=SHARD, subject=1, field="time", problem="(first at row 6)")


# ------------------------------------------------------------------------------------------- values
def test_null_and_empty_codes(tmp_path):
    one_shard(tmp_path, rows_with(8, [(8, datetime(2021, 1, 1), None, None, None)]))
    assert_names(raised(tmp_path, MedsValueError), file=SHARD, subject=8, field="code",
                 problem="1 null code (first at row 5)")
    one_shard(tmp_path, rows_with(8, [(8, datetime(2021, 1, 1), "", None, None)]))
    assert_names(raised(tmp_path, MedsValueError), file=SHARD, subject=8, field="code",
                 problem="1 empty-string code (first at row 5)")


def test_nan_and_inf_values_counted_per_subject(tmp_path):
    bad = [(1042, datetime(2021, 1, 1, h), "LOINC//718-7", v, None) for h, v in
           enumerate([float("nan"), 1.0, float("inf"), float("-inf")])]
    one_shard(tmp_path, patient_rows(1000) + rows_with(1042, bad))
    for batch_size in (2, 1000):  # the count covers the subject's whole block, whatever the batches
        err = raised(tmp_path, MedsValueError, batch_size=batch_size)
        assert str(err) == (f"{SHARD}: subject 1042: field 'numeric_value': 3 NaN/inf values (first at row 10)")


def test_times_before_1900_and_in_the_future(tmp_path):
    one_shard(tmp_path, [(6, datetime(1899, 12, 31), "MEDS_BIRTH", None, None)] + patient_rows(6)[2:])
    assert_names(raised(tmp_path, MedsValueError), file=SHARD, subject=6, field="time",
                 problem="1 time before 1900-01-01 (first at row 0)")
    one_shard(tmp_path, rows_with(6, [(6, NOW + timedelta(days=1), "ENCOUNTER//AMB", None, None)]))
    assert_names(raised(tmp_path, MedsValueError), file=SHARD, subject=6, field="time",
                 problem="1 time after now (first at row 5)")
    assert validate_dataset(tmp_path, now=NOW + timedelta(days=2)).ok


def test_null_subject_id_is_a_file_problem(tmp_path):
    rows = patient_rows(1) + [(None, datetime(2021, 1, 1), "X", None, None)]
    one_shard(tmp_path, meds_table(rows, DATA_SCHEMA_NULLABLE))
    err = raised(tmp_path, MedsValueError)
    assert_names(err, file=SHARD, subject=None, field="subject_id", problem="1 null subject id (first at row 5)")


# ------------------------------------------------------------------------------------------- files
def test_empty_file_zero_rows(tmp_path):
    write_dataset(tmp_path, {"data/0.parquet": patient_rows(1), "data/1.parquet": meds_table([])})
    assert_names(raised(tmp_path, MedsFileError), file="data/1.parquet", subject=None, field=None,
                 problem="file has 0 rows")


def test_zero_byte_file(tmp_path):
    good_dataset(tmp_path)
    (tmp_path / "data/train/2.parquet").write_bytes(b"")
    assert_names(raised(tmp_path, MedsFileError), file="data/train/2.parquet", subject=None, field=None,
                 problem="file is empty (0 bytes)")


def test_corrupt_file(tmp_path):
    good_dataset(tmp_path)
    (tmp_path / "data/train/2.parquet").write_text("subject_id,time,code\n1,,GENDER//F\n")
    err = raised(tmp_path, MedsFileError)
    assert_names(err, file="data/train/2.parquet", subject=None, field=None, problem="not a readable parquet file")


def test_truncated_file(tmp_path):
    good_dataset(tmp_path)
    path = tmp_path / "data/train/1.parquet"
    path.write_bytes(path.read_bytes()[:-20])
    assert_names(raised(tmp_path, MedsFileError), file="data/train/1.parquet", subject=None, field=None,
                 problem="not a readable parquet file")


def test_missing_data_dir_and_no_shards(tmp_path):
    with pytest.raises(MedsFileError, match="dataset directory not found"):
        MedsDataset(tmp_path / "nowhere")
    with pytest.raises(MedsFileError, match=r"data: data directory not found"):
        MedsDataset(tmp_path)
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "data" / "train" / "README.txt").write_text("not a shard")
    for on_error in ("raise", "quarantine"):  # nothing to quarantine: always an error
        with pytest.raises(MedsFileError, match=r"no parquet shards found"):
            validate_dataset(tmp_path, on_error=on_error)


def test_no_raw_library_exception_escapes(tmp_path):
    """Garbage in every file position: only MedsDataError comes out."""
    good_dataset(tmp_path)
    (tmp_path / "data/train/0.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    with pytest.raises(MedsDataError):
        validate_dataset(tmp_path)
    report = validate_dataset(tmp_path, on_error="quarantine", now=NOW)
    assert report.quarantine.files == ["data/train/0.parquet"]


# ------------------------------------------------------------------------------------------- quarantine
def messy_dataset(root: Path) -> Path:
    """Good subjects 1, 2, 5, 9 around one bad subject per kind of subject problem, plus two bad files."""
    shard0 = (patient_rows(1) + patient_rows(2)
              + rows_with(3, [(3, datetime(2021, 1, 1), "LOINC//718-7", float("nan"), None)])
              + patient_rows(4)[:4] + [(4, datetime(2010, 1, 1), "X", None, None)])
    shard1 = patient_rows(5) + rows_with(6, [(6, NOW + timedelta(days=30), "ENCOUNTER//AMB", None, None)])
    shard2 = patient_rows(7) + patient_rows(9)
    shard3 = patient_rows(7)  # subject 7 also lives in shard 2
    table = meds_table(patient_rows(10))
    return write_dataset(root, {
        "data/0.parquet": shard0, "data/1.parquet": shard1, "data/2.parquet": shard2,
        "data/3.parquet": shard3,
        "data/4.parquet": with_column(table, "numeric_value", table.column("numeric_value").cast(pa.float64())),
        "data/5.parquet": meds_table([]),
    })


def test_quarantine_reports_and_goes_on(tmp_path):
    messy_dataset(tmp_path)
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW, batch_size=3)
    records = list(ds.iter_patients())
    assert [r.subject_id for r in records] == [1, 2, 5, 9]
    assert ds.quarantine.subjects == [3, 4, 6, 7]
    assert ds.quarantine.files == ["data/4.parquet", "data/5.parquet"]
    problems = {(e.subject_id, e.file, e.field) for e in ds.quarantine.entries}
    assert problems == {
        (3, "data/0.parquet", "numeric_value"), (4, "data/0.parquet", "time"), (6, "data/1.parquet", "time"),
        (7, "data/2.parquet", "subject_id"), (7, "data/3.parquet", "subject_id"),
        (None, "data/4.parquet", "numeric_value"), (None, "data/5.parquet", None),
    }
    # a second pass adds nothing new, and targeted reads skip quarantined subjects
    list(ds.iter_patients())
    assert len(ds.quarantine) == 7
    assert sorted(ds.load_patients([1, 3, 9])) == [1, 9]


def test_validation_report_counts_and_files(tmp_path):
    messy_dataset(tmp_path)
    report = validate_dataset(tmp_path, on_error="quarantine", now=NOW)
    assert not report.ok
    assert (report.files_checked, report.files_quarantined) == (6, 2)
    assert (report.subjects_checked, report.subjects_quarantined) == (8, 4)
    assert report.rows_checked == sum(pq.read_metadata(tmp_path / f"data/{i}.parquet").num_rows for i in range(4))
    assert report.issues_found == 7 and report.elapsed_s > 0
    text = str(report)
    assert "7 problems found" in text and "data/4.parquet: field 'numeric_value': wrong type" in text

    report.quarantine.write_json(tmp_path / "out" / "q.json")
    report.quarantine.write_parquet(tmp_path / "out" / "q.parquet")
    assert QuarantineReport.read_json(tmp_path / "out" / "q.json") == report.quarantine
    first = json.loads((tmp_path / "out" / "q.json").read_text())["entries"][0]  # file checks run first
    assert (first["subject_id"], first["file"], first["field"]) == (None, "data/4.parquet", "numeric_value")
    table = pq.read_table(tmp_path / "out" / "q.parquet")
    assert table.column_names == ["subject_id", "file", "field", "problem", "row"]
    assert table.num_rows == 7 and table.column("subject_id").null_count == 2


def test_raise_mode_stops_at_the_first_problem(tmp_path):
    messy_dataset(tmp_path)
    ds = MedsDataset(tmp_path, on_error="raise", now=NOW)
    with pytest.raises(MedsDataError):
        list(ds.iter_patients())
    assert len(ds.quarantine) == 0


def test_quarantined_subject_never_yielded_partially(tmp_path):
    """A problem in the last batch of a subject spanning many batches drops the whole subject."""
    rows = patient_rows(2, 40) + [(2, datetime(2021, 1, 1), "LOINC//718-7", float("inf"), None)]
    one_shard(tmp_path, patient_rows(1) + rows + patient_rows(3), row_group_size=7)
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW, batch_size=4)
    assert [r.subject_id for r in ds.iter_patients()] == [1, 3]
    assert [str(e) for e in ds.quarantine.entries] == [
        f"{SHARD}: subject 2: field 'numeric_value': 1 NaN/inf value (first at row 47)"]


def test_scan_excludes_quarantined_rows(tmp_path):
    messy_dataset(tmp_path)
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW)
    frame = ds.scan().collect()
    assert sorted(frame["subject_id"].unique().to_list()) == [1, 2, 5, 9]
    assert frame.columns == ["subject_id", "time", "code", "numeric_value", "text_value"]
    assert ds.validate() is ds.validate()  # validated once


def test_scan_raises_on_bad_data_in_raise_mode(tmp_path):
    messy_dataset(tmp_path)
    with pytest.raises(MedsDataError):
        MedsDataset(tmp_path, now=NOW).scan()


# ------------------------------------------------------------------------------------------- metadata
def test_metadata_missing_is_explicit(tmp_path, caplog):
    good_dataset(tmp_path)
    ds = MedsDataset(tmp_path)
    assert ds.dataset_metadata() is None
    assert len(ds.code_catalog()) == 0 and ds.subject_splits() == {}
    assert "codes.parquet not found" in caplog.text and "subject_splits.parquet not found" in caplog.text


def test_bad_codes_metadata(tmp_path):
    good_dataset(tmp_path)
    (tmp_path / "metadata").mkdir()
    codes = tmp_path / "metadata" / "codes.parquet"
    pq.write_table(pa.table({"code": ["A", None], "description": ["a", "b"]}), codes)
    with pytest.raises(MedsMetadataError, match=r"^metadata/codes.parquet: field 'code': 1 null value \(first at"):
        MedsDataset(tmp_path).code_catalog()
    pq.write_table(pa.table({"code": ["A", "B", "A"]}), codes)
    with pytest.raises(MedsMetadataError, match=r"field 'code': code 'A' appears twice \(rows 0 and 2\)"):
        MedsDataset(tmp_path).code_catalog()
    pq.write_table(pa.table({"code": ["A"], "description": [3]}), codes)
    with pytest.raises(MedsMetadataError, match="field 'description': wrong type: found int64"):
        MedsDataset(tmp_path).code_catalog()
    pq.write_table(pa.table({"description": ["a"]}), codes)
    with pytest.raises(MedsMetadataError, match="field 'code': required column is missing"):
        MedsDataset(tmp_path).code_catalog()
    codes.write_bytes(b"nonsense")
    with pytest.raises(MedsMetadataError, match=r"metadata/codes\.parquet: not a readable parquet file"):
        MedsDataset(tmp_path).code_catalog()


def test_bad_dataset_json(tmp_path):
    good_dataset(tmp_path)
    (tmp_path / "metadata").mkdir()
    path = tmp_path / "metadata" / "dataset.json"
    path.write_text("{not json")
    with pytest.raises(MedsMetadataError, match=r"^metadata/dataset.json: not readable JSON"):
        MedsDataset(tmp_path).dataset_metadata()
    path.write_text(json.dumps({"dataset_name": "x", "created_at": "yesterday"}))
    with pytest.raises(MedsMetadataError, match=r"^metadata/dataset.json: field 'created_at': "):
        MedsDataset(tmp_path).dataset_metadata()
    path.write_text("[1, 2]")
    with pytest.raises(MedsMetadataError, match="expected a JSON object"):
        MedsDataset(tmp_path).dataset_metadata()


def test_dataset_json_round_trip(tmp_path):
    good_dataset(tmp_path)
    write_dataset(tmp_path, {}, dataset_json={"dataset_name": "synthetic", "meds_version": "0.4.1",
                                              "created_at": "2025-01-01T10:00:00", "site_id_columns": ["site"],
                                              "custom_key": 1})
    meta = MedsDataset(tmp_path).dataset_metadata()
    assert (meta.dataset_name, meta.meds_version, meta.created_at, meta.site_id_columns) == (
        "synthetic", "0.4.1", datetime(2025, 1, 1, 10), ["site"])
    assert meta.model_extra == {"custom_key": 1}


def test_subject_splits(tmp_path):
    good_dataset(tmp_path)
    write_dataset(tmp_path, {}, splits={1: "train", 2: "tuning", 4: "held_out"})
    assert MedsDataset(tmp_path).subject_splits() == {1: "train", 2: "tuning", 4: "held_out"}
    pq.write_table(pa.table({"subject_id": pa.array([1, 1], pa.int64()), "split": ["train", "tuning"]}),
                   tmp_path / "metadata" / "subject_splits.parquet")
    with pytest.raises(MedsMetadataError, match="field 'subject_id': subject 1 appears twice"):
        MedsDataset(tmp_path).subject_splits()
    pq.write_table(pa.table({"subject_id": pa.array([1], pa.int32()), "split": ["train"]}),
                   tmp_path / "metadata" / "subject_splits.parquet")
    with pytest.raises(MedsMetadataError, match="field 'subject_id': wrong type: found int32, expected int64"):
        MedsDataset(tmp_path).subject_splits()


# ------------------------------------------------------------------------------------------- misc
def test_bad_arguments(tmp_path):
    good_dataset(tmp_path)
    with pytest.raises(ValueError, match="on_error"):
        MedsDataset(tmp_path, on_error="ignore")
    with pytest.raises(ValueError, match="naive"):
        MedsDataset(tmp_path, now=datetime(2025, 1, 1).astimezone())
    with pytest.raises(TypeError, match="integers"):
        MedsDataset(tmp_path).load_patients(["one"])


def test_errors_pickle_round_trip():
    import pickle

    err = MedsValueError("data/0.parquet", "3 NaN/inf values (first at row 12)", subject_id=4, field="numeric_value")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is MedsValueError and str(back) == str(err) and back.subject_id == 4


def test_row_groups_written_by_another_writer_still_validate(tmp_path):
    """A polars-written shard (large strings, its own row groups) is valid MEDS too."""
    import polars as pl

    table = meds_table(patient_rows(1) + patient_rows(2))
    (tmp_path / "data").mkdir()
    pl.from_arrow(table).write_parquet(tmp_path / "data" / "0.parquet", row_group_size=3)
    report = validate_dataset(tmp_path, now=NOW)
    assert report.ok and report.rows_checked == 10
    np.testing.assert_array_equal(
        [r.subject_id for r in MedsDataset(tmp_path, now=NOW).iter_patients()], [1, 2])


def test_write_shard_helper_keeps_schema(tmp_path):
    path = write_shard(tmp_path, "data/x.parquet", meds_table(patient_rows(1)))
    assert pq.read_schema(path).field("numeric_value").type == pa.float32()


def test_invalid_utf8_is_caught_without_echoing_the_bytes(tmp_path):
    table = meds_table(patient_rows(1) + patient_rows(2))
    texts = table.column("text_value").to_pylist()
    texts[9] = "secret \udcff note"  # row 9: subject 2's note, with a byte that is not UTF-8
    raw = pa.array([None if t is None else t.encode("utf-8", "surrogateescape") for t in texts], pa.large_binary())
    one_shard(tmp_path, with_column(table, "text_value", raw.view(pa.large_string())))
    err = raised(tmp_path, MedsFileError)
    assert_names(err, file=SHARD, subject=None, field="text_value", problem="corrupt values in the rows from 0")
    assert "secret" not in str(err)
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW)
    assert list(ds.iter_patients()) == [] and ds.quarantine.files == [SHARD]


def test_corrupted_bytes_never_leak_library_errors(tmp_path):
    """Random byte flips anywhere in a shard end in records or in a MedsDataError, never in a pyarrow error."""
    import random
    import shutil

    base = good_dataset(tmp_path / "base", [range(1, 60)], n_timed=12, row_group_size=100)
    data = (base / "data/train/0.parquet").read_bytes()
    outcomes = set()
    for seed in range(40):
        rng = random.Random(seed)
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 12)):
            flipped[rng.randrange(4, len(flipped) - 8)] = rng.randrange(256)
        root = tmp_path / f"c{seed}"
        shutil.copytree(base, root)
        (root / "data/train/0.parquet").write_bytes(bytes(flipped))
        try:
            list(MedsDataset(root, now=NOW, batch_size=97).iter_patients())
            outcomes.add("ok")
        except MedsDataError as exc:
            outcomes.add(type(exc).__name__)
        list(MedsDataset(root, on_error="quarantine", now=NOW, batch_size=97).iter_patients())
    assert "MedsFileError" in outcomes  # the flips did break things


# ------------------------------------------------------------------------------------------- vectorized = naive
def naive_row_problems(rows: list, first_row: int, now: datetime) -> dict[tuple[str, int], tuple[int, int]]:
    """The row checks written the slow, obvious way: (check, subject) -> (count, first row)."""
    found: dict[tuple[str, int], tuple[int, int]] = {}

    def hit(check: str, sid: int, row: int) -> None:
        count, first = found.get((check, sid), (0, row))
        found[(check, sid)] = (count + 1, min(first, row))

    for i, (sid, time, code, value, _text) in enumerate(rows):
        row = first_row + i
        if code is None:
            hit("null_code", sid, row)
        elif code == "":
            hit("empty_code", sid, row)
        if value is not None and not math.isfinite(value):
            hit("nonfinite_value", sid, row)
        if time is not None and time < datetime(1900, 1, 1):
            hit("time_before_1900", sid, row)
        if time is not None and time > now:
            hit("time_in_future", sid, row)
        if i > 0 and rows[i - 1][0] == sid and rows[i - 1][1] is not None:
            if time is None:
                hit("static_after_timed", sid, row)
            elif time < rows[i - 1][1]:
                hit("time_decreasing", sid, row)
    return found


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_vectorized_row_checks_agree_with_the_naive_ones(data):
    from vista.shared.meds.checks import find_row_problems

    n = data.draw(st.integers(1, 40))
    sids = sorted(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    times = st.none() | st.datetimes(datetime(1890, 1, 1), datetime(2030, 1, 1))
    codes = st.none() | st.sampled_from(["", "A", "LOINC//718-7"])
    values = st.none() | st.floats(width=32, allow_nan=True, allow_infinity=True)
    rows = [(sid, data.draw(times), data.draw(codes), data.draw(values), None) for sid in sids]
    pad = data.draw(st.integers(0, 5))  # slice the batch so every buffer has an offset
    padding = [(0, datetime(2000, 1, 1), "A", 1.0, None)] * pad
    table = meds_table(padding + rows, DATA_SCHEMA_NULLABLE)
    batch = table.combine_chunks().to_batches()[0].slice(pad)
    now = datetime(2025, 1, 1)
    explicit = data.draw(st.booleans())  # a contiguous batch (first row number) or one row number per row
    row_numbers = np.arange(100, 100 + n) if explicit else 100
    findings, _ = find_row_problems(batch, row_numbers, carry=None, now_us=epoch_us(now))
    got = {(f.check.name, sid): (count, first) for f in findings
           for sid, first, count in zip(f.subject_ids.tolist(), f.first_rows.tolist(), f.counts.tolist())}
    stored = [(sid, time, code, None if value is None else float(np.float32(value)), text)
              for sid, time, code, value, text in rows]
    assert got == naive_row_problems(stored, 100, now)
