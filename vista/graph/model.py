"""`PatientGraph`: one patient's MEDS Graph held as two arrow tables (nodes, edges) with typed, read-only accessors.

Nodes (one row each, in this order): the patient; its patient-level events (static rows and the birth); its
encounters (one per ``ENCOUNTER//`` row, one per visit id no ``ENCOUNTER//`` row carries, plus a per-day
pseudo-encounter for events outside every visit) in start order; its clinical events (every other source row, notes included) in (time, row) order; the sections
of the notes; the codes used (with their catalog ancestors). A source event's node id is its event id (``e<k>``),
so provenance (`RowRef`) and the TOA layer's ``source_event_refs`` resolve with one dictionary lookup. The id is
positional (row ``first_row + k``), so a ref means something only with the graph version it was made against
(`PatientInfo.content_hash`): stored timelines and displays record it and every read checks it — see
`vista.toa.refs` for why ids are versioned rather than content-derived.

Edges (typed, directed): patient ─has_encounter→ encounter ─has_event→ event (patient ─has_event→ patient-level
event); every source event ─has_code→ code ─is_a→ parent code; note ─has_section→ section ─mentions→ code;
encounter ─next→ encounter and event ─next→ event along time.

Source events also keep the dataset's own spelling of their code (``source_code``, when the canonical ``code``
differs), their visit id, and the source attributes no column holds (``attributes``: an XML event's provider_id,
care_site_id, note_id, source table…). The providers and care sites a source describes are graph-level facts
(`PatientInfo.providers`, `PatientInfo.care_sites`) that events refer to by id (`PatientGraph.provider_of`).

>>> from datetime import datetime
>>> from vista.graph.build import build_graph
>>> from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
>>> rec = PatientRecord(7, "data/train/0.parquet", 100, [
...     Event("e0", None, "GENDER//F", None, None),
...     Event("e1", datetime(1950, 3, 1), "MEDS_BIRTH", None, None),
...     Event("e2", datetime(2020, 1, 5, 9), "ENCOUNTER//AMB", None, None),
...     Event("e3", datetime(2020, 1, 5, 9, 30), "LOINC//718-7", 11.2, None),
...     Event("e4", datetime(2020, 1, 5, 10), "NOTE//PROGRESS", None, "Findings: anemia.\\nPlan: iron."),
... ])
>>> catalog = CodeCatalog([CodeInfo("LOINC//718-7", "Hemoglobin", unit="g/dL"), CodeInfo("ICD10CM//D64.9", "Anemia")])
>>> g = build_graph(rec, catalog)
>>> [e.event_id for e in g.events_in_order()], g.event("e3").unit, g.provenance("e3")
(['e3', 'e4'], 'g/dL', RowRef(shard='data/train/0.parquet', row=103))
>>> [(s.title, s.text) for s in g.sections("e4")]
[('Findings', 'Findings: anemia.\\n'), ('Plan', 'Plan: iron.')]
>>> g.neighbors("e2", EdgeType.HAS_EVENT), g.neighbors("e3", EdgeType.NEXT)
(['e3', 'e4'], ['e4'])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Literal, TypeVar

import numpy as np
import pyarrow as pa

from vista.shared.records import Demographics, RowRef

E = TypeVar("E")


class NodeType(StrEnum):
    """Kinds of node. ``ENCOUNTER`` nodes of real visits are also source events (their ``ENCOUNTER//`` row)."""

    PATIENT = "patient"
    ENCOUNTER = "encounter"
    EVENT = "event"
    NOTE = "note"
    SECTION = "section"
    CODE = "code"

    @property
    def code(self) -> int:
        """The int8 stored in the node table's ``type`` column."""
        return _NODE_CODE[self]


class EdgeType(StrEnum):
    """Kinds of directed edge."""

    HAS_ENCOUNTER = "has_encounter"  # patient → encounter
    HAS_EVENT = "has_event"  # encounter → event (or patient → patient-level event)
    HAS_CODE = "has_code"  # source event → its code
    IS_A = "is_a"  # code → parent code (catalog hierarchy)
    HAS_SECTION = "has_section"  # note → section
    MENTIONS = "mentions"  # section → code whose description occurs in the section text
    NEXT = "next"  # encounter → next encounter; clinical event → next clinical event

    @property
    def code(self) -> int:
        """The int8 stored in the edge table's ``type`` column."""
        return _EDGE_CODE[self]


NODE_TYPES: tuple[NodeType, ...] = tuple(NodeType)
EDGE_TYPES: tuple[EdgeType, ...] = tuple(EdgeType)
_NODE_CODE = {t: i for i, t in enumerate(NODE_TYPES)}
_EDGE_CODE = {t: i for i, t in enumerate(EDGE_TYPES)}

SourceFormat = Literal["meds", "xml-timeline", "xml-encounters", "xml-eventstream"]
PSEUDO_ENCOUNTER_TYPE = "DAY"
"""``encounter_type`` of a per-day pseudo-encounter (holds the events of a day that fall in no visit window)."""
VISIT_ENCOUNTER_TYPE = "VISIT"
"""``encounter_type`` of a visit known only by the visit id its events carry (no ``ENCOUNTER//`` row of its own)."""

NODE_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),  # event id for source events, else patient:/day:/code: ids
    pa.field("type", pa.int8(), nullable=False),  # NodeType.code
    pa.field("time", pa.timestamp("us")),  # event time; encounter start; a section's note time
    pa.field("end", pa.timestamp("us")),  # encounters: time of the last event attached (or as the source gave it)
    pa.field("code", pa.string()),  # source events and code nodes
    pa.field("value", pa.float64()),  # numeric_value
    pa.field("unit", pa.string()),  # unit of numeric_value
    pa.field("text", pa.large_string()),  # text_value of events; a section's slice of its note
    pa.field("description", pa.string()),  # code nodes
    pa.field("title", pa.string()),  # sections: the header label (null for text before the first header)
    pa.field("encounter_type", pa.string()),  # encounters: AMB / ED / IMP / ... / DAY
    pa.field("row", pa.int64()),  # source events: provenance row (MEDS) or line (XML without a MEDS locator)
    pa.field("encounter", pa.int32()),  # clinical events: node index of their encounter
    pa.field("span_start", pa.int32()),  # sections: character offsets in the note text
    pa.field("span_end", pa.int32()),
    pa.field("source_code", pa.string()),  # source events: the dataset's own spelling, when the code was normalised
    pa.field("visit_id", pa.string()),  # source events and encounters: the visit id the source gives
    pa.field("attributes", pa.string()),  # source events: other source attributes, a JSON object of strings
])
EDGE_SCHEMA = pa.schema([
    pa.field("src", pa.int32(), nullable=False),
    pa.field("dst", pa.int32(), nullable=False),
    pa.field("type", pa.int8(), nullable=False),  # EdgeType.code
    pa.field("term", pa.string()),  # mentions: the matched term
])


