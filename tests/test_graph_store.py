"""GraphStore: build a cohort once, skip unchanged patients by content hash, resume, and query the node index."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.graph_fixtures import SMALL_CATALOG, small_record, synth_dataset, synth_records, synth_root
from vista.graph import EncounterWindows, GraphConfig, GraphFileError, PatientGraph, build_graph, index_table, write_graph
from vista.graph.build import source_from_record
from vista.graph.columnar import columnar_paths
from vista.graph.columnar import write_columnar
from vista.graph.index import task_index_table
from vista.graph.store import (
    GraphFacts,
    GraphOutcome,
    GraphStore,
    graph_facts,
    content_hash,
    graph_file,
    is_graph_store,
    write_index_part,
)
from vista.graph.xml_input import encounter_xml
from vista.shared.records import CodeCatalog, CodeInfo, Event

IMAGING = pl.col("code").eq("NOTE//RADIOLOGY") | pl.col("code").str.contains(r"^CPT//7\d{4}$")


def _index_files(root) -> dict[str, int]:
    """The store's index parts and their modification times."""
    return {p.name: p.stat().st_mtime_ns for p in (root / "index").glob("*.parquet")}


@pytest.fixture(scope="module")
def built_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    report = GraphStore(root).build_dataset(synth_dataset())
    return root, report


def test_store_builds_every_patient_and_skips_them_on_rerun(built_store):
    root, first = built_store
    records, catalog = synth_records()
    assert first.built == len(records) and first.skipped == 0
    store = GraphStore(root)
    assert store.subject_ids() == sorted(records)
    mtimes = {sid: store.path_of(sid).stat().st_mtime_ns for sid in records}
    index_files = _index_files(root)
    assert index_files and not (root / "index.parquet").exists()
    again = store.build_dataset(synth_dataset())
    assert (again.built, again.skipped, again.nodes_built) == (0, len(records), 0)
    assert {sid: store.path_of(sid).stat().st_mtime_ns for sid in records} == mtimes
    assert _index_files(root) == index_files
    sid = store.subject_ids()[0]
    loaded = store.load(sid)
    built = build_graph(records[sid], catalog)
    assert loaded.nodes.equals(built.nodes) and loaded.edges.equals(built.edges)
    assert loaded.info.content_hash == store.content_hash_of(sid) == content_hash(source_from_record(records[sid], catalog))
    manifest = store.manifest()
    assert manifest.height == len(records) and manifest["nodes"].sum() == store.scan_index().select(pl.len()).collect().item()


def test_index_answers_cohort_queries_like_the_source_rows(built_store):
    root, _ = built_store
    index = GraphStore(root).scan_index()
    from_index = set(index.filter(IMAGING & (pl.col("time").dt.year() == 2021)).select("subject_id").unique()
                     .collect()["subject_id"].to_list())
    rows = pl.scan_parquet(str(synth_root() / "data" / "**" / "*.parquet"))
    from_rows = set(rows.filter(IMAGING & (pl.col("time").dt.year() == 2021)).select("subject_id").unique()
                    .collect()["subject_id"].to_list())
    assert from_index == from_rows and from_index
    # Each event row of the index knows its encounter and that encounter's type.
    events = index.filter(pl.col("type").is_in(["event", "note"]) & pl.col("encounter").is_not_null()).collect()
    assert events["encounter_type"].null_count() == 0
    assert set(events["encounter_type"].unique()) <= {"AMB", "ED", "IMP", "DAY"}


