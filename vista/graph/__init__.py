"""The MEDS Graph (VISTA's source-faithful layer): one provenance-linked graph per patient, persisted as GraphML.

`build_graph` turns a `PatientRecord` (or an XML patient document, via `read_patient_xml`: the project's
``<patient>`` documents or the VISTA team's ``<eventstream>`` files) into a `PatientGraph`;
`write_graph`/`read_graph` persist it as GraphML (the exchange format) and `write_columnar`/`read_columnar` as Arrow
IPC (what a store loads: ~1 ms for 10k nodes); `GraphStore` builds a cohort's graphs once, skips unchanged patients,
and keeps a columnar node index (parquet parts under ``index/``) to query the cohort without loading every graph —
the one store layout `vista graph` and `jobs.build_graphs` write.
"""

from vista.graph.build import (
    DEFAULT_CONFIG,
    EncounterWindows,
    GivenEncounter,
    GraphConfig,
    GraphSource,
    build_graph,
    source_from_record,
)
from vista.graph.columnar import read_columnar, write_columnar
from vista.graph.errors import GraphFileError, GraphInputError
from vista.graph.eventstream import source_from_eventstream
from vista.graph.graphml import read_graph, write_graph
from vista.graph.index import INDEX_SCHEMA, index_table
from vista.graph.model import (
    CareSite,
    EdgeType,
    GraphCode,
    GraphEncounter,
    GraphEvent,
    GraphSection,
    NodeType,
    PatientGraph,
    PatientInfo,
    Provider,
)
from vista.graph.store import GraphStore, StoreEntry, StoreReport, content_hash, is_graph_store
from vista.graph.xml_input import encounter_xml, read_patient_xml, source_from_xml

__all__ = [
    "DEFAULT_CONFIG",
    "CareSite",
    "INDEX_SCHEMA",
    "EdgeType",
    "EncounterWindows",
    "GivenEncounter",
    "GraphCode",
    "GraphConfig",
    "GraphEncounter",
    "GraphEvent",
    "GraphFileError",
    "GraphInputError",
    "GraphSection",
    "GraphSource",
    "GraphStore",
    "NodeType",
    "PatientGraph",
    "PatientInfo",
    "Provider",
    "StoreEntry",
    "StoreReport",
    "build_graph",
    "content_hash",
    "encounter_xml",
    "index_table",
    "is_graph_store",
    "read_columnar",
    "read_graph",
    "read_patient_xml",
    "source_from_eventstream",
    "source_from_record",
    "source_from_xml",
    "write_columnar",
    "write_graph",
]
