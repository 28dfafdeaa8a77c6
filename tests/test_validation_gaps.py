"""Bad inputs that used to pass silently or end in a traceback: each is now named (file, subject, row) and counted.

Duplicate rows, a subject splits file that disagrees with the data, `validate --quarantine`'s exit status, `trajonco
cohort` on unusable data, the VISTA job on a shard it cannot list, and the reason a read left a subject out.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from meds_builders import NOW, good_dataset, meds_table, patient_rows, write_dataset

from trajonco.cli import main
from vista.shared.meds.duplicates import DuplicateMarker, find_duplicates, write_deduplicated
from vista.shared.meds.errors import MedsDataError, MedsFileError, MedsMetadataError, MedsSubjectNotFoundError
from vista.shared.meds.labels import read_label_table
from vista.shared.meds.reader import MedsDataset
from vista.shared.meds.reports import QuarantineReport
from vista.shared.meds.validation import deduplicate_dataset, validate_dataset

SHARD = "data/train/0.parquet"
SPLITS = {1: "train", 2: "train", 3: "tuning", 4: "held_out", 5: "held_out"}


def with_duplicates(root: Path, **kwargs) -> Path:
    """Subjects 1-3; subject 1's lab row (row 3) twice, subject 3's note (row 14) three times; subject 2 has a lab
    value that differs only in its value (not a duplicate)."""
    rows1, rows2, rows3 = patient_rows(1), patient_rows(2, 4), patient_rows(3)
    rows1.insert(4, rows1[3])  # rows 3 and 4 equal
    rows2.insert(4, (2, rows2[3][1], rows2[3][2], 99.0, None))  # same time and code, other value
    rows3 += [rows3[-1], rows3[-1]]
    return write_dataset(root, {SHARD: rows1 + rows2 + rows3}, **kwargs)


def corrupt_column(path: Path, column: str, row_group: int = 0) -> None:
    """Overwrite one column chunk of a parquet file with 0xFF bytes (the footer stays intact)."""
    metadata = pq.read_metadata(path)
    names = [metadata.schema.column(j).path for j in range(metadata.num_columns)]
    chunk = metadata.row_group(row_group).column(names.index(column))
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start:start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


# ------------------------------------------------------------------------------------------- duplicate rows
def test_validation_counts_duplicates_with_file_subjects_and_an_example(tmp_path):
    with_duplicates(tmp_path, splits={1: "train", 2: "train", 3: "train"})
    for batch_size in (1, 2, 5, 65_536):  # runs of equal rows cut by batch boundaries anywhere
        report = validate_dataset(tmp_path, now=NOW, batch_size=batch_size)
        assert report.ok and report.duplicate_rows == 3
        [warning] = [w for w in report.warnings if w.kind == "duplicates"]
        assert (warning.file, warning.count, warning.subject_id, warning.row) == (SHARD, 3, 1, 4)
        assert str(warning) == (f"{SHARD}: 3 exact duplicate rows (every column equal to an earlier row) in 2 subjects"
                                " (e.g. subject 1: row 4 repeats row 3)")
    assert "OK, 3 warnings" in str(report) and "row 4 repeats row 3" in str(report)  # + 2 missing metadata files


def test_rows_differing_in_an_extension_column_are_not_duplicates(tmp_path):
    rows = patient_rows(1)
    table = meds_table(rows + [rows[-1]])
    table = table.append_column("visit_id", pa.array([None] * (len(rows) - 1) + [10, 11], pa.int64()))
    write_dataset(tmp_path, {SHARD: table})
    assert validate_dataset(tmp_path, now=NOW).duplicate_rows == 0
    table = table.set_column(5, "visit_id", pa.array([None] * (len(rows) - 1) + [10, 10], pa.int64()))
    write_dataset(tmp_path, {SHARD: table})
    assert validate_dataset(tmp_path, now=NOW).duplicate_rows == 1


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_duplicate_marker_agrees_with_a_whole_file_comparison(data):
    """Batch by batch with a carried run, the marker finds exactly the rows polars finds on the whole sorted file."""
    n = data.draw(st.integers(1, 60))
    keys = sorted(data.draw(st.lists(st.tuples(st.integers(0, 3), st.none() | st.integers(0, 4)), min_size=n,
                                     max_size=n)), key=lambda k: (k[0], k[1] is not None, k[1] or 0))
    codes = data.draw(st.lists(st.sampled_from(["A", "B"]), min_size=n, max_size=n))
    values = data.draw(st.lists(st.none() | st.sampled_from([1.0, 2.0]), min_size=n, max_size=n))
    table = pa.table({"subject_id": pa.array([k[0] for k in keys], pa.int64()),
                      "time": pa.array([k[1] for k in keys], pa.timestamp("us")), "code": codes,
                      "numeric_value": pa.array(values, pa.float32())})
    batch_size = data.draw(st.integers(1, n))
    marker = DuplicateMarker()
    got = np.concatenate([marker.mark(b) for b in table.to_batches(max_chunksize=batch_size)])
    expected = ~pl.from_arrow(table).select(pl.struct(pl.all()).is_first_distinct()).to_series().to_numpy()
    assert got.tolist() == expected.tolist() and marker.total == int(expected.sum())


def test_fix_duplicates_writes_a_checked_copy_and_leaves_the_input_alone(tmp_path, capsys):
    source = with_duplicates(tmp_path / "in", splits={1: "train", 2: "train", 3: "train"},
                             dataset_json={"dataset_name": "dups"})
    before = (source / SHARD).read_bytes()
    out = tmp_path / "fixed"
    assert main(["validate", str(source), "--fix-duplicates", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: a copy of the dataset without its 3 exact duplicate rows (1 of 1 data files changed)" in printed
    assert (source / SHARD).read_bytes() == before
    expected = pl.read_parquet(source / SHARD).unique(maintain_order=True)
    assert pl.read_parquet(out / SHARD).equals(expected)
    assert pq.read_schema(out / SHARD).equals(pq.read_schema(source / SHARD))
    for meta in ("metadata/subject_splits.parquet", "metadata/dataset.json"):
        assert (out / meta).read_bytes() == (source / meta).read_bytes()
    assert validate_dataset(out, now=NOW).duplicate_rows == 0
    # an existing copy is never overwritten; a copy inside the dataset is refused
    assert main(["validate", str(source), "--fix-duplicates", str(out)]) == 2
    assert "must be a new or empty directory" in capsys.readouterr().err  # said before the validation pass
    with pytest.raises(MedsFileError, match="must go outside the dataset"):
        write_deduplicated(source, [SHARD], source / "copy")


def test_duplicates_without_the_option_print_how_to_drop_them(tmp_path, capsys):
    with_duplicates(tmp_path)
    assert main(["validate", str(tmp_path)]) == 0
    assert "3 exact duplicate rows: `trajonco validate" in capsys.readouterr().out
    assert main(["validate", str(tmp_path), "--strict"]) == 1


def test_fix_duplicates_refuses_a_dataset_with_problems(tmp_path, capsys):
    rows = patient_rows(1) + patient_rows(2)
    rows.append((2, datetime(2021, 1, 1), "LOINC//718-7", math.nan, None))
    write_dataset(tmp_path / "in", {SHARD: rows + [rows[-1]]})
    out = tmp_path / "fixed"
    assert main(["validate", str(tmp_path / "in"), "--quarantine", "--fix-duplicates", str(out)]) == 1
    assert "--fix-duplicates: no copy written" in capsys.readouterr().out and not out.exists()
    with pytest.raises(MedsDataError, match="subject 2: field 'numeric_value'"):
        deduplicate_dataset(tmp_path / "in", out)
    assert not out.exists() and not list(tmp_path.glob(".fixed.partial-*"))


def test_finding_and_dropping_agree_on_every_shard(tmp_path):
    """find_duplicates and write_deduplicated agree on every shard of a multi-shard dataset."""
    root = with_duplicates(tmp_path / "in")
    write_dataset(root, {"data/train/1.parquet": patient_rows(7) + patient_rows(7)[-1:]})
    shards = MedsDataset(root).shards
    found = {f.shard: f.rows for f in find_duplicates(root, shards)}
    assert found == {SHARD: 3, "data/train/1.parquet": 1}
    written = {f.shard: f.rows for f in write_deduplicated(root, shards, tmp_path / "out")}
    assert written == found
    assert {f.rows for f in find_duplicates(tmp_path / "out", shards)} == {0}


# ------------------------------------------------------------------------------------------- subject splits
def test_splits_listing_absent_subjects_and_omitting_present_ones_are_warned(tmp_path):
    good_dataset(tmp_path)  # subjects 1-5
    write_dataset(tmp_path, {}, splits={1: "train", 2: "train", 101: "held_out", 102: "held_out", 103: "tuning"})
    report = validate_dataset(tmp_path, now=NOW)
    assert report.ok
    splits = [w for w in report.warnings if w.kind == "splits"]
    assert [(w.file, w.count) for w in splits] == [("metadata/subject_splits.parquet", 3)] * 2
    assert "lists 3 of its 5 subjects that have no rows in the data (e.g. 101, 102, 103)" in splits[0].problem
    assert "omits 3 of the 5 subjects that have rows in the data (e.g. 3, 4, 5)" in splits[1].problem
    write_dataset(tmp_path, {}, splits=SPLITS)
    assert not [w for w in validate_dataset(tmp_path, now=NOW).warnings if w.kind == "splits"]


def test_splits_warning_counts_subjects_of_quarantined_files_as_unsearched(tmp_path):
    good_dataset(tmp_path)
    write_dataset(tmp_path, {}, splits=SPLITS)
    truncate(tmp_path / "data/train/1.parquet")  # subjects 4 and 5
    report = validate_dataset(tmp_path, on_error="quarantine", now=NOW)
    [warning] = [w for w in report.warnings if w.kind == "splits"]
    assert "lists 2 of its 5 subjects that have no rows in the data (e.g. 4, 5)" in warning.problem
    assert "1 quarantined data file may hold some" in warning.problem


def test_missing_and_broken_metadata(tmp_path):
    good_dataset(tmp_path)
    report = validate_dataset(tmp_path, now=NOW)
    assert report.ok and not report.clean
    assert {w.file for w in report.warnings if w.kind == "metadata"} == {
        "metadata/codes.parquet", "metadata/dataset.json", "metadata/subject_splits.parquet"}
    write_dataset(tmp_path, {}, splits=SPLITS)
    (tmp_path / "metadata/codes.parquet").write_bytes(b"not parquet")
    with pytest.raises(MedsMetadataError, match=r"^metadata/codes\.parquet: not a readable parquet file"):
        validate_dataset(tmp_path, now=NOW)
    report = validate_dataset(tmp_path, on_error="quarantine", now=NOW)
    assert not report.ok and report.quarantine.files == ["metadata/codes.parquet"]


def test_cohort_reading_the_splits_warns_with_counts_and_examples(tmp_path, caplog):
    from cohort_meds import Patient, day
    from cohort_meds import write_dataset as write_cohort_dataset

    from trajonco.cohorts.source import read_splits

    people = [Patient(i, visits=[day(10), day(400)]) for i in range(1, 6)]
    root = write_cohort_dataset(tmp_path / "meds", people)
    pl.DataFrame({"subject_id": [1, 2, 3, 900, 901], "split": ["held_out"] * 5}).write_parquet(
        root / "metadata/subject_splits.parquet")
    with caplog.at_level(logging.WARNING, logger="trajonco.cohorts.source"):
        splits = read_splits(root)
    assert splits.height == 5
    messages = [r.getMessage() for r in caplog.records if r.name == "trajonco.cohorts.source"]
    assert any("lists 2 of its 5 subjects that have no rows in the data (e.g. 900, 901)" in m for m in messages)
    assert any("omits 2 of the 5 subjects that have rows in the data (e.g. 4, 5)" in m for m in messages)
    assert all(m.startswith(str(root / "metadata/subject_splits.parquet")) for m in messages)


# ------------------------------------------------------------------------------------------- validate --quarantine
def messy(root: Path) -> Path:
    rows = patient_rows(1) + patient_rows(2) + [(2, datetime(2021, 1, 1), "LOINC//718-7", math.inf, None)]
    good_dataset(root)
    write_dataset(root, {"data/train/0.parquet": rows}, splits={1: "train", 2: "train", 4: "train", 5: "train"})
    truncate(root / "data/train/1.parquet")
    return root


def test_quarantine_exits_non_zero_and_says_where_the_report_is(tmp_path, capsys):
    messy(tmp_path / "ds")
    assert main(["validate", str(tmp_path / "ds"), "--quarantine"]) == 1
    out = capsys.readouterr().out
    assert "2 problems found" in out and "quarantined 1 file and 1 subject" in out
    assert "the quarantine report was not written: add --report" in out
    for name in ("q.json", "q.parquet"):
        assert main(["validate", str(tmp_path / "ds"), "--quarantine", "--report", str(tmp_path / name)]) == 1
        assert f"quarantine report (2 entries) written to {tmp_path / name}" in capsys.readouterr().out
    entries = QuarantineReport.read_json(tmp_path / "q.json").entries
    assert [(e.subject_id, e.file, e.field, e.row) for e in entries] == [
        (None, "data/train/1.parquet", None, None), (2, "data/train/0.parquet", "numeric_value", 10)]
    table = pq.read_table(tmp_path / "q.parquet")
    assert table.column("row").to_pylist() == [None, 10]


def test_quarantine_on_a_clean_dataset_exits_zero_and_still_writes_the_report(tmp_path, capsys):
    good_dataset(tmp_path / "ds")
    assert main(["validate", str(tmp_path / "ds"), "--quarantine", "--report", str(tmp_path / "q.json")]) == 0
    assert json.loads((tmp_path / "q.json").read_text()) == {"entries": []}
    assert main(["validate", str(tmp_path / "ds"), "--report", str(tmp_path / "q.json")]) == 2
    assert "--report goes with --quarantine" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- trajonco cohort
@pytest.fixture()
def cohort_root(tmp_path: Path) -> Path:
    from cohort_meds import Patient, day
    from cohort_meds import write_dataset as write_cohort_dataset

    regular = [day(100 * k) for k in range(25)]
    codes = [(day(1500), "ICD10CM//C34.11"), (day(1530), "ICD10CM//C34.11")]
    people = [Patient(i, visits=regular, codes=codes) for i in range(1, 5)]
    people += [Patient(i, visits=regular) for i in range(20, 28)]
    people += [Patient(i, split="train", visits=regular, codes=codes) for i in range(40, 44)]
    people += [Patient(i, split="train", visits=regular) for i in range(50, 58)]
    return write_cohort_dataset(tmp_path / "meds", people)


def cohort_error(root: Path, out: Path, capsys, *extra: str) -> str:
    assert main(["cohort", "lung", "--dataset", str(root), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and "cohort is empty" not in err
    return err


def test_cohort_names_a_truncated_shard_instead_of_an_empty_cohort(cohort_root, tmp_path, capsys):
    truncate(cohort_root / "data/held_out/0.parquet")
    err = cohort_error(cohort_root, tmp_path / "c", capsys)
    assert f"{cohort_root / 'data/held_out/0.parquet'}: not a readable parquet file" in err


def test_cohort_names_a_shard_missing_a_column_or_empty(cohort_root, tmp_path, capsys):
    shard = cohort_root / "data/train/0.parquet"  # not the first file: polars' own schema check never sees it
    pq.write_table(pq.read_table(shard).drop_columns(["code"]), shard)
    err = cohort_error(cohort_root, tmp_path / "c", capsys)
    assert f"{shard}: field 'code': required column is missing" in err
    pq.write_table(meds_table([]), shard)
    assert f"{shard}: file has 0 rows" in cohort_error(cohort_root, tmp_path / "c", capsys)


def test_cohort_names_the_file_behind_a_corrupt_page(cohort_root, tmp_path, capsys):
    corrupt_column(cohort_root / "data/train/0.parquet", "code")
    err = cohort_error(cohort_root, tmp_path / "c", capsys)
    assert f"{cohort_root / 'data/train/0.parquet'}: read failed near row 0" in err


def test_cohort_validate_option_stops_at_bad_rows_and_keeps_results_on_good_data(cohort_root, tmp_path, capsys):
    assert main(["cohort", "lung", "--dataset", str(cohort_root), "--out", str(tmp_path / "a")]) == 0
    assert main(["cohort", "lung", "--dataset", str(cohort_root), "--out", str(tmp_path / "b"), "--validate"]) == 0
    capsys.readouterr()
    for name in ("test", "train"):
        a, b = (pl.from_arrow(read_label_table(tmp_path / d / "labels" / f"{name}.parquet")) for d in "ab")
        assert a.equals(b)
    shard = cohort_root / "data/held_out/0.parquet"
    table = pq.read_table(shard)
    times = table.column("time").to_pylist()
    times[-1] = datetime(2999, 1, 1)  # the last row, subject 27's, in the future
    pq.write_table(table.set_column(1, "time", pa.array(times, pa.timestamp("us"))), shard)
    err = cohort_error(cohort_root, tmp_path / "c", capsys, "--validate")
    assert "subject 27: field 'time': 1 time after now" in err


# ------------------------------------------------------------------------------------------- why a subject is left out
def test_unknown_subjects_name_the_unsearched_file_and_its_problem(tmp_path):
    good_dataset(tmp_path)
    truncate(tmp_path / "data/train/1.parquet")
    ds = MedsDataset(tmp_path, on_error="quarantine", now=NOW)
    with pytest.raises(MedsSubjectNotFoundError) as info:
        ds.load_patients([4])
    assert ("1 requested subject is not in the dataset: 4 (1 quarantined files were not searched: "
            "data/train/1.parquet: not a readable parquet file") in str(info.value)


def test_a_subject_dropped_with_its_file_gets_the_file_row_and_problem(tmp_path):
    from vista.shared.meds.patient_loader import PatientLoader

    good_dataset(tmp_path, [range(1, 9)], row_group_size=10)  # 5 rows per subject: subjects 5-6 in row group 2
    corrupt_column(tmp_path / SHARD, "code", row_group=2)
    loaded = PatientLoader(tmp_path).load([1, 5])
    assert sorted(sid for sid, value in loaded.items() if not isinstance(value, Exception)) == [1]
    err = loaded[5]
    assert isinstance(err, MedsDataError) and (err.file, err.subject_id) == (SHARD, 5)
    assert "read failed near row 20" in str(err) and "the whole file was left out, with this subject's rows 20-24" in str(err)


def test_a_quarantined_subject_gets_its_file_field_and_row(tmp_path):
    from vista.shared.meds.patient_loader import PatientLoader

    rows = patient_rows(1) + patient_rows(2) + [(2, datetime(2021, 1, 1), "LOINC//718-7", math.nan, None)]
    write_dataset(tmp_path, {SHARD: rows})
    err = PatientLoader(tmp_path).load([2])[2]
    assert isinstance(err, MedsDataError) and (err.file, err.subject_id, err.field) == (SHARD, 2, "numeric_value")
    assert "1 NaN/inf value (first at row 10)" in str(err)


# ------------------------------------------------------------------------------------------- the VISTA job
def test_build_graphs_names_a_truncated_shard_before_starting_ray(tmp_path, capsys):
    from jobs import build_graphs

    good_dataset(tmp_path / "ds")
    truncate(tmp_path / "ds/data/train/1.parquet")
    assert build_graphs.main(["--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "the subjects of 1 shard(s) cannot be listed: data/train/1.parquet: not a readable parquet file" in err
    assert "Traceback" not in err and not (tmp_path / "out" / "patients.parquet").exists()


def test_listing_a_shard_with_a_corrupt_subject_column_gives_a_problem_row(tmp_path):
    from vista.shared.meds.subjects import SHARD_PROBLEM, list_shard_subjects

    good_dataset(tmp_path)
    corrupt_column(tmp_path / "data/train/1.parquet", "subject_id")
    listed = list_shard_subjects(pa.table({"shard": ["data/train/0.parquet", "data/train/1.parquet"]}), str(tmp_path))
    assert listed.column("subject_id").to_pylist() == [1, 2, 3, None]
    problems = listed.column(SHARD_PROBLEM).to_pylist()
    assert problems[:3] == [None] * 3 and problems[3].startswith("data/train/1.parquet: cannot read column subject_id")


@pytest.mark.ray
@pytest.mark.slow
def test_build_graphs_on_ray_turns_unreadable_shards_into_a_message_or_error_rows(ray_session, tmp_path):
    from jobs import build_graphs

    def run(argv: list[str]):
        return build_graphs.run(build_graphs.build_parser().parse_args(argv))

    good_dataset(tmp_path / "ds")
    corrupt_column(tmp_path / "ds/data/train/1.parquet", "subject_id")  # the footer is fine: only Ray's listing fails
    with pytest.raises(MedsFileError, match=r"data/train/1\.parquet: cannot read column subject_id"):
        run(["--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "a")])

    truncate(tmp_path / "ds/data/train/1.parquet")  # subjects 4 and 5: their label rows become error rows
    labels = tmp_path / "labels.parquet"
    pq.write_table(pa.table({"subject_id": pa.array([1, 4], pa.int64()),
                             "prediction_time": pa.array([datetime(2024, 1, 1)] * 2, pa.timestamp("us")),
                             "boolean_value": [False, False]}), labels)
    summary = run(["--dataset", str(tmp_path / "ds"), "--labels", str(labels), "--out", str(tmp_path / "b"),
                   "--actors", "1"])
    assert summary.complete and summary.totals == {"error": 1, "ok": 1}
    rows = pl.read_parquet(tmp_path / "b" / "patients.parquet").sort("subject_id")
    error = rows.row(1, named=True)
    assert (error["subject_id"], error["status"], error["error_stage"], error["error_kind"]) == (4, "error", "load",
                                                                                                 "data")
    assert "data/train/1.parquet: not a readable parquet file" in error["error"]
