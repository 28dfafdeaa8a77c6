"""The columnar node index of graphs: one row per node, so a cohort can be queried without loading its graphs.

Columns: ``subject_id``, ``node_id`` (the event id for source events), ``type`` (node type name), ``code``, ``time``,
``end`` (encounters), ``value``, ``encounter`` (node id of the event's encounter; an encounter's own id),
``encounter_type`` (of that encounter), ``row`` (provenance row or line), ``title`` (sections).

>>> from datetime import datetime
>>> import polars as pl
>>> from vista.graph.build import build_graph
>>> from vista.shared.records import CodeCatalog, Event, PatientRecord
>>> rec = PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2021, 3, 1, 9), "ENCOUNTER//AMB", None, None),
...     Event("e1", datetime(2021, 3, 1, 9, 30), "NOTE//RADIOLOGY", None, "Impression: clear.")])
>>> index = pl.from_arrow(index_table(build_graph(rec, CodeCatalog())))
>>> index.filter(pl.col("type") == "note").select("subject_id", "node_id", "encounter", "encounter_type").rows()
[(7, 'e1', 'e0', 'AMB')]
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vista.graph.model import NODE_TYPES, NodeType, PatientGraph

INDEX_SCHEMA = pa.schema([
    pa.field("subject_id", pa.int64(), nullable=False),
    pa.field("node_id", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("code", pa.string()),
    pa.field("time", pa.timestamp("us")),
    pa.field("end", pa.timestamp("us")),
    pa.field("value", pa.float64()),
    pa.field("encounter", pa.string()),
    pa.field("encounter_type", pa.string()),
    pa.field("row", pa.int64()),
    pa.field("title", pa.string()),
])
_TYPE_NAMES = pa.array([t.value for t in NODE_TYPES], pa.string())


def index_table(graph: PatientGraph) -> pa.Table:
    """The index rows of one graph (`INDEX_SCHEMA`), in node order."""
    nodes = graph.nodes
    n = nodes.num_rows
    types = nodes.column("type").combine_chunks()
    is_encounter = pc.equal(types, NodeType.ENCOUNTER.code)
    own = pa.array(np.arange(n, dtype=np.int32))
    encounter_row = pc.if_else(is_encounter, own, nodes.column("encounter").combine_chunks())
    ids = nodes.column("id").combine_chunks()
    return pa.table({
        "subject_id": pa.array(np.full(n, graph.subject_id, np.int64)),
        "node_id": ids,
        "type": _TYPE_NAMES.take(types),
        "code": nodes.column("code"),
        "time": nodes.column("time"),
        "end": nodes.column("end"),
        "value": nodes.column("value"),
        "encounter": ids.take(encounter_row),
        "encounter_type": nodes.column("encounter_type").combine_chunks().take(encounter_row),
        "row": nodes.column("row"),
        "title": nodes.column("title"),
    }, schema=INDEX_SCHEMA)


TASK_INDEX_SCHEMA = pa.schema([pa.field("task", pa.string(), nullable=False),
                               pa.field("prediction_time", pa.timestamp("us")), *INDEX_SCHEMA])
"""Rows of a graph store's index parts: `INDEX_SCHEMA` led by the graph's task (the subject id for a whole record,
``<subject>_<time>`` for a record cut at a prediction time) and that prediction time (null: the whole record)."""


def task_index_table(graph: PatientGraph, task: str, prediction_time=None) -> pa.Table:
    """`index_table` of ``graph`` led by its task's name and prediction time (`TASK_INDEX_SCHEMA`)."""
    nodes = index_table(graph)
    n = nodes.num_rows
    return pa.table([pa.array([task] * n, pa.string()), pa.array([prediction_time] * n, pa.timestamp("us")),
                     *nodes.columns], schema=TASK_INDEX_SCHEMA)
