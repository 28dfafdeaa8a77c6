"""`MedsDataset` streams patients correctly: whole blocks across batches, right ids and provenance, targeted reads."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from meds_builders import NOW, good_dataset, meds_table, patient_rows, write_dataset

from vista.shared.meds.errors import MedsSubjectNotFoundError
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import CodeInfo, Event


def read_row(root, shard: str, row: int) -> dict:
    return pq.read_table(root / shard).slice(row, 1).to_pylist()[0]


def assert_provenance_matches_source(root, record) -> None:
    """Every event of ``record`` equals the shard row its provenance points at."""
    table = pq.read_table(root / record.shard)
    for event in record.events:
        ref = record.provenance(event.event_id)
        assert ref.shard == record.shard
        row = table.slice(ref.row, 1).to_pylist()[0]
        assert row["subject_id"] == record.subject_id
        assert (row["time"], row["code"], row["text_value"]) == (event.time, event.code, event.text_value)
        if row["numeric_value"] is None:
            assert event.numeric_value is None
        else:
            assert np.float32(event.numeric_value) == np.float32(row["numeric_value"])


def test_subject_spanning_batches_and_row_groups(tmp_path):
    good_dataset(tmp_path, [(1, 2, 3), (4,)], n_timed=25, row_group_size=7)
    for batch_size in (1, 2, 5, 64):
        ds = MedsDataset(tmp_path, now=NOW, batch_size=batch_size)
        records = list(ds.iter_patients())
        assert [r.subject_id for r in records] == [1, 2, 3, 4]
        assert [(r.shard, r.first_row) for r in records] == [
            ("data/train/0.parquet", 0), ("data/train/0.parquet", 27), ("data/train/0.parquet", 54),
            ("data/train/1.parquet", 0)]
        for record in records:
            assert [e.event_id for e in record.events] == [f"e{k}" for k in range(27)]
            assert_provenance_matches_source(tmp_path, record)


def test_events_keep_source_values(tmp_path):
    good_dataset(tmp_path, [(7,)], n_timed=3)
    record = MedsDataset(tmp_path, now=NOW).load_patients([7])[7]
    assert record.events == [
        Event("e0", None, "GENDER//F", None, None),
        Event("e1", datetime(1950, 6, 1), "MEDS_BIRTH", None, None),
        Event("e2", datetime(2020, 1, 1), "ENCOUNTER//AMB", None, None),
        Event("e3", datetime(2020, 1, 2), "LOINC//718-7", 11.2, None),  # the float32 read back as the decimal meant
        Event("e4", datetime(2020, 1, 3), "NOTE//PROGRESS", None, "note of 7"),
    ]
    assert record.demographics.sex == "F"


def test_targeted_reads_match_the_full_stream(tmp_path):
    good_dataset(tmp_path, [range(1, 30), range(30, 45), range(45, 60)], n_timed=4, row_group_size=10)
    full = {r.subject_id: r for r in MedsDataset(tmp_path, now=NOW).iter_patients()}
    ds = MedsDataset(tmp_path, now=NOW, batch_size=3)
    wanted = [44, 2, 59, 2, 30, 17]
    got = ds.load_patients(wanted)
    assert sorted(got) == sorted(set(wanted))
    for sid, record in got.items():
        assert record == full[sid]
    assert [r.subject_id for r in ds.iter_patients(wanted)] == [2, 17, 30, 44, 59]  # dataset order
    assert ds.subject_ids() == list(range(1, 60))


def test_targeted_reads_touch_only_the_row_groups_needed(tmp_path, monkeypatch):
    good_dataset(tmp_path, [range(1, 41), range(41, 81)], n_timed=3, row_group_size=10)  # 5 rows per subject
    read_groups: list[tuple[str, list[int], tuple[str, ...]]] = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, row_groups=None, columns=None, **kwargs):
        read_groups.append((self.metadata.num_rows, list(row_groups), tuple(columns)))
        return original(self, *args, row_groups=row_groups, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    ds = MedsDataset(tmp_path, now=NOW, profile="meds_synth")  # a given profile: no detection sample is read
    records = ds.load_patients([3, 4, 39])
    assert sorted(records) == [3, 4, 39]
    # subjects 3-4 sit in rows 10-19 (row group 1), subject 39 in rows 190-194 (row group 19) of shard 0
    assert read_groups == [(200, [1], ("subject_id", "time", "code", "numeric_value", "text_value")),
                           (200, [19], ("subject_id", "time", "code", "numeric_value", "text_value"))]
    # row-group statistics keep shard 1 from being opened beyond its footer
    assert set(ds._layouts) == {"data/train/0.parquet"}


def test_subject_spanning_row_groups_is_read_whole(tmp_path):
    good_dataset(tmp_path, [(1, 2, 3)], n_timed=8, row_group_size=4)  # 10 rows per subject
    ds = MedsDataset(tmp_path, now=NOW, batch_size=3)
    record = ds.load_patients([2])[2]
    assert (record.first_row, len(record.events)) == (10, 10)
    assert_provenance_matches_source(tmp_path, record)


def test_unknown_subjects_raise_before_reading(tmp_path):
    good_dataset(tmp_path)
    ds = MedsDataset(tmp_path, now=NOW)
    with pytest.raises(MedsSubjectNotFoundError) as info:
        ds.iter_patients([1, 77, 78])  # raised at the call, not at the first next()
    assert info.value.field == "subject_id" and info.value.subject_id is None
    assert "2 requested subjects are not in the dataset: 77, 78" in str(info.value)
    assert str(info.value).startswith(str(tmp_path))


def test_unknown_subjects_mention_quarantined_files(tmp_path):
    good_dataset(tmp_path)
    (tmp_path / "data/train/9.parquet").write_bytes(b"")
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW)
    with pytest.raises(MedsSubjectNotFoundError, match=r"1 quarantined files were not searched"):
        ds.load_patients([77])
    assert sorted(ds.load_patients([1, 5])) == [1, 5]


def test_empty_request(tmp_path):
    good_dataset(tmp_path)
    assert MedsDataset(tmp_path, now=NOW).load_patients([]) == {}


def test_code_catalog_round_trip(tmp_path):
    codes = pa.table({
        "code": ["LOINC//718-7", "ICD10CM//C34.11", "MEDS_BIRTH"],
        "description": ["Hemoglobin [Mass/volume] in Blood",
                        "Malignant neoplasm of upper lobe, right bronchus or lung", None],
        "parent_codes": pa.array([["LOINC//LP14449-0"], ["ICD10CM//C34.1", None], None], pa.list_(pa.string())),
        "unit": ["g/dL", None, None],
    })
    good_dataset(tmp_path)
    write_dataset(tmp_path, {}, codes=codes)
    catalog = MedsDataset(tmp_path).code_catalog()
    assert dict(catalog) == {
        "LOINC//718-7": CodeInfo("LOINC//718-7", "Hemoglobin [Mass/volume] in Blood", ("LOINC//LP14449-0",), "g/dL"),
        "ICD10CM//C34.11": CodeInfo("ICD10CM//C34.11", "Malignant neoplasm of upper lobe, right bronchus or lung",
                                    ("ICD10CM//C34.1",), None),
        "MEDS_BIRTH": CodeInfo("MEDS_BIRTH"),
    }
    assert catalog.describe("CPT//99213") == CodeInfo("CPT//99213")


def test_code_catalog_without_optional_columns(tmp_path):
    good_dataset(tmp_path)
    write_dataset(tmp_path, {}, codes=pa.table({"code": pa.array(["A", "B"], pa.large_string())}))
    assert list(MedsDataset(tmp_path).code_catalog().values()) == [CodeInfo("A"), CodeInfo("B")]


def test_dataset_pickles_to_its_settings(tmp_path):
    good_dataset(tmp_path)
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW, batch_size=17)
    list(ds.iter_patients())
    copy = pickle.loads(pickle.dumps(ds))
    assert (copy.root, copy.on_error, copy.now, copy.batch_size, copy.shards) == (
        ds.root, ds.on_error, ds.now, ds.batch_size, ds.shards)
    assert list(copy.iter_patients()) == list(ds.iter_patients())


def test_scan_matches_the_files(tmp_path):
    good_dataset(tmp_path, row_group_size=3)
    frame = MedsDataset(tmp_path, now=NOW).scan().collect()
    expected = pa.concat_tables([pq.read_table(tmp_path / f"data/train/{i}.parquet") for i in range(2)])
    assert frame.height == expected.num_rows
    assert frame["subject_id"].to_list() == expected.column("subject_id").to_pylist()
    assert frame["code"].to_list() == expected.column("code").to_pylist()


def test_scan_fills_optional_columns_missing_from_some_shards(tmp_path):
    write_dataset(tmp_path, {"data/0.parquet": meds_table(patient_rows(1)).drop_columns(["numeric_value"]),
                             "data/1.parquet": meds_table(patient_rows(2)).drop_columns(["text_value"])})
    frame = MedsDataset(tmp_path, now=NOW).scan().collect()
    assert frame["numeric_value"].to_list()[:5] == [None] * 5
    assert frame["numeric_value"].to_list()[8] == pytest.approx(11.2)
    assert frame["text_value"].to_list()[4] == "note of 1" and frame["text_value"].to_list()[9] is None


def test_shards_are_sorted_relative_paths(tmp_path):
    write_dataset(tmp_path, {"data/train/1.parquet": patient_rows(2), "data/held_out/0.parquet": patient_rows(3),
                             "data/train/0.parquet": patient_rows(1)})
    (tmp_path / "data/train/.done").write_text("")
    assert MedsDataset(tmp_path).shards == ("data/held_out/0.parquet", "data/train/0.parquet", "data/train/1.parquet")


# ------------------------------------------------------------------------------------------- property
@st.composite
def sorted_tables(draw):
    """Random valid MEDS shards: sorted subjects, static rows first, non-decreasing times, random values."""
    n_shards = draw(st.integers(1, 3))
    ids = sorted(draw(st.sets(st.integers(-5, 10**12), min_size=1, max_size=12)))
    cuts = sorted(draw(st.lists(st.integers(0, len(ids)), min_size=n_shards - 1, max_size=n_shards - 1)))
    groups = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)])]
    shards = {}
    for i, group in enumerate(groups):
        rows = []
        for sid in group:
            n_static = draw(st.integers(0, 2))
            offsets = sorted(draw(st.lists(st.integers(0, 10**6), min_size=0 if n_static else 1, max_size=12)))
            rows += [(sid, None, f"STATIC//{k}", None, None) for k in range(n_static)]
            for off in offsets:
                value = draw(st.none() | st.floats(-1e6, 1e6, width=32))
                text = draw(st.none() | st.text(max_size=5))
                time = datetime(2000, 1, 1) + timedelta(minutes=off)
                rows.append((sid, time, draw(st.sampled_from("ABC")), value, text))
        if rows:
            shards[f"data/{i}.parquet"] = rows
    return shards


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shards=sorted_tables(), batch_size=st.integers(1, 9), row_group_size=st.integers(1, 9), data=st.data())
def test_iter_patients_returns_exactly_the_input_rows(tmp_path_factory, shards, batch_size, row_group_size, data):
    root = write_dataset(tmp_path_factory.mktemp("prop"), shards, row_group_size=row_group_size)
    expected: dict[int, list[tuple]] = {}
    for shard, rows in shards.items():
        for sid, time, code, value, text in rows:
            stored = None if value is None else float(np.float32(value))
            expected.setdefault(sid, []).append((shard, time, code, stored, text))
    ds = MedsDataset(root, now=NOW, batch_size=batch_size)

    def as_rows(record):
        return [(record.shard, e.time, e.code, None if e.numeric_value is None else float(np.float32(e.numeric_value)),
                 e.text_value) for e in record.events]

    records = list(ds.iter_patients())
    assert [r.subject_id for r in records] == list(expected)
    for record in records:
        assert as_rows(record) == expected[record.subject_id]
        assert [e.event_id for e in record.events] == [f"e{k}" for k in range(len(record.events))]
        last_row = record.provenance(record.events[-1].event_id).row
        assert read_row(root, record.shard, last_row)["subject_id"] == record.subject_id

    subset = data.draw(st.lists(st.sampled_from(list(expected)), max_size=4))
    loaded = ds.load_patients(subset)
    assert sorted(loaded) == sorted(set(subset))
    for sid, record in loaded.items():
        assert as_rows(record) == expected[sid]
        assert record.first_row == next(r.first_row for r in records if r.subject_id == sid)