def visit_node_id(visit_id: str) -> str:
    """Node id of a visit known only by its id (no ``ENCOUNTER//`` row)."""
    return f"visit:{visit_id}"


def attributes_text(attributes: Mapping[str, str] | None) -> str | None:
    """The ``attributes`` column value: a JSON object with sorted keys (None when empty).

    >>> attributes_text({"provider_id": "7", "note_id": "12"})
    '{"note_id": "12", "provider_id": "7"}'
    """
    if not attributes:
        return None
    return json.dumps(dict(sorted(attributes.items())), ensure_ascii=False)


def attributes_texts(attributes: Iterable[Mapping[str, str] | None]) -> list[str | None]:
    """`attributes_text` of each mapping, each distinct one encoded once (rows of a source share a few: their table).

    >>> attributes_texts([{"kind": "lab"}, None, {"kind": "lab"}])
    ['{"kind": "lab"}', None, '{"kind": "lab"}']
    """
    encoded: dict[tuple[tuple[str, str], ...], str | None] = {}
    out: list[str | None] = []
    for attributes in attributes:
        key = tuple(sorted(attributes.items())) if attributes else ()
        text = encoded.get(key, _MISSING)
        if text is _MISSING:
            text = encoded[key] = attributes_text(attributes)
        out.append(text)
    return out


