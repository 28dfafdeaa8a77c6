"""What the VISTA job works on: subjects of a MEDS dataset, label rows, or the patient XML files of a directory.

MEDS tasks are `TaskKey`s as in the predict job (the subjects are listed by Ray Data tasks that read only the
``subject_id`` column of each shard). An XML file is a task before anyone has read it — a malformed file has no
patient id to offer — so its key's ``subject_id`` is a stable 62-bit number derived from the file's path relative to
the directory (`file_key`); the patient's own id goes into its output row. The file travels with its key through
Ray Data in the ``xml_file`` column.

>>> file_key("p/7.xml") == file_key("p/7.xml") != file_key("p/8.xml"), 0 < file_key("p/7.xml") < 2**62
(True, True)
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.errors import JobInputError
from jobs.ray_runtime import LIGHT_TASK_CPUS
from jobs.tasks import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID, TaskKey

XML_FILE = "xml_file"
"""Column of an XML task's file path (relative to ``--xml-dir``)."""


def file_key(relative_path: str) -> int:
    """A stable positive 62-bit key for an XML file (blake2b of its relative path; 0 is never returned)."""
    digest = hashlib.blake2b(relative_path.encode("utf-8"), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 2) or 1


@dataclass(frozen=True, slots=True)
class XmlTask:
    """One XML patient file as a task."""

    key: TaskKey
    file: str  # relative to the XML directory


def list_xml_tasks(xml_dir: Path) -> list[XmlTask]:
    """Every ``*.xml`` file under ``xml_dir`` (recursively), in path order (`JobInputError` when there is none)."""
    if not xml_dir.is_dir():
        raise JobInputError(f"{xml_dir}: --xml-dir is not a directory")
    files = sorted(str(p.relative_to(xml_dir)) for p in xml_dir.rglob("*.xml") if p.is_file())
    if not files:
        raise JobInputError(f"{xml_dir}: no *.xml patient files found")
    tasks = [XmlTask(TaskKey(file_key(f)), f) for f in files]
    seen: dict[int, str] = {}
    for task in tasks:
        other = seen.setdefault(task.key.subject_id, task.file)
        if other != task.file:  # 62-bit keys: about one chance in 10^8 for a million files
            raise JobInputError(f"{xml_dir}: files {other!r} and {task.file!r} have the same task key; rename one")
    return tasks


def xml_dataset(tasks: list[XmlTask], block_rows: int):
    """Ray Data: the given XML tasks (key columns + ``xml_file``) in blocks of about ``block_rows`` rows."""
    import ray.data

    items = [{SUBJECT_ID: t.key.subject_id, PREDICTION_TIME: None, BOOLEAN_VALUE: None, XML_FILE: t.file} for t in tasks]
    return ray.data.from_items(items, override_num_blocks=max(1, math.ceil(len(items) / block_rows)))


def list_shard_subjects(batch: pa.Table, root: str) -> pa.Table:
    """Ray Data UDF: the distinct subject ids of each shard path in ``batch["shard"]`` (ids are unique to a shard)."""
    ids = []
    for shard in batch.column("shard").to_pylist():
        column = pq.read_table(Path(root) / shard, columns=[SUBJECT_ID]).column(SUBJECT_ID)
        ids.append(column.unique().cast(pa.int64()))
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in ids]
    return pa.table({SUBJECT_ID: pa.concat_arrays(arrays) if arrays else pa.array([], pa.int64())})


def subject_source(dataset: Path):
    """Ray Data: one row per subject of the MEDS dataset (a task per shard reads its subject_id column)."""
    import ray.data

    from vista.meds.reader import MedsDataset

    shards = MedsDataset(dataset).shards
    return ray.data.from_items([{"shard": s} for s in shards], override_num_blocks=len(shards)).map_batches(
        list_shard_subjects, fn_kwargs={"root": str(dataset)}, batch_size=1, batch_format="pyarrow",
        num_cpus=LIGHT_TASK_CPUS,
    )


def dataset_task_keys(dataset: Path) -> list[TaskKey]:
    """The whole-record task of every subject of the MEDS dataset (only subject ids reach the driver)."""
    keys: list[TaskKey] = []
    for batch in subject_source(dataset).iter_batches(batch_size=None, batch_format="pyarrow"):
        keys.extend(TaskKey(int(s)) for s in batch.column(SUBJECT_ID).to_pylist())
    return keys


def with_null_times(batch: pa.Table) -> pa.Table:
    """Ray Data UDF: add the null ``prediction_time`` of whole-record tasks."""
    return batch.append_column(PREDICTION_TIME, pa.nulls(batch.num_rows, pa.timestamp("us")))