def test_only_changed_patients_are_rebuilt(tmp_path):
    records, catalog = synth_records()
    chosen = sorted(records)[:4]
    store = GraphStore(tmp_path, checkpoint_every=2)
    assert store.build_records([records[s] for s in chosen], catalog).built == 4
    # A changed value: only that patient.
    target = records[chosen[1]]
    k = next(i for i, e in enumerate(target.events) if e.numeric_value is not None)
    changed = dataclasses.replace(target, events=list(target.events))
    changed.events[k] = dataclasses.replace(target.events[k], numeric_value=target.events[k].numeric_value + 1)
    report = store.build_records([records[chosen[0]], changed, records[chosen[2]], records[chosen[3]]], catalog)
    assert (report.built, report.skipped) == (1, 3)
    value = (store.scan_index().filter((pl.col("subject_id") == target.subject_id) & (pl.col("node_id") == f"e{k}"))
             .select("value").collect().item())
    assert value == pytest.approx(target.events[k].numeric_value + 1)
    assert store.scan_index().select(pl.len()).collect().item() == store.manifest()["nodes"].sum()
    # A changed catalog entry: the patients using the code.
    code = records[chosen[3]].events[-1].code
    users = {s for s in chosen if any(e.code == code for e in records[s].events)}
    edited = CodeCatalog([*(i for c, i in catalog.items() if c != code), CodeInfo(code, "edited description")])
    assert store.build_records([records[s] for s in chosen], edited).built == len(users)
    # Other build settings: everyone.
    wider = GraphStore(tmp_path, config=GraphConfig(windows=EncounterWindows(default=timedelta(hours=48))))
    assert wider.build_records([records[s] for s in chosen], edited).built == 4
    # A deleted graph file is rebuilt even though its hash is known.
    wider.path_of(chosen[0]).unlink()
    assert wider.build_records([records[s] for s in chosen], edited).built == 1


def test_an_interrupted_build_keeps_what_it_built(tmp_path):
    records, catalog = synth_records()

    def failing():
        for n, sid in enumerate(sorted(records)):
            if n == 3:
                raise RuntimeError("reader died")
            yield records[sid]

    with pytest.raises(RuntimeError, match="reader died"):
        GraphStore(tmp_path, checkpoint_every=100).build_records(failing(), catalog)
    reopened = GraphStore(tmp_path)
    assert reopened.subject_ids() == sorted(records)[:3]
    assert set(reopened.scan_index().select("subject_id").unique().collect()["subject_id"]) == set(sorted(records)[:3])
    assert reopened.build_records((records[s] for s in sorted(records)[:5]), catalog).built == 2


def test_store_builds_from_xml_files(tmp_path):
    graph = build_graph(small_record([(None, "GENDER//F", None, None), (datetime(2020, 1, 5, 9), "ENCOUNTER//AMB", None, None),
                                      (datetime(2020, 1, 5, 9, 30), "LOINC//718-7", 11.2, None)]), SMALL_CATALOG)
    path = tmp_path / "xml" / "p7.xml"
    path.parent.mkdir()
    path.write_text(encounter_xml(graph))
    store = GraphStore(tmp_path / "graphs")
    assert store.build_xml([path], SMALL_CATALOG).built == 1
    assert store.build_xml([path], SMALL_CATALOG).skipped == 1
    assert store.load(7).nodes.equals(graph.nodes)


def test_unreadable_manifest_is_a_clear_error(tmp_path):
    (tmp_path / "manifest.parquet").write_bytes(b"not parquet")
    with pytest.raises(GraphFileError, match="unreadable graph store manifest"):
        GraphStore(tmp_path)
    with pytest.raises(KeyError, match="no graph for subject 3"):
        GraphStore(tmp_path / "empty").load(3)
    assert GraphStore(tmp_path / "empty").scan_index().collect().height == 0


def test_content_hash_tracks_rows_and_provenance():
    rec = small_record([(None, "GENDER//F", None, None), (datetime(2020, 1, 5), "ENCOUNTER//AMB", None, None)])
    base = content_hash(source_from_record(rec, SMALL_CATALOG))
    assert base == content_hash(source_from_record(rec, SMALL_CATALOG))
    moved = dataclasses.replace(rec, first_row=rec.first_row + 1)
    assert content_hash(source_from_record(moved, SMALL_CATALOG)) != base
    retexted = dataclasses.replace(rec, events=[rec.events[0], Event("e1", rec.events[1].time, "ENCOUNTER//AMB", None, "x")])
    assert content_hash(source_from_record(retexted, SMALL_CATALOG)) != base


