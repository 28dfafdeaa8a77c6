"""Persist a `PatientGraph` as GraphML and read it back exactly (``read_graph(write_graph(g)) == g``).

The file is plain GraphML 1.0 that networkx (``networkx.read_graphml``), igraph, Gephi or yEd can open: graph-level
``<data>`` for the patient (subject id, source, demographics, content hash, the providers and care sites the source
describes as JSON lists), one ``<node>`` per node with its non-null attributes (``type``, ``time`` and ``end`` as
ISO 8601 strings, ``code``, ``value`` as a double, ``unit``, ``text``, ``description``, ``title``,
``encounter_type``, ``row`` as a long, section ``span_start``/``span_end``, ``source_code``, ``visit_id``, and
``attributes`` as a JSON object of strings), and one
``<edge>`` per edge with its ``type`` (and ``term`` for mentions). Nodes and edges are written in table order, so
reading restores the tables row for row; an event's encounter is restored from its ``has_event`` edge.

The writer formats the text column by column in Arrow, a block of nodes or edges at a time (`graphml_blocks`: no DOM,
no Python object per node, only one block's text in memory), and streams it into a temporary file renamed into place.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import BinaryIO, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lxml import etree

from vista.graph.errors import GraphFileError
from vista.graph.model import (
    ATTRIBUTE_COLUMNS,
    EDGE_SCHEMA,
    EDGE_TYPES,
    NODE_SCHEMA,
    NODE_TYPES,
    EdgeType,
    NodeType,
    PatientGraph,
    PatientInfo,
    SourceFormat,
    parse_care_sites,
    parse_providers,
)
from vista.shared.atomic import atomic_path
from vista.shared.records import Demographics
from vista.shared.timeline.xmltext import escape_attribute, escape_text

GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
_HEADER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    f'<graphml xmlns="{GRAPHML_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    f'xsi:schemaLocation="{GRAPHML_NS} http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
)

# (key id, owner, attribute name, GraphML type)
GRAPH_KEYS = (
    ("g_subject_id", "subject_id", "long"), ("g_source", "source", "string"), ("g_source_format", "source_format", "string"),
    ("g_first_row", "first_row", "long"), ("g_sex", "sex", "string"), ("g_race", "race", "string"),
    ("g_ethnicity", "ethnicity", "string"), ("g_birth_date", "birth_date", "string"), ("g_death_date", "death_date", "string"),
    ("g_content_hash", "content_hash", "string"), ("g_providers", "providers", "string"),
    ("g_care_sites", "care_sites", "string"),
)
_NODE_KEY_TYPES = {"value": "double", "row": "long", "span_start": "int", "span_end": "int"}
NODE_KEYS = (("n_type", "type", "string"),) + tuple((f"n_{name}", name, _NODE_KEY_TYPES.get(name, "string"))
                                                    for name in ATTRIBUTE_COLUMNS)
EDGE_KEYS = (("e_type", "type", "string"), ("e_term", "term", "string"))


def _keys_xml() -> str:
    lines = []
    for owner, keys in (("graph", GRAPH_KEYS), ("node", NODE_KEYS), ("edge", EDGE_KEYS)):
        for key_id, name, kind in keys:
            lines.append(f'<key id="{key_id}" for="{owner}" attr.name="{name}" attr.type="{kind}"/>\n')
    return "".join(lines)


_KEYS = _keys_xml()


CHUNK_ROWS = 1024
"""Nodes (or edges) per block the writer formats at once: its memory is a block's text, not the document's."""
ARROW_MIN_ROWS = 512
"""Graphs with fewer nodes are formatted in Python (one small block), larger ones in Arrow."""
_NODE_TYPE_NAMES = pa.array([t.value for t in NODE_TYPES], pa.string())
_EDGE_TYPE_NAMES = pa.array([t.value for t in EDGE_TYPES], pa.string())
_POOL = pa.system_memory_pool()
"""The pool of the writer's short-lived buffers: the C allocator hands a block's freed memory to the next block,
where the default pool (mimalloc) keeps it committed (2 MB more peak RSS for a 7,287-row patient's GraphML)."""


def _cast(values, to: pa.DataType):
    return pc.cast(values, to, safe=False, memory_pool=_POOL)


def _take(values: pa.Array, indices) -> pa.Array:
    return pc.take(values, indices, memory_pool=_POOL)


_TEXT_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("\r", "&#13;"))
_ATTRIBUTE_ESCAPES = _TEXT_ESCAPES + (('"', "&quot;"), ("\n", "&#10;"), ("\t", "&#9;"))


