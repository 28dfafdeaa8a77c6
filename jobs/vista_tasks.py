"""What the VISTA job works on: subjects of a MEDS dataset, label rows, or the patient XML files of a directory.

MEDS tasks are `TaskKey`s as in the predict job (the subjects are listed by Ray Data tasks that read only the
``subject_id`` column of each shard: `vista.meds.subjects`). An XML file is a task before anyone has read it — a malformed file has no
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

from vista.meds.labels import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID
from vista.meds.subjects import SHARD_PROBLEM, list_shard_subjects, unlistable_error

from vista.runs.errors import JobInputError
from jobs.ray_runtime import LIGHT_TASK_CPUS
from jobs.tasks import TaskKey

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
        raise unlistable_error(dataset, problems)
    return keys