_MISSING = object()


def parse_attributes(text: str | None) -> tuple[tuple[str, str], ...]:
    """The (name, value) pairs an ``attributes`` column value holds, sorted by name (empty for None)."""
    if not text:
        return ()
    return tuple(sorted(json.loads(text).items()))


def patient_node_id(subject_id: int) -> str:
    return f"patient:{subject_id}"


def code_node_id(code: str) -> str:
    return f"code:{code}"


def day_node_id(day: datetime) -> str:
    return f"day:{day.date().isoformat()}"


def section_node_id(note_id: str, k: int) -> str:
    return f"{note_id}#s{k}"


@dataclass(frozen=True, slots=True)
class Provider:
    """A care provider as the source describes it (the VISTA XML's ``<provider>``); absent facts are None, facts
    without a field are kept in ``attributes`` ((name, value) pairs sorted by name)."""

    provider_id: str
    specialty: str | None = None
    gender: str | None = None
    year_of_birth: int | None = None
    care_site_id: str | None = None
    care_site_name: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CareSite:
    """A care site as the source describes it (the VISTA XML's ``<caresite>``)."""

    care_site_id: str
    name: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PatientInfo:
    """Graph-level facts: who, where the rows came from, demographics, and the source's content hash (if known).

    ``source`` is the MEDS shard (relative to the dataset root) or the XML file; event ``row``s refer to it: rows
    of the shard when ``first_row`` is known, else line numbers of the XML file. ``providers`` and ``care_sites``
    are those the source describes (events name them in their ``provider_id``/``care_site_id`` attributes).
    """

    subject_id: int
    source: str
    source_format: SourceFormat
    first_row: int | None
    demographics: Demographics
    content_hash: str | None = None
    providers: tuple[Provider, ...] = ()
    care_sites: tuple[CareSite, ...] = ()

    @property
    def provenance_unit(self) -> Literal["row", "line"]:
        return "row" if self.first_row is not None else "line"


@dataclass(frozen=True, slots=True)
class GraphEvent:
    """A source event node: the MEDS row's content, its code's description, its encounter and its provenance."""

    event_id: str
    type: NodeType
    time: datetime | None
    code: str
    description: str | None
    value: float | None
    unit: str | None
    text: str | None
    encounter: str | None  # node id of the encounter it belongs to (None for patient-level events and encounters)
    provenance: RowRef
    source_code: str | None = None  # the dataset's own spelling of the code, when it differs from ``code``
    visit_id: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()  # source attributes without a column, (name, value) sorted by name

    def attribute(self, name: str) -> str | None:
        """One source attribute (``provider_id``, ``note_id``, ``table``…), or None."""
        return next((v for k, v in self.attributes if k == name), None)

    @property
    def original_code(self) -> str:
        """The code as the dataset spells it."""
        return self.source_code or self.code


@dataclass(frozen=True, slots=True)
class GraphEncounter:
    """A visit (``event_id`` = its ``ENCOUNTER//`` row), a visit known only by its id (``visit:<id>``, type
    ``VISIT``), or a per-day pseudo-encounter (``day:<date>``, type ``DAY``); the last two have no ``event_id``."""

    node_id: str
    event_id: str | None
    encounter_type: str
    start: datetime
    end: datetime
    visit_id: str | None = None

    @property
    def pseudo(self) -> bool:
        return self.event_id is None


@dataclass(frozen=True, slots=True)
class GraphSection:
    """A section of a note: its header label, its text (a slice of the note, header line included) and where."""

    node_id: str
    note_id: str
    title: str | None
    text: str
    span: tuple[int, int]


