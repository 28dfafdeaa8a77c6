"""What the VISTA job works on, as Ray Data: subjects of a MEDS dataset (listed by Ray Data tasks that read only the
``subject_id`` column of each shard: `vista.shared.meds.subjects`) or the patient XML files of a directory
(`vista.graph.xml_files`: each file a task keyed by its relative path; the file travels with its key in the
``xml_file`` column).
"""

from __future__ import annotations

import math
from pathlib import Path

from jobs.ray_runtime import LIGHT_TASK_CPUS
from vista.graph.xml_files import XmlFile
from vista.shared.meds.labels import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID
from vista.shared.meds.subjects import SHARD_PROBLEM, list_shard_subjects, unlistable_error
from vista.shared.meds.task_key import TaskKey

XML_FILE = "xml_file"
"""Column of an XML task's file path (relative to ``--xml-dir``)."""


def xml_dataset(files: list[XmlFile], block_rows: int):
    """Ray Data: the given XML files' tasks (key columns + ``xml_file``) in blocks of about ``block_rows`` rows."""
    import ray.data

    items = [{SUBJECT_ID: f.key.subject_id, PREDICTION_TIME: None, BOOLEAN_VALUE: None, XML_FILE: f.relative}
             for f in files]
    return ray.data.from_items(items, override_num_blocks=max(1, math.ceil(len(items) / block_rows)))


def subject_source(dataset: Path):
    """Ray Data: one row per subject of the MEDS dataset (a task per shard reads its subject_id column)."""
    import ray.data

    from vista.shared.meds.reader import MedsDataset

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
