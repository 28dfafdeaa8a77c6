"""The VISTA job's cohort node index: the per-task index files joined in task order, in large row groups, and a
clear error naming an unreadable per-task file."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graph_fixtures import synth_records
from jobs.errors import JobError
from jobs.tasks import TaskKey
from jobs.vista_graphs import TASK_INDEX_SCHEMA, meds_source, persist_graph
from jobs.vista_index import consolidate_index

TASKS = 6


@pytest.fixture(scope="module")
def job_out(tmp_path_factory) -> tuple[Path, list[str]]:
    """A job output folder with the per-task index files of ``TASKS`` patients and a patients.parquet naming them
    (plus one error row without an index)."""
    out = tmp_path_factory.mktemp("vista_out")
    records, catalog = synth_records()
    files = [persist_graph(meds_source(records[sid], catalog, None), out, TaskKey(sid), need_graph=False).index_file
             for sid in sorted(records)[:TASKS]]
    return out, files


def _patients(out: Path, files: list[str | None], name: str = "patients.parquet") -> Path:
    path = out / name
    pq.write_table(pa.table({"index_file": pa.array(files, pa.string())}), path)
    return path


def test_the_cohort_index_is_every_task_index_in_task_order_in_large_row_groups(job_out):
    out, files = job_out
    order = files[::-1]  # the order patients.parquet gives, not the folders'
    expected = pa.concat_tables([pq.read_table(out / f, schema=TASK_INDEX_SCHEMA).replace_schema_metadata(None)
                                 for f in order])
    per_group = expected.num_rows // 3 + 1
    report = consolidate_index(out, _patients(out, [*order, None]), row_group_rows=per_group)
    assert (report.graphs, report.nodes) == (TASKS, expected.num_rows)
    written = pq.read_table(report.path)
    assert written.schema.equals(TASK_INDEX_SCHEMA) and written.equals(expected)
    groups = [pq.ParquetFile(report.path).metadata.row_group(i).num_rows
              for i in range(pq.ParquetFile(report.path).metadata.num_row_groups)]
    assert len(groups) < TASKS and max(groups) <= per_group and sum(groups) == expected.num_rows


def test_no_task_with_an_index_gives_an_empty_index(job_out, tmp_path):
    report = consolidate_index(tmp_path, _patients(tmp_path, [None, None]))
    assert (report.graphs, report.nodes) == (0, 0) and pq.read_table(report.path).schema.equals(TASK_INDEX_SCHEMA)


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_an_unreadable_task_index_is_named(job_out, tmp_path, damage):
    out, files = job_out
    copy = tmp_path / "out"
    for relative in files:
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes((out / relative).read_bytes())
    bad = copy / files[2]
    if damage == "corrupt":
        bad.write_bytes(b"not parquet")
    else:
        bad.unlink()
    with pytest.raises(JobError, match=rf"{bad}: graph index named by patients.parquet is unreadable"):
        consolidate_index(copy, _patients(copy, files))
    assert not (copy / "index.parquet").exists()