def test_each_checkpoint_adds_one_index_part_and_rewrites_none(tmp_path):
    records, catalog = synth_records()
    chosen = [records[s] for s in sorted(records)[:7]]
    store = GraphStore(tmp_path, checkpoint_every=3)
    store.build_records(chosen[:3], catalog)
    first = _index_files(tmp_path)
    store.build_records(chosen, catalog)  # 3 skipped, 4 built: one checkpoint of 3, one of 1
    after = _index_files(tmp_path)
    assert len(first) == 1 and len(after) == 3 and {k: after[k] for k in first} == first
    manifest = store.manifest()
    assert manifest["index_part"].n_unique() == 3
    for part, group in manifest.group_by("index_part"):  # the manifest names the part holding each graph's rows
        held = pl.read_parquet(tmp_path / part[0])
        assert sorted(held["subject_id"].unique().to_list()) == sorted(group["subject_id"].to_list())
        assert held.height == group["nodes"].sum()
    reopened = GraphStore(tmp_path)
    assert reopened.scan_index().collect().sort("subject_id", "node_id").equals(
        store.scan_index().collect().sort("subject_id", "node_id"))
    assert reopened.scan_index().select(pl.len()).collect().item() == manifest["nodes"].sum()


def test_rebuilt_graphs_supersede_their_old_index_rows(tmp_path):
    records, catalog = synth_records()
    a, b = (records[s] for s in sorted(records)[:2])
    store = GraphStore(tmp_path, checkpoint_every=10)
    store.build_records([a, b], catalog)
    (old_part,) = _index_files(tmp_path)
    k = next(i for i, e in enumerate(b.events) if e.numeric_value is not None)
    changed = dataclasses.replace(b, events=list(b.events))
    changed.events[k] = dataclasses.replace(b.events[k], numeric_value=-1.0)
    assert store.build_records([a, changed], catalog).built == 1
    assert len(_index_files(tmp_path)) == 2  # the old part still holds a's rows (and b's stale ones)
    for reader in (store, GraphStore(tmp_path)):
        index = reader.scan_index().collect()
        assert index.height == reader.manifest()["nodes"].sum()
        assert index.filter((pl.col("subject_id") == b.subject_id) & (pl.col("node_id") == f"e{k}"))["value"].to_list() == [-1.0]
        assert index.filter(pl.col("subject_id") == a.subject_id).height == reader.manifest().filter(
            pl.col("subject_id") == a.subject_id)["nodes"].item()
    # Once no graph points to the old part any more, it is deleted.
    changed_a = dataclasses.replace(a, first_row=a.first_row + 1)
    assert store.build_records([changed_a, changed], catalog).built == 1
    assert old_part not in _index_files(tmp_path) and len(_index_files(tmp_path)) == 2


def _former_layout_store(root, records, catalog, *, with_index_part: bool) -> None:
    """A store as the former layout wrote it: patients/<sid>.graphml, one manifest.parquet, one index.parquet."""
    graphs = []
    for record in records:
        digest = content_hash(source_from_record(record, catalog))
        graph = build_graph(record, catalog)
        graph = PatientGraph(dataclasses.replace(graph.info, content_hash=digest), graph.nodes, graph.edges)
        write_graph(graph, root / "patients" / f"{record.subject_id}.graphml")
        graphs.append((graph, digest))
    pq.write_table(pa.concat_tables([index_table(g) for g, _ in graphs]), root / "index.parquet")
    columns = {"subject_id": [g.subject_id for g, _ in graphs], "content_hash": [d for _, d in graphs],
               "file": [f"patients/{g.subject_id}.graphml" for g, _ in graphs], "nodes": [g.n_nodes for g, _ in graphs],
               "edges": [g.n_edges for g, _ in graphs], "source": [g.info.source for g, _ in graphs],
               "built_at": [datetime(2024, 1, 1)] * len(graphs)}
    if with_index_part:
        columns["index_part"] = ["index.parquet"] * len(graphs)
    pq.write_table(pa.table(columns), root / "manifest.parquet")


