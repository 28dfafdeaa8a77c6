"""A job's tasks in a graph store: each task's graph source, its persisted graph and the folder of its timeline and
display, so a cohort job's output directory *is* a `vista.graph.GraphStore`.

Actors write each task's graph where the store keeps it (a record appended to ``OUT/graphs/<bucket>/pack-<n>.vgp``
under the bucket's lock, through `vista.graph.store.persist_graph`, which skips an unchanged graph by its content
hash) and one index
part per batch (`vista.graph.store.write_index_part`); the driver registers the run's graphs in the store's manifest
at the end (`vista.graph.GraphStore.register_rows`). So ``vista ask/source/display/evaluate --store OUT`` open a
job's output as they open a store `vista graph` built. Timelines and displays of whole-record tasks go where those
commands look (``OUT/toa/<subject>.json``, ``OUT/display/<subject>.json``); a label task's (a record cut at a
prediction time) go to its own folder, ``OUT/tasks/<bucket>/<task>/``.

>>> task_folder(Path("out"), TaskKey(7)), task_folder(Path("out"), TaskKey(107, datetime(2021, 3, 1)))
(PosixPath('out'), PosixPath('out/tasks/07/107_20210301T000000'))
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from vista.graph.build import DEFAULT_CONFIG, GraphConfig, GraphSource, source_from_record
from vista.graph.eventstream import XML_PROFILE
from vista.graph.store import GraphOutcome, bucket_of, persist_graph
from vista.graph.xml_input import source_from_xml
from vista.shared.meds.task_key import TaskKey
from vista.shared.records import CodeCatalog, PatientRecord

TASKS_DIR = "tasks"


def task_folder(out: Path, key: TaskKey) -> Path:
    """Where a task's timeline and display stores live: OUT itself for a whole record (``vista`` commands find them
    there), ``OUT/tasks/<bucket>/<task>`` for a record cut at a prediction time."""
    if key.prediction_time is None:
        return Path(out)
    return Path(out) / TASKS_DIR / bucket_of(key.subject_id) / key.name


def meds_source(record: PatientRecord, catalog: CodeCatalog, prediction_time: datetime | None) -> GraphSource:
    """The graph source of a MEDS task: the whole record, or static rows and events strictly before the time."""
    return source_from_record(record if prediction_time is None else record.before(prediction_time), catalog)


def xml_source(path: Path, profile: str | None = None) -> GraphSource:
    """The graph source of a patient XML file (`GraphInputError` naming the file for unreadable or bad documents);
    ``profile`` spells an ``<eventstream>`` file's codes (default: the VISTA XML profile)."""
    path = Path(path)
    return source_from_xml(path, path=str(path), profile=profile or XML_PROFILE)


def persist_task_graph(source: GraphSource, out: Path, key: TaskKey, *, config: GraphConfig = DEFAULT_CONFIG,
                       need_graph: bool, xml_file: Path | None = None) -> GraphOutcome:
    """The task's graph in the store at ``out`` (built and written, or the stored one when its hash is current); the
    manifest is not touched (register the outcome once its index rows are in a part)."""
    return persist_graph(out, source, task=key.name, key=key.subject_id, prediction_time=key.prediction_time,
                         config=config, need_graph=need_graph, xml_file=xml_file)