@dataclass(frozen=True, slots=True)
class GraphCode:
    """A code node with its catalog description and parent codes."""

    code: str
    description: str | None
    parents: tuple[str, ...]


_SOURCE_TYPES = frozenset({NodeType.ENCOUNTER.code, NodeType.EVENT.code, NodeType.NOTE.code})


class PatientGraph:
    """One patient's MEDS Graph: ``nodes`` (`NODE_SCHEMA`) and ``edges`` (`EDGE_SCHEMA`) plus `PatientInfo`.

    Accessors convert the columns they need to Python once, then answer from memory. Graphs compare equal when
    their info and both tables are equal.
    """

    def __init__(self, info: PatientInfo, nodes: pa.Table, edges: pa.Table):
        if not nodes.schema.equals(NODE_SCHEMA) or not edges.schema.equals(EDGE_SCHEMA):
            raise ValueError(f"patient {info.subject_id}: node/edge tables do not have NODE_SCHEMA/EDGE_SCHEMA")
        self.info = info
        self.nodes = nodes
        self.edges = edges

    # ------------------------------------------------------------------------------------------ basics
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PatientGraph):
            return NotImplemented
        return self.info == other.info and self.nodes.equals(other.nodes) and self.edges.equals(other.edges)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PatientGraph(subject {self.info.subject_id}: {self.n_nodes} nodes, {self.n_edges} edges)"

    @property
    def subject_id(self) -> int:
        return self.info.subject_id

    @property
    def n_nodes(self) -> int:
        return self.nodes.num_rows

    @property
    def n_edges(self) -> int:
        return self.edges.num_rows

    @cached_property
    def _ids(self) -> list[str]:
        return self.nodes.column("id").to_pylist()

    @cached_property
    def _index(self) -> dict[str, int]:
        return {node_id: i for i, node_id in enumerate(self._ids)}

    @cached_property
    def _types(self) -> np.ndarray:
        return self.nodes.column("type").to_numpy()

    @cached_property
    def _columns(self) -> dict[str, list]:
        names = ("time", "end", "code", "value", "unit", "text", "description", "title", "encounter_type", "row",
                 "encounter", "span_start", "span_end", "source_code", "visit_id", "attributes")
        return {name: self.nodes.column(name).to_pylist() for name in names}

    @cached_property
    def _adjacency(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Out-edges grouped by source node (stable, so each node's edges keep table order): offsets, dst, type, order."""
        src = self.edges.column("src").to_numpy()
        order = np.argsort(src, kind="stable")
        offsets = np.zeros(self.n_nodes + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=self.n_nodes), out=offsets[1:])
        return offsets, self.edges.column("dst").to_numpy()[order], self.edges.column("type").to_numpy()[order], order

    @cached_property
    def _reverse(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dst = self.edges.column("dst").to_numpy()
        order = np.argsort(dst, kind="stable")
        offsets = np.zeros(self.n_nodes + 1, np.int64)
        np.cumsum(np.bincount(dst, minlength=self.n_nodes), out=offsets[1:])
        return offsets, self.edges.column("src").to_numpy()[order], self.edges.column("type").to_numpy()[order]

    def index_of(self, node_id: str) -> int:
        """Row of ``node_id`` in the node table (KeyError naming the patient when absent)."""
        try:
            return self._index[node_id]
        except KeyError:
            raise KeyError(f"patient {self.subject_id}: no node {node_id!r}") from None

    def node_ids(self, node_type: NodeType | None = None) -> list[str]:
        """All node ids (of one type), in table order."""
        if node_type is None:
            return list(self._ids)
        ids = self._ids
        return [ids[i] for i in np.flatnonzero(self._types == node_type.code).tolist()]

    def node_type(self, node_id: str) -> NodeType:
        return NODE_TYPES[int(self._types[self.index_of(node_id)])]

    def _of_type(self, node_type: NodeType) -> list[int]:
        return np.flatnonzero(self._types == node_type.code).tolist()

    # ------------------------------------------------------------------------------------------ edges
    def neighbors(self, node: str, edge_type: EdgeType | None = None, *, direction: Literal["out", "in"] = "out") -> list[str]:
        """Ids of the nodes linked to ``node`` by out-edges (or in-edges) of ``edge_type`` (any type when None)."""
        i = self.index_of(node)
        if direction == "out":
            offsets, other, types, _ = self._adjacency
        elif direction == "in":
            offsets, other, types = self._reverse
        else:
            raise ValueError(f"direction must be 'out' or 'in', not {direction!r}")
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        found = other[lo:hi] if edge_type is None else other[lo:hi][types[lo:hi] == edge_type.code]
        ids = self._ids
        return [ids[j] for j in found.tolist()]

    def edge_list(self, edge_type: EdgeType | None = None) -> list[tuple[str, str]]:
        """(source id, target id) of every edge (of one type), in table order."""
        src = self.edges.column("src").to_numpy()
        dst = self.edges.column("dst").to_numpy()
        if edge_type is not None:
            keep = self.edges.column("type").to_numpy() == edge_type.code
            src, dst = src[keep], dst[keep]
        ids = self._ids
        return [(ids[a], ids[b]) for a, b in zip(src.tolist(), dst.tolist())]

    # ------------------------------------------------------------------------------------------ typed views
    def has_event(self, event_id: str) -> bool:
        """True when ``event_id`` is one of this patient's source events (the check for ``source_event_refs``)."""
        i = self._index.get(event_id)
        return i is not None and int(self._types[i]) in _SOURCE_TYPES and self._columns["row"][i] is not None

    def _event_at(self, i: int) -> GraphEvent:
        c = self._columns
        code = c["code"][i]
        code_row = self._index.get(code_node_id(code))
        encounter = c["encounter"][i]
        return GraphEvent(
            event_id=self._ids[i],
            type=NODE_TYPES[int(self._types[i])],
            time=c["time"][i],
            code=code,
            description=c["description"][code_row] if code_row is not None else None,
            value=c["value"][i],
            unit=c["unit"][i],
            text=c["text"][i],
            encounter=self._ids[encounter] if encounter is not None else None,
            provenance=RowRef(self.info.source, c["row"][i]),
            source_code=c["source_code"][i],
            visit_id=c["visit_id"][i],
            attributes=parse_attributes(c["attributes"][i]),
        )

    def event(self, event_id: str) -> GraphEvent:
        """The source event ``event_id`` (KeyError naming the patient if it is not one)."""
        if not self.has_event(event_id):
            raise KeyError(f"patient {self.subject_id}: no source event {event_id!r}")
        return self._event_at(self._index[event_id])

    def provenance(self, event_id: str) -> RowRef:
        """Where ``event_id`` came from: (shard, row) for MEDS input, (XML file, line) for XML without a locator."""
        return self.event(event_id).provenance

    def events_in_order(self) -> list[GraphEvent]:
        """The clinical events (notes included; encounter rows and patient-level events excluded) in (time, row) order."""
        clinical = np.isin(self._types, (NodeType.EVENT.code, NodeType.NOTE.code))
        clinical &= self.nodes.column("encounter").is_valid().to_numpy(zero_copy_only=False)
        return [self._event_at(i) for i in np.flatnonzero(clinical).tolist()]

    def patient_events(self) -> list[GraphEvent]:
        """Static rows and the birth: the events attached to the patient rather than to an encounter."""
        patient = self.index_of(patient_node_id(self.subject_id))
        offsets, dst, types, _ = self._adjacency
        lo, hi = int(offsets[patient]), int(offsets[patient + 1])
        return [self._event_at(j) for j in dst[lo:hi][types[lo:hi] == EdgeType.HAS_EVENT.code].tolist()]

    def _encounter_at(self, i: int) -> GraphEncounter:
        c = self._columns
        real = c["row"][i] is not None
        return GraphEncounter(self._ids[i], self._ids[i] if real else None, c["encounter_type"][i], c["time"][i], c["end"][i],
                              c["visit_id"][i])

    def encounters(self) -> list[GraphEncounter]:
        """Visits and pseudo-encounters in start order."""
        return [self._encounter_at(i) for i in self._of_type(NodeType.ENCOUNTER)]

    def encounter(self, node_id: str) -> GraphEncounter:
        i = self.index_of(node_id)
        if int(self._types[i]) != NodeType.ENCOUNTER.code:
            raise KeyError(f"patient {self.subject_id}: node {node_id!r} is not an encounter")
        return self._encounter_at(i)

    def events_of(self, encounter: str | GraphEncounter) -> list[GraphEvent]:
        """The events of one encounter in (time, row) order."""
        node_id = encounter.node_id if isinstance(encounter, GraphEncounter) else encounter
        self.encounter(node_id)
        return [self.event(j) for j in self.neighbors(node_id, EdgeType.HAS_EVENT)]

    def notes(self) -> list[GraphEvent]:
        """Note events in (time, row) order."""
        return [self._event_at(i) for i in self._of_type(NodeType.NOTE)]

    def sections(self, note: str | GraphEvent) -> list[GraphSection]:
        """Sections of a note, in text order."""
        note_id = note.event_id if isinstance(note, GraphEvent) else note
        if self.node_type(note_id) is not NodeType.NOTE:
            raise KeyError(f"patient {self.subject_id}: node {note_id!r} is not a note")
        c = self._columns
        out = []
        for section_id in self.neighbors(note_id, EdgeType.HAS_SECTION):
            i = self._index[section_id]
            out.append(GraphSection(section_id, note_id, c["title"][i], c["text"][i], (c["span_start"][i], c["span_end"][i])))
        return out

    def provider_of(self, event: str | GraphEvent) -> Provider | None:
        """The provider an event names (``provider_id`` attribute): as the source describes it, or with its id only."""
        return self._named(event, "provider_id", self.info.providers, Provider)

    def care_site_of(self, event: str | GraphEvent) -> CareSite | None:
        """The care site an event names (``care_site_id`` attribute): as the source describes it, or with its id only."""
        return self._named(event, "care_site_id", self.info.care_sites, CareSite)

    def _named(self, event: str | GraphEvent, id_field: str, known: Iterable[E], make: Callable[[str], E]) -> E | None:
        """What an event's ``id_field`` attribute names: the ``known`` entity with that id, else ``make(id)``."""
        found = event if isinstance(event, GraphEvent) else self.event(event)
        named = found.attribute(id_field)
        if named is None:
            return None
        return next((e for e in known if getattr(e, id_field) == named), None) or make(named)

    def code(self, code: str) -> GraphCode:
        """The code node of ``code`` (KeyError naming the patient if the patient's graph has none)."""
        i = self.index_of(code_node_id(code))
        parents = tuple(self._columns["code"][self._index[p]] for p in self.neighbors(code_node_id(code), EdgeType.IS_A))
        return GraphCode(code, self._columns["description"][i], parents)

    def codes(self) -> list[GraphCode]:
        return [self.code(self._columns["code"][i]) for i in self._of_type(NodeType.CODE)]

    def mentions(self, section: str | GraphSection) -> list[tuple[str, str]]:
        """(code, matched term) of each code mentioned in a section."""
        section_id = section.node_id if isinstance(section, GraphSection) else section
        i = self.index_of(section_id)
        offsets, dst, types, order = self._adjacency
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        terms = self.edges.column("term")
        return [(self._columns["code"][int(d)], terms[int(k)].as_py())
                for d, t, k in zip(dst[lo:hi], types[lo:hi], order[lo:hi]) if t == EdgeType.MENTIONS.code]

    # ------------------------------------------------------------------------------------------ export
    def graph_attributes(self) -> dict[str, str | int]:
        """Graph-level attributes as GraphML writes them (absent values left out)."""
        info, demo = self.info, self.info.demographics
        attrs: dict[str, str | int] = {"subject_id": info.subject_id, "source": info.source, "source_format": info.source_format}
        optional = {"first_row": info.first_row, "sex": demo.sex, "race": demo.race, "ethnicity": demo.ethnicity,
                    "birth_date": demo.birth.isoformat() if demo.birth else None,
                    "death_date": demo.death.isoformat() if demo.death else None, "content_hash": info.content_hash,
                    "providers": providers_text(info.providers), "care_sites": care_sites_text(info.care_sites)}
        attrs.update({k: v for k, v in optional.items() if v is not None})
        return attrs

    def node_attribute_rows(self) -> Iterator[tuple[str, dict[str, str | int | float]]]:
        """(node id, attributes) per node with GraphML-compatible values: times as ISO strings, nulls left out."""
        c = self._columns
        types = self._types.tolist()
        for i, node_id in enumerate(self._ids):
            attrs: dict[str, str | int | float] = {"type": NODE_TYPES[types[i]].value}
            for name in ATTRIBUTE_COLUMNS:
                value = c[name][i]
                if value is not None:
                    attrs[name] = value.isoformat() if isinstance(value, datetime) else value
            yield node_id, attrs

    def to_networkx(self):
        """A ``networkx.DiGraph`` with the same nodes, edges and attributes as the GraphML file (times as ISO strings)."""
        import networkx as nx

        graph = nx.DiGraph(**self.graph_attributes())
        graph.add_nodes_from(self.node_attribute_rows())
        ids = self._ids
        terms = self.edges.column("term").to_pylist()
        columns = (self.edges.column(name).to_numpy().tolist() for name in ("src", "dst", "type"))
        for src, dst, kind, term in zip(*columns, terms):
            attrs = {"type": EDGE_TYPES[kind].value}
            if term is not None:
                attrs["term"] = term
            graph.add_edge(ids[src], ids[dst], **attrs)
        return graph


ATTRIBUTE_COLUMNS: tuple[str, ...] = ("time", "end", "code", "value", "unit", "text", "description", "title",
                                      "encounter_type", "row", "span_start", "span_end", "source_code", "visit_id",
                                      "attributes")
"""Node columns written as GraphML attributes (``id`` is the node id, ``type`` a string, ``encounter`` an edge)."""


def _described(item: Provider | CareSite) -> dict[str, object]:
    fields = {k: getattr(item, k) for k in type(item).__slots__ if k != "attributes" and getattr(item, k) is not None}
    if item.attributes:
        fields["attributes"] = dict(item.attributes)
    return fields


def providers_text(providers: tuple[Provider, ...]) -> str | None:
    """Providers as the graph-level GraphML attribute stores them: a JSON list of objects (None when none)."""
    return json.dumps([_described(p) for p in providers], ensure_ascii=False) if providers else None


def care_sites_text(care_sites: tuple[CareSite, ...]) -> str | None:
    """Care sites as the graph-level GraphML attribute stores them: a JSON list of objects (None when none)."""
    return json.dumps([_described(s) for s in care_sites], ensure_ascii=False) if care_sites else None


def _item(cls, fields: dict):
    extra = fields.pop("attributes", None) or {}
    return cls(**fields, attributes=tuple(sorted(extra.items())))


def parse_providers(text: str | None) -> tuple[Provider, ...]:
    """The providers of a `providers_text` value (ValueError/TypeError on a malformed one).

    >>> p = (Provider("7", "Oncology", year_of_birth=1980, attributes=(("npi", "123"),)),)
    >>> parse_providers(providers_text(p)) == p
    True
    """
    return tuple(_item(Provider, item) for item in json.loads(text)) if text else ()


def parse_care_sites(text: str | None) -> tuple[CareSite, ...]:
    """The care sites of a `care_sites_text` value (ValueError/TypeError on a malformed one)."""
    return tuple(_item(CareSite, item) for item in json.loads(text)) if text else ()
