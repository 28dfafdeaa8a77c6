"""The MEDS writer: validation with clear errors, atomic writes, and faithful round trips."""

from __future__ import annotations

import json
from datetime import datetime

import meds
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vista.shared.meds import schema, writer
from vista.shared.atomic import atomic_path
from vista.shared.meds.writer import MedsWriteError, write_codes, write_data_shard, write_dataset_metadata, write_subject_splits
from vista.shared.records import CodeInfo


def _table(rows):
    return pa.table({
        "subject_id": pa.array([r[0] for r in rows], pa.int64()),
        "time": pa.array([r[1] for r in rows], pa.timestamp("us")),
        "code": pa.array([r[2] for r in rows], pa.string()),
        "numeric_value": pa.array([r[3] for r in rows], pa.float32()),
        "text_value": pa.array([r[4] for r in rows], pa.large_string()),
    }, schema=schema.DATA_SCHEMA)


ROWS = [
    (1, None, "GENDER//F", None, None),
    (1, datetime(1950, 1, 1), "MEDS_BIRTH", None, None),
    (1, datetime(2020, 1, 1, 9), "ENCOUNTER//AMB", None, None),
    (1, datetime(2020, 1, 1, 9, 45), "LOINC//718-7", 11.5, None),
    (1, datetime(2020, 1, 1, 10, 30), "NOTE//PROGRESS", None, "Office visit\nAll well."),
    (2, None, "GENDER//M", None, None),
    (2, datetime(2021, 5, 3, 8), "ENCOUNTER//ED", None, None),
]


def test_data_shard_round_trip(tmp_path):
    path = tmp_path / "data" / "train" / "0.parquet"
    assert write_data_shard(_table(ROWS), path) == len(ROWS)
    back = pq.read_table(path)
    assert back.schema.equals(schema.DATA_SCHEMA)
    assert back.to_pylist() == _table(ROWS).to_pylist()
    meds.DataSchema.validate(back)
    assert [p.name for p in path.parent.iterdir()] == ["0.parquet"]


def test_unsorted_rows_are_rejected_with_subject_and_file(tmp_path):
    rows = [ROWS[0], ROWS[2], ROWS[1]]
    path = tmp_path / "x.parquet"
    with pytest.raises(MedsWriteError, match=r"x\.parquet.*not sorted.*subject 1"):
        write_data_shard(_table(rows), path)
    assert not path.exists()


def test_wrong_column_type_is_rejected(tmp_path):
    table = _table(ROWS)
    table = table.set_column(3, "numeric_value", table.column("numeric_value").cast(pa.float64()))
    with pytest.raises(MedsWriteError, match="numeric_value.*float"):
        write_data_shard(table, tmp_path / "x.parquet")


def test_null_code_is_rejected(tmp_path):
    table = _table(ROWS)
    codes = pa.array(["GENDER//F", None, "A", "B", "C", "D", "E"], pa.string())
    table = table.set_column(2, "code", codes)
    with pytest.raises(MedsWriteError, match="'code' has null"):
        write_data_shard(table, tmp_path / "x.parquet")


def test_failed_write_leaves_no_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "data" / "0.parquet"
    write_data_shard(_table(ROWS), path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        with open(args[1], "wb") as fh:
            fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(writer.pq, "write_table", boom)
    with pytest.raises(OSError, match="disk full"):
        write_data_shard(_table(ROWS[:2]), path)
    assert path.read_bytes() == before, "a failed write must not touch the existing file"
    assert sorted(p.name for p in path.parent.iterdir()) == ["0.parquet"]


def test_atomic_path_renames_only_on_success(tmp_path):
    target = tmp_path / "sub" / "f.txt"
    with atomic_path(target) as tmp:
        tmp.write_text("hello")
        assert not target.exists()
    assert target.read_text() == "hello"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("other")
            raise RuntimeError("stop")
    assert target.read_text() == "hello"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_codes_metadata_with_units(tmp_path):
    infos = [CodeInfo("LOINC//718-7", "Hemoglobin", (), "g/dL"), CodeInfo("ICD10CM//C34.11", "Lung, right upper lobe", ("ICD10CM//C34.1",))]
    path = write_codes(tmp_path, infos)
    table = pq.read_table(path)
    meds.CodeMetadataSchema.validate(table)
    assert table.column("unit").to_pylist() == ["g/dL", None]
    assert table.column("parent_codes").to_pylist() == [[], ["ICD10CM//C34.1"]]
    with pytest.raises(MedsWriteError, match="duplicate codes"):
        write_codes(tmp_path, infos + infos[:1])


def test_subject_splits_sorted_and_unique(tmp_path):
    path = write_subject_splits(tmp_path, [5, 2, 9], ["train", "tuning", "held_out"])
    table = pq.read_table(path)
    assert table.to_pylist() == [{"subject_id": 2, "split": "tuning"}, {"subject_id": 5, "split": "train"}, {"subject_id": 9, "split": "held_out"}]
    with pytest.raises(MedsWriteError, match="duplicate subject"):
        write_subject_splits(tmp_path, [1, 1], ["train", "train"])
    with pytest.raises(MedsWriteError, match="2 subject ids but 1 splits"):
        write_subject_splits(tmp_path, [1, 2], ["train"])


def test_dataset_metadata_is_stable_json(tmp_path):
    path = write_dataset_metadata(tmp_path, dataset_name="x", meds_version="0.4.1")
    assert json.loads(path.read_text()) == {"dataset_name": "x", "meds_version": "0.4.1"}
    first = path.read_bytes()
    write_dataset_metadata(tmp_path, meds_version="0.4.1", dataset_name="x")
    assert path.read_bytes() == first
    with pytest.raises(MedsWriteError, match="unknown dataset metadata fields"):
        write_dataset_metadata(tmp_path, bogus=1)
