"""Graph packs: a store's graphs in a few append-only files per bucket, O(1) reads by locator, several writers."""

from __future__ import annotations

import multiprocessing
import stat
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from vista.graph import GraphFileError, build_graph
from vista.graph.index import task_index_table
from vista.graph.packs import INDEX_NAME, PackItem, append_graph, append_graphs, lookup, read_packed
from vista.graph.store import BUCKETS, GraphStore, bucket_of, graph_facts, write_index_part
from vista.shared.records import CodeCatalog, Event, PatientRecord

T0 = datetime(2021, 3, 1, 9)


def tiny_graph(subject: int):
    events = [Event("e0", None, "GENDER//F", None, None), Event("e1", T0 + timedelta(days=subject), "ENCOUNTER//AMB", None, None),
              Event("e2", T0 + timedelta(days=subject, minutes=30), "LOINC//718-7", 10.0 + subject % 7, None)]
    return build_graph(PatientRecord(subject, "data/0.parquet", 3 * subject, events), CodeCatalog())


def _write(args: tuple[str, int, int]) -> list[tuple[int, str]]:
    """A writer process: its subjects' graphs appended one at a time (as a job's actor does)."""
    root, first, count = args
    out = []
    for subject in range(first, first + count):
        graph = tiny_graph(subject)
        out.append((subject, append_graph(root, bucket_of(subject % 10), str(subject), f"h{subject}", graph,
                                          {"subject_id": subject})))
    return out


def test_several_writer_processes_append_whole_records_to_shared_buckets(tmp_path):
    """Three processes append into the same ten buckets at once: every record reads back whole and each bucket's
    index names every one of them exactly once."""
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        written = [pair for part in pool.map(_write, [(str(tmp_path), k * 100, 60) for k in range(3)]) for pair in part]
    assert len(written) == 180
    for subject, locator in written:
        assert read_packed(tmp_path, locator) == tiny_graph(subject)
        assert lookup(tmp_path, bucket_of(subject % 10), str(subject)) == (f"h{subject}", locator)
    lines = [line for b in range(10) for line in (tmp_path / "graphs" / f"{b:02d}" / INDEX_NAME).read_text().splitlines()]
    assert sorted(lines) == sorted(f"{s}\th{s}\t{loc}" for s, loc in written)
    assert {p.name for p in (tmp_path / "graphs").rglob("*") if p.is_file()} == {INDEX_NAME, "pack-00000.vgp"}


def test_a_crashed_writers_torn_tail_is_skipped(tmp_path):
    first = append_graph(tmp_path, "07", "7", "a", tiny_graph(7), {})
    folder = tmp_path / "graphs" / "07"
    with open(folder / "pack-00000.vgp", "ab") as pack:
        pack.write(b"<graphml half written")  # a record without its index line
    with open(folder / INDEX_NAME, "ab") as index:
        index.write(b"8\tb\tgraphs/07/pack-00000.vg")  # a line cut short
    assert lookup(tmp_path, "07", "8") is None
    second = append_graph(tmp_path, "07", "107", "c", tiny_graph(107), {})
    assert read_packed(tmp_path, first) == tiny_graph(7) and read_packed(tmp_path, second) == tiny_graph(107)
    assert lookup(tmp_path, "07", "107") == ("c", second) and lookup(tmp_path, "07", "8") is None
    offset = int(second.split("@")[1].split("+")[0])
    with pytest.raises(GraphFileError, match="no graph record"):
        read_packed(tmp_path, f"graphs/07/pack-00000.vgp@{offset - 5}+50")


def test_packs_and_their_index_are_private(tmp_path):
    locator = append_graph(tmp_path, "03", "3", "a", tiny_graph(3), {})
    pack = tmp_path / locator.split("@")[0]
    assert stat.S_IMODE(pack.stat().st_mode) == 0o600 and stat.S_IMODE((pack.parent / INDEX_NAME).stat().st_mode) == 0o600
    assert stat.S_IMODE(pack.parent.stat().st_mode) == 0o700 and stat.S_IMODE((tmp_path / "graphs").stat().st_mode) == 0o700


