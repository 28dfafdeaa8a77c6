"""`trajonco profile` at scale: a sample by default (said so), and ``--all-rows`` streaming every shard with only
per-code counts — the same report as counting every row in memory."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trajonco.cli import main
from vista.shared.coding import detect
from vista.shared.coding.detect import profile_report

CODES = ["Gender/F", "Visit/OP", "SNOMED/254637007", "LOINC/8480-6", "XX//1", "Gender/M", "SNOMED/73761001"]
TABLES = ["person", "visit", "condition", "measurement", "observation", "person", "procedure"]


def _dataset(root: Path, shards: int = 3, subjects: int = 7) -> Path:
    """OMOP-spelled shards with a source-table column; some subjects lack a sex row."""
    (root / "data").mkdir(parents=True)
    for shard in range(shards):
        ids, times, codes, tables = [], [], [], []
        for s in range(subjects):
            sid = shard * 100 + s
            for k in range(3 + s):
                code = CODES[(s + k) % len(CODES)]
                ids.append(sid)
                times.append(datetime(2020, 1, 1 + k))
                codes.append(code)
                tables.append(TABLES[CODES.index(code)])
        pq.write_table(pa.table({"subject_id": pa.array(ids, pa.int64()), "time": pa.array(times, pa.timestamp("us")),
                                 "code": codes, "numeric_value": pa.nulls(len(ids), pa.float32()),
                                 "table": tables}), root / "data" / f"{shard}.parquet")
    return root


@pytest.mark.parametrize("profile", [None, "omop"])
def test_all_rows_streamed_equal_every_row_counted_in_memory(tmp_path, monkeypatch, profile):
    root = _dataset(tmp_path / "ds")
    in_memory = profile_report(root, profile, sample_rows=10**9)
    monkeypatch.setattr(detect, "DETECTION_SAMPLE_ROWS", 5)  # past the detection sample: the streaming route
    monkeypatch.setattr(detect, "_best", lambda rows, columns: (detect.load_profile("omop"), in_memory.scores))
    streamed = profile_report(root, profile)
    assert not streamed.sampled and streamed.rows == in_memory.rows > 5
    assert streamed == in_memory
    assert 0 < streamed.subjects_with_sex < 1


def test_profile_reads_a_sample_by_default_and_says_so(tmp_path, capsys, monkeypatch):
    root = _dataset(tmp_path / "ds")
    monkeypatch.setattr(detect, "DETECTION_SAMPLE_ROWS", 10)
    assert main(["profile", str(root)]) == 0
    out = capsys.readouterr().out
    assert "(sample)" in out and "--all-rows counts every row" in out
    assert main(["profile", str(root), "--all-rows"]) == 0
    out = capsys.readouterr().out
    assert "(sample)" not in out and "rows 126," in out  # 3 shards of 3 + 4 + ... + 9 rows