@pytest.mark.parametrize("with_index_part", [False, True])
def test_a_store_of_the_former_layout_is_still_read(tmp_path, with_index_part):
    """Stores of the former layout: patients/<sid>.graphml, one manifest.parquet (perhaps without index_part), one
    index.parquet without task columns. They open, load (from GraphML) and query; a build moves what it rebuilds."""
    records, catalog = synth_records()
    chosen = [records[s] for s in sorted(records)[:3]]
    _former_layout_store(tmp_path, chosen, catalog, with_index_part=with_index_part)
    legacy = GraphStore(tmp_path)
    assert is_graph_store(tmp_path) and legacy.subject_ids() == [r.subject_id for r in chosen]
    assert legacy.load(chosen[0].subject_id).nodes.equals(build_graph(chosen[0], catalog).nodes)
    index = legacy.scan_index().collect()
    assert index.height == legacy.manifest()["nodes"].sum() > 0
    assert index["task"].to_list() == [str(s) for s in index["subject_id"].to_list()]
    changed = dataclasses.replace(chosen[0], first_row=chosen[0].first_row + 1)
    assert legacy.build_records([changed, *chosen[1:]], catalog).built == 3  # no columnar copy yet: rebuilt there
    assert not (tmp_path / "index.parquet").exists() and not (tmp_path / "manifest.parquet").exists()
    reopened = GraphStore(tmp_path)
    assert reopened.file_of(chosen[1].subject_id).startswith(f"graphs/{chosen[1].subject_id % 100:02d}/pack-00000.vgp@")
    assert reopened.scan_index().select(pl.len()).collect().item() == reopened.manifest()["nodes"].sum()


def _manifest_files(root) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in (root / "manifest").glob("*.parquet")}


def test_a_checkpoint_appends_one_index_part_and_one_manifest_part_and_rewrites_nothing(tmp_path):
    """The index and the manifest are append-only: each checkpoint writes two new files, of a size that depends on
    its own graphs only; no file written before is touched."""
    records, catalog = synth_records()
    chosen = [records[s] for s in sorted(records)[:8]]
    store = GraphStore(tmp_path, checkpoint_every=2)
    seen_index, seen_manifest, sizes = {}, {}, []
    for k in range(0, 8, 2):
        store.build_records(chosen[k:k + 2], catalog)
        index, manifest = _index_files(tmp_path), _manifest_files(tmp_path)
        new_index, new_manifest = set(index) - set(seen_index), set(manifest) - set(seen_manifest)
        assert len(new_index) == len(new_manifest) == 1
        assert {n: index[n] for n in seen_index} == seen_index  # earlier parts untouched
        assert {n: manifest[n] for n in seen_manifest} == seen_manifest
        sizes.append(manifest[new_manifest.pop()][1])
        seen_index, seen_manifest = index, manifest
    assert max(sizes) - min(sizes) < 200  # two rows each: not growing with the store
    reopened = GraphStore(tmp_path)
    assert reopened.subject_ids() == sorted(r.subject_id for r in chosen)
    assert reopened.scan_index().select(pl.len()).collect().item() == reopened.manifest()["nodes"].sum()


def test_many_manifest_parts_are_merged_into_one(tmp_path, monkeypatch):
    import vista.graph.store as store_module

    monkeypatch.setattr(store_module, "MAX_MANIFEST_PARTS", 3)
    records, catalog = synth_records()
    chosen = [records[s] for s in sorted(records)[:5]]
    store = GraphStore(tmp_path, checkpoint_every=1)
    store.build_records(chosen, catalog)
    assert len(_manifest_files(tmp_path)) <= 3
    reopened = GraphStore(tmp_path)
    assert reopened.subject_ids() == sorted(r.subject_id for r in chosen)
    assert reopened.manifest().equals(store.manifest())