@pytest.mark.slow
def test_a_100k_patient_store_holds_a_few_hundred_files(tmp_path):
    """100,000 patients written bucket by bucket as pack records (tiny graphs, one per bucket written under each of
    its subjects' tasks: the count of files does not depend on their content), each bucket's node-index rows as one
    part, all registered in the manifest: the store holds about two files per bucket plus its parts, not three per
    patient, and a patient's graph loads by its locator."""
    patients = 100_000
    graphs = {b: tiny_graph(b) for b in range(BUCKETS)}
    entries = []
    for bucket, graph in graphs.items():
        subjects = list(range(bucket, patients, BUCKETS))
        template = pl.from_arrow(task_index_table(graph, ""))
        rows = (pl.DataFrame({"subject": subjects}).join(template, how="cross")
                .with_columns(pl.col("subject").cast(pl.String).alias("task"), pl.col("subject").alias("subject_id"))
                .select(template.columns))
        part = write_index_part(tmp_path, [rows.to_arrow().cast(task_index_table(graph, "").schema)])
        facts = graph_facts(graph, task_index_table(graph, ""), f"hash{bucket}")
        items = [PackItem(str(s), f"hash{bucket}", graph, {"content_hash": f"hash{bucket}", "subject_id": s})
                 for s in subjects]
        locators = append_graphs(tmp_path, bucket_of(bucket), items)
        entries += [entry_for(s, facts, locator, part) for s, locator in zip(subjects, locators)]
    GraphStore(tmp_path).register(entries)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) <= 3 * BUCKETS + 1, len(files)  # packs and their indexes, index parts, one manifest part
    store = GraphStore(tmp_path)
    assert len(store) == patients
    for subject in (0, 4_321, 99_999):
        assert store.load(subject) == graphs[subject % BUCKETS]
        assert store.file_of(subject).startswith(f"graphs/{subject % BUCKETS:02d}/pack-00000.vgp@")
    assert store.scan_index().select(pl.len()).collect().item() == store.manifest()["nodes"].sum()


def entry_for(subject: int, facts, locator: str, part: str):
    from dataclasses import replace

    from vista.graph.store import GraphOutcome

    return GraphOutcome(replace(facts, subject_id=subject), locator, True, None, None).entry(str(subject), None, part)


def test_the_store_reads_a_pack_record_without_scanning_the_bucket(tmp_path, monkeypatch):
    """A load opens the record its manifest row names: the bucket's index is not read."""
    store = GraphStore(tmp_path)
    records = [PatientRecord(s, "data/0.parquet", 0, [Event("e0", T0, "ENCOUNTER//AMB", None, None)]) for s in (1, 101)]
    store.build_records(records, CodeCatalog())
    index = Path(tmp_path / "graphs" / "01" / INDEX_NAME)
    assert len(index.read_text().splitlines()) == 2
    index.unlink()
    assert GraphStore(tmp_path).load(101).subject_id == 101


def test_a_full_pack_is_closed_and_the_next_record_starts_another(tmp_path, monkeypatch):
    import vista.graph.packs as packs

    monkeypatch.setattr(packs, "PACK_LIMIT_BYTES", 1)
    first = append_graph(tmp_path, "05", "5", "a", tiny_graph(5), {})
    second, third = append_graphs(tmp_path, "05", [PackItem("105", "b", tiny_graph(105), {}),
                                                   PackItem("205", "c", tiny_graph(205), {})])
    assert [loc.split("@")[0] for loc in (first, second, third)] == [
        "graphs/05/pack-00000.vgp", "graphs/05/pack-00001.vgp", "graphs/05/pack-00002.vgp"]
    assert read_packed(tmp_path, third) == tiny_graph(205) and lookup(tmp_path, "05", "5") == ("a", first)