def _escaped(values: pa.Array, escapes: tuple[tuple[str, str], ...]) -> pa.Array:
    """``values`` escaped as `escape_text` / `escape_attribute` do (``&`` first), in Arrow."""
    for plain, entity in escapes:
        values = pc.replace_substring(values, plain, entity, memory_pool=_POOL)
    return values


def _iso(values: pa.Array) -> pa.Array:
    """Timestamps as `datetime.isoformat` writes them (microseconds only when set), in Arrow."""
    whole = _cast(values, pa.timestamp("s"))
    seconds = pc.utf8_replace_slice(_cast(whole, pa.string()), 10, 11, "T", memory_pool=_POOL)  # "YYYY-MM-DD hh:mm:ss"
    micro = pc.subtract(_cast(values, pa.int64()), pc.multiply(_cast(whole, pa.int64()), 1_000_000, memory_pool=_POOL),
                        memory_pool=_POOL)
    digits = pc.binary_join_element_wise(".", pc.utf8_lpad(_cast(micro, pa.string()), 6, "0", memory_pool=_POOL), "",
                                         memory_pool=_POOL)
    return pc.binary_join_element_wise(seconds, pc.if_else(pc.equal(micro, 0, memory_pool=_POOL), "", digits,
                                                           memory_pool=_POOL), "", memory_pool=_POOL)


def _text_of(name: str, kind: str, values: pa.Array, escape: bool) -> pa.Array:
    """One node column as GraphML ``<data>`` text (null where the value is); ``escape``: some value needs it."""
    if name in ("time", "end"):
        return _iso(values)
    if kind in ("double", "long", "int"):
        return _cast(values, pa.string())  # shortest round-trip decimal for doubles (float() reads it back)
    values = _cast(values, pa.string())
    return _escaped(values, _TEXT_ESCAPES) if escape else values


def _needs_escape(column: pa.ChunkedArray, escapes: tuple[tuple[str, str], ...]) -> bool:
    """Whether any value of a string column holds a character ``escapes`` replaces (one scan of its bytes)."""
    special = [ord(plain) for plain, _ in escapes]
    for chunk in column.chunks:
        data = chunk.buffers()[2] if chunk.null_count < len(chunk) else None
        if data is not None and any((np.frombuffer(data, np.uint8) == byte).any() for byte in special):
            return True
    return False


def _data(key_id: str, text: pa.Array) -> pa.Array:
    """``<data key="...">text</data>`` per value ('' for nulls)."""
    return pc.coalesce(pc.binary_join_element_wise(f'<data key="{key_id}">', text, "</data>", "", memory_pool=_POOL), "",
                       memory_pool=_POOL)