def _per_graph_layout_store(root, records, catalog) -> None:
    """A store as the per-graph layout wrote it: graphs/<bucket>/<sid>.graphml with its .nodes/.edges.arrow copy
    (facts in its metadata), index parts, manifest parts naming the files."""
    outcomes = []
    for record in records:
        source = source_from_record(record, catalog)
        digest = content_hash(source)
        graph = build_graph(record, catalog)
        graph = PatientGraph(dataclasses.replace(graph.info, content_hash=digest), graph.nodes, graph.edges)
        file = graph_file(str(record.subject_id), record.subject_id)
        index = task_index_table(graph, str(record.subject_id))
        facts = graph_facts(graph, index, digest)
        write_graph(graph, root / file)
        write_columnar(graph, root / file, extra={f: getattr(facts, f) for f in GraphFacts.__slots__})
        outcomes.append(GraphOutcome(facts, file, True, index, None))
    part = write_index_part(root, [o.index for o in outcomes])
    GraphStore(root).register([o.entry(str(o.facts.subject_id), None, part) for o in outcomes])


def test_a_store_of_the_per_graph_layout_opens_and_is_updated_in_place(tmp_path):
    """The layout before packs (three files per graph): it opens and loads as it is (columnar copy, GraphML), a
    rebuild skips its unchanged graphs where they are and moves a changed one into a pack, removing its files."""
    records, catalog = synth_records()
    chosen = [records[s] for s in sorted(records)[:3]]
    _per_graph_layout_store(tmp_path, chosen, catalog)
    old = GraphStore(tmp_path)
    sid = chosen[0].subject_id
    graphml = tmp_path / old.file_of(sid)
    assert old.subject_ids() == [r.subject_id for r in chosen] and graphml.name == f"{sid}.graphml"
    expected = build_graph(chosen[0], catalog)
    assert old.load(sid).nodes.equals(expected.nodes) and old.load_graphml(sid) == old.load(sid)
    assert old.graphml(sid) == graphml.read_bytes()
    assert old.scan_index().select(pl.len()).collect().item() == old.manifest()["nodes"].sum()
    changed = dataclasses.replace(chosen[0], first_row=chosen[0].first_row + 1)
    report = old.build_records([changed, *chosen[1:]], catalog)
    assert (report.built, report.skipped) == (1, 2)
    reopened = GraphStore(tmp_path)
    assert reopened.file_of(sid).startswith(f"graphs/{sid % 100:02d}/pack-") and not graphml.exists()
    assert not any(columnar_paths(graphml)[k].exists() for k in (0, 1))
    assert reopened.file_of(chosen[1].subject_id) == graph_file(str(chosen[1].subject_id), chosen[1].subject_id)
    assert reopened.load(sid).info.first_row == changed.first_row
    # a per-graph file without its columnar copy loads from GraphML
    other = chosen[1].subject_id
    columnar_paths(tmp_path / reopened.file_of(other))[0].unlink()
    assert reopened.load(other) == reopened.load_graphml(other)


def test_a_pack_holds_both_copies_and_a_lost_pack_is_rebuilt(tmp_path):
    records, catalog = synth_records()
    record = records[sorted(records)[0]]
    store = GraphStore(tmp_path)
    store.build_records([record], catalog)
    sid = record.subject_id
    assert store.load(sid) == store.load_graphml(sid)
    assert nx_read(store.graphml(sid)).number_of_nodes() == store.load(sid).n_nodes
    store.path_of(sid).unlink()  # the pack is gone: the graph is rebuilt, though its hash is known
    with pytest.raises(GraphFileError, match="no such graph pack"):
        store.load(sid)
    assert store.build_records([record], catalog).built == 1
    assert store.load(sid) == store.load_graphml(sid)


def nx_read(graphml: bytes):
    import io

    import networkx as nx

    return nx.read_graphml(io.BytesIO(graphml))
