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
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.errors import JobInputError
from jobs.ray_runtime import LIGHT_TASK_CPUS
from jobs.tasks import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID, TaskKey

log = logging.getLogger("jobs.build_graphs")

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


def list_xml_tasks(xml_dir: Path, on_duplicate: str = "error") -> list[XmlTask]:
    """The XML files under ``xml_dir`` as tasks, in path order, by the one discovery rule of `vista.graph.xml_files`
    (recursive; two files with one patient id are a `JobInputError` naming both unless ``on_duplicate="first"``,
    which logs a warning per file skipped)."""
    from vista.graph.xml_files import XmlDirectoryError, list_xml_patients

    try:
        found, skipped = list_xml_patients(xml_dir, on_duplicate)  # type: ignore[arg-type]
    except XmlDirectoryError as exc:
        raise JobInputError(f"--xml-dir {exc}") from None
    for line in skipped:
        log.warning("%s", line)
    files = [file.relative for file in found]
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


SHARD_PROBLEM = "shard_problem"
"""Column of the subject listing: null for a subject row; for a shard whose subject ids cannot be read, the one row
naming the shard and the problem (subject_id null). A Ray Data UDF that raised would reach the driver as a Ray
traceback, without the message."""


def list_shard_subjects(batch: pa.Table, root: str) -> pa.Table:
    """Ray Data UDF: the distinct subject ids of each shard path in ``batch["shard"]`` (ids are unique to a shard),
    or a `SHARD_PROBLEM` row for a shard that cannot be read."""
    from vista.meds.errors import one_line

    ids, problems = [], []
    for shard in batch.column("shard").to_pylist():
        try:
            column = pq.read_table(Path(root) / shard, columns=[SUBJECT_ID]).column(SUBJECT_ID)
            found = column.unique().cast(pa.int64())
        except (OSError, pa.ArrowException) as exc:
            ids.append(pa.nulls(1, pa.int64()))
            problems.append(pa.array([f"{shard}: cannot read column subject_id ({one_line(exc)})"], pa.string()))
            continue
        found = found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found
        ids.append(found)
        problems.append(pa.nulls(len(found), pa.string()))
    empty = not ids
    return pa.table({SUBJECT_ID: pa.array([], pa.int64()) if empty else pa.concat_arrays(ids),
                     SHARD_PROBLEM: pa.array([], pa.string()) if empty else pa.concat_arrays(problems)})


def unusable_shards(dataset: Path) -> list[str]:
    """The shards of the MEDS dataset whose footer or schema is unusable (truncated, not parquet, empty, a column
    missing or mistyped), one line each naming the file; reads no rows, on the driver, before Ray starts.
    A dataset without data/ or shards raises `MedsFileError`."""
    from vista.meds.reader import MedsDataset

    meds = MedsDataset(dataset, on_error="quarantine")
    meds.check_files()
    return [str(entry) for entry in meds.quarantine.entries]


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
    problems: list[str] = []
    for batch in subject_source(dataset).iter_batches(batch_size=None, batch_format="pyarrow"):
        problems += [p for p in batch.column(SHARD_PROBLEM).to_pylist() if p is not None]
        keys.extend(TaskKey(int(s)) for s in batch.column(SUBJECT_ID).to_pylist() if s is not None)
    if problems:
        raise JobInputError(_unlistable(dataset, problems))
    return keys


def _unlistable(dataset: Path, problems: list[str]) -> str:
    shown = "; ".join(sorted(problems)[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    return (f"{dataset}: the subjects of {len(problems)} shard(s) cannot be listed: {shown}. Fix or move those files "
            f"(`trajonco validate {dataset} --quarantine` lists every problem), or pass --labels to run the subjects "
            "of a label file (theirs then get error rows)")


def check_listable(dataset: Path) -> None:
    """`JobInputError` naming every unusable shard (footer, schema) of the dataset: a whole-dataset run lists its
    subjects from every shard, so it cannot start without them."""
    problems = unusable_shards(dataset)
    if problems:
        raise JobInputError(_unlistable(dataset, problems))