def _utf8(lines: pa.Array) -> memoryview:
    """The bytes of a string array's values, concatenated (its data buffer; no Python object per value)."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.chunk(0) if lines.num_chunks == 1 else lines.combine_chunks()
    if len(lines) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(lines.buffers()[1], np.int32, count=len(lines) + 1, offset=4 * lines.offset)
    return memoryview(lines.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def _python_fragments(key_id: str, name: str, kind: str, values: list) -> list[str]:
    """``<data>`` text of each value of one column ('' for nulls), formatted in Python (small blocks)."""
    if name in ("time", "end"):
        return ["" if v is None else f'<data key="{key_id}">{v.isoformat()}</data>' for v in values]
    if kind == "double":
        return ["" if v is None else f'<data key="{key_id}">{v!r}</data>' for v in values]
    if kind in ("long", "int"):
        return ["" if v is None else f'<data key="{key_id}">{v}</data>' for v in values]
    return ["" if v is None else f'<data key="{key_id}">{escape_text(v)}</data>' for v in values]


def _small_nodes(block: pa.Table, quoted_ids: list[str]) -> bytes:
    columns = [[f'<data key="n_type">{NODE_TYPES[t].value}</data>' for t in block.column("type").to_pylist()]]
    columns += [_python_fragments(key_id, name, kind, block.column(name).to_pylist()) for key_id, name, kind in NODE_KEYS[1:]]
    return "".join(f'<node id="{node_id}">{"".join(data)}</node>\n'
                   for node_id, *data in zip(quoted_ids, *columns)).encode("utf-8")


def _small_edges(block: pa.Table, quoted_ids: list[str]) -> bytes:
    terms = _python_fragments("e_term", "term", "string", block.column("term").to_pylist())
    kinds = [EDGE_TYPES[t].value for t in block.column("type").to_pylist()]
    return "".join(f'<edge source="{quoted_ids[a]}" target="{quoted_ids[b]}"><data key="e_type">{kind}</data>{term}</edge>\n'
                   for a, b, kind, term in zip(block.column("src").to_pylist(), block.column("dst").to_pylist(),
                                               kinds, terms)).encode("utf-8")


def _arrow_nodes(block: pa.Table, quoted_ids: pa.Array, escape: frozenset[str]) -> memoryview:
    parts = ['<node id="', quoted_ids, '">', _data("n_type", _take(_NODE_TYPE_NAMES, block.column("type")))]
    for key_id, name, kind in NODE_KEYS[1:]:
        values = block.column(name)
        if values.null_count < len(values):  # a column without a value in the block writes nothing
            parts.append(_data(key_id, _text_of(name, kind, values, name in escape)))
    return _utf8(pc.binary_join_element_wise(*parts, "</node>\n", "", memory_pool=_POOL))


def _arrow_edges(block: pa.Table, quoted_ids: pa.Array, escape: bool) -> memoryview:
    kinds = _take(_EDGE_TYPE_NAMES, block.column("type"))
    terms = block.column("term")
    terms = _data("e_term", _escaped(terms, _TEXT_ESCAPES) if escape else terms) if terms.null_count < len(terms) else ""
    return _utf8(pc.binary_join_element_wise(
        '<edge source="', _take(quoted_ids, block.column("src")), '" target="', _take(quoted_ids, block.column("dst")),
        '"><data key="e_type">', kinds, "</data>", terms, "</edge>\n", "", memory_pool=_POOL))


def graphml_blocks(graph: PatientGraph, rows: int | None = None) -> Iterator[bytes | memoryview]:
    """The GraphML document of ``graph`` as UTF-8 blocks (header, then ``rows`` nodes or edges at a time, by default
    `CHUNK_ROWS`).

    A graph of at least `ARROW_MIN_ROWS` nodes is formatted column-wise in Arrow (escaping, ISO times, shortest
    decimals: no Python object per node or edge); a smaller one in Python, where Arrow's per-call cost (~40 kernel
    calls a block) would dominate. Either way only one block's text is in memory, whatever the graph's size.
    """
    head = [_HEADER, _KEYS, f'<graph id="{escape_attribute(f"patient:{graph.subject_id}")}" edgedefault="directed">\n']
    attributes = graph.graph_attributes()
    for key_id, name, _ in GRAPH_KEYS:
        value = attributes.get(name)
        if value is not None:
            head.append(f'<data key="{key_id}">{escape_text(str(value))}</data>\n')
    yield "".join(head).encode("utf-8")
    nodes, edges = graph.nodes, graph.edges
    rows = rows or CHUNK_ROWS
    if nodes.num_rows < ARROW_MIN_ROWS:
        quoted = [escape_attribute(i) for i in nodes.column("id").to_pylist()]
        yield _small_nodes(nodes, quoted)
        yield _small_edges(edges, quoted)
    else:
        ids = _cast(nodes.column("id").combine_chunks(), pa.string())
        quoted_ids = _escaped(ids, _ATTRIBUTE_ESCAPES) if _needs_escape(pa.chunked_array([ids]), _ATTRIBUTE_ESCAPES) else ids
        escape = frozenset(name for _, name, kind in NODE_KEYS[1:] if kind == "string" and name not in ("time", "end")
                           and _needs_escape(nodes.column(name), _TEXT_ESCAPES))
        for start in range(0, nodes.num_rows, rows):
            yield _arrow_nodes(nodes.slice(start, rows), quoted_ids.slice(start, rows), escape)
        escape_terms = _needs_escape(edges.column("term"), _TEXT_ESCAPES)
        for start in range(0, edges.num_rows, rows):
            yield _arrow_edges(edges.slice(start, rows), quoted_ids, escape_terms)
    yield b"</graph>\n</graphml>\n"


def graphml_text(graph: PatientGraph) -> str:
    """The GraphML document of ``graph`` as one string (`write_graph` streams it instead)."""
    return b"".join(graphml_blocks(graph)).decode("utf-8")


def write_graphml_to(graph: PatientGraph, out: BinaryIO) -> int:
    """Stream the GraphML document of ``graph`` into an open binary file; the bytes written."""
    written = 0
    for block in graphml_blocks(graph):
        written += out.write(block)
    return written


def write_graph(graph: PatientGraph, path: str | os.PathLike) -> Path:
    """Write ``graph`` to ``path`` (a ``.graphml`` file, or a directory: then ``<subject_id>.graphml`` inside it),
    streamed block by block into a temporary file that is then renamed."""
    path = Path(path)
    if path.is_dir():
        path = path / f"{graph.subject_id}.graphml"
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        write_graphml_to(graph, out)
    return path


# ---------------------------------------------------------------------------------------------------- reading
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, remove_comments=True, remove_pis=True)
_NODE_TAG = f"{{{GRAPHML_NS}}}node"
_EDGE_TAG = f"{{{GRAPHML_NS}}}edge"
_DATA_TAG = f"{{{GRAPHML_NS}}}data"
_KEY_TAG = f"{{{GRAPHML_NS}}}key"
_GRAPH_TAG = f"{{{GRAPHML_NS}}}graph"
_NODE_TYPE_BY_NAME = {t.value: t for t in NodeType}
_EDGE_TYPE_BY_NAME = {t.value: t for t in EdgeType}


def _convert(path: Path, where: str, name: str, text: str | None):
    kind = _NODE_KEY_TYPES.get(name, "string")
    try:
        if name in ("time", "end"):
            return datetime.fromisoformat(text or "")
        if kind == "double":
            return float(text or "")
        if kind in ("long", "int"):
            return int(text or "")
    except ValueError:
        raise GraphFileError(f"{path}: {where}: attribute {name!r} has a bad value {text!r}") from None
    return text if text else None


def read_graph(path: str | os.PathLike, data: bytes | memoryview | None = None) -> PatientGraph:
    """The `PatientGraph` in a GraphML file written by `write_graph` (`GraphFileError` naming the file otherwise);
    with ``data``, the document is those bytes (e.g. a record of a graph pack) and ``path`` only names it."""
    path = Path(path)
    try:
        root = etree.parse(str(path) if data is None else io.BytesIO(data), _PARSER).getroot()
    except OSError as exc:
        raise GraphFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except etree.XMLSyntaxError as exc:
        raise GraphFileError(f"{path}: not well-formed XML ({exc})") from None
    graph_el = root.find(_GRAPH_TAG)
    if root.tag != f"{{{GRAPHML_NS}}}graphml" or graph_el is None:
        raise GraphFileError(f"{path}: not a GraphML document with a <graph>")
    names: dict[str, str] = {}
    for key in root.iter(_KEY_TAG):
        names[key.get("id", "")] = f'{key.get("for")}:{key.get("attr.name")}'

    graph_attrs: dict[str, str] = {}
    for data in graph_el.iterchildren(_DATA_TAG):
        owner, _, name = names.get(data.get("key", ""), ":").partition(":")
        if owner == "graph":
            graph_attrs[name] = data.text or ""
    info = graph_info(path, graph_attrs)

    columns: dict[str, list] = {name: [] for name in ATTRIBUTE_COLUMNS}
    ids: list[str] = []
    types: list[int] = []
    for node in graph_el.iterchildren(_NODE_TAG):
        node_id = node.get("id")
        if node_id is None:
            raise GraphFileError(f"{path}: line {node.sourceline}: <node> without id")
        values: dict[str, object] = {}
        for data in node.iterchildren(_DATA_TAG):
            owner, _, name = names.get(data.get("key", ""), ":").partition(":")
            if owner != "node":
                raise GraphFileError(f"{path}: node {node_id}: data key {data.get('key')!r} is not a node key")
            if name == "type":
                kind = _NODE_TYPE_BY_NAME.get(data.text or "")
                if kind is None:
                    raise GraphFileError(f"{path}: node {node_id}: unknown node type {data.text!r}")
                values["type"] = kind.code
            elif name in columns:
                values[name] = _convert(path, f"node {node_id}", name, data.text)
        if "type" not in values:
            raise GraphFileError(f"{path}: node {node_id}: no type")
        ids.append(node_id)
        types.append(values.pop("type"))
        for name, column in columns.items():
            column.append(values.get(name))
    index = {node_id: i for i, node_id in enumerate(ids)}
    if len(index) != len(ids):
        raise GraphFileError(f"{path}: duplicate node ids")

    src: list[int] = []
    dst: list[int] = []
    kinds: list[int] = []
    terms: list[str | None] = []
    for edge in graph_el.iterchildren(_EDGE_TAG):
        a, b = index.get(edge.get("source", "")), index.get(edge.get("target", ""))
        if a is None or b is None:
            raise GraphFileError(f"{path}: line {edge.sourceline}: edge between unknown nodes "
                                 f"{edge.get('source')!r} -> {edge.get('target')!r}")
        kind = term = None
        for data in edge.iterchildren(_DATA_TAG):
            owner, _, name = names.get(data.get("key", ""), ":").partition(":")
            if owner == "edge" and name == "type":
                kind = _EDGE_TYPE_BY_NAME.get(data.text or "")
            elif owner == "edge" and name == "term":
                term = data.text or None
        if kind is None:
            raise GraphFileError(f"{path}: line {edge.sourceline}: edge without a known type")
        src.append(a)
        dst.append(b)
        kinds.append(kind.code)
        terms.append(term)

    # An event's encounter is the source of its has_event edge from an encounter node.
    type_array = np.asarray(types, np.int8)
    src_a, dst_a, kind_a = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(kinds, np.int8)
    encounter = np.full(len(ids), -1, np.int64)
    from_encounter = (kind_a == EdgeType.HAS_EVENT.code) & (type_array[src_a] == NodeType.ENCOUNTER.code)
    encounter[dst_a[from_encounter]] = src_a[from_encounter]

    arrays = {"id": pa.array(ids, pa.string()), "type": pa.array(type_array, pa.int8())}
    for field in NODE_SCHEMA:
        if field.name in columns:
            arrays[field.name] = pa.array(columns[field.name], field.type)
    arrays["encounter"] = pa.array(encounter, pa.int32(), mask=encounter < 0)
    nodes = pa.table(arrays, schema=NODE_SCHEMA)
    edges = pa.table({"src": pa.array(src_a, pa.int32()), "dst": pa.array(dst_a, pa.int32()),
                      "type": pa.array(kind_a, pa.int8()), "term": pa.array(terms, pa.string())}, schema=EDGE_SCHEMA)
    return PatientGraph(info, nodes, edges)


def graph_info(path: Path, attrs: dict[str, str]) -> PatientInfo:
    """The `PatientInfo` in a graph's attributes as text (GraphML graph data, or the columnar copy's metadata)."""
    def day(name: str) -> date | None:
        raw = attrs.get(name)
        try:
            return date.fromisoformat(raw) if raw else None
        except ValueError:
            raise GraphFileError(f"{path}: graph attribute {name!r} is not a date: {raw!r}") from None

    try:
        subject_id = int(attrs["subject_id"])
        first_row = int(attrs["first_row"]) if "first_row" in attrs else None
    except (KeyError, ValueError):
        raise GraphFileError(f"{path}: graph attributes subject_id/first_row missing or not integers") from None
    source_format = attrs.get("source_format")
    if source_format not in get_args(SourceFormat) or "source" not in attrs:
        raise GraphFileError(f"{path}: graph attributes source/source_format missing or unknown ({source_format!r})")
    demographics = Demographics(birth=day("birth_date"), sex=attrs.get("sex"), race=attrs.get("race"),
                                ethnicity=attrs.get("ethnicity"), death=day("death_date"))
    try:
        providers, care_sites = parse_providers(attrs.get("providers")), parse_care_sites(attrs.get("care_sites"))
    except (ValueError, TypeError) as exc:
        raise GraphFileError(f"{path}: graph attributes providers/care_sites are not what write_graph writes ({exc})") from None
    return PatientInfo(subject_id, attrs["source"], source_format, first_row, demographics, attrs.get("content_hash"),
                       providers, care_sites)
