"""Shared inputs of the graph tests: a small seeded synthetic MEDS dataset (made once per process) and helpers."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from datetime import datetime
from functools import cache
from pathlib import Path

from vista.graph import PatientGraph
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord

NOW = datetime(2030, 1, 1)


@cache
def synth_root() -> Path:
    """A 40-subject synthetic MEDS dataset (seed 11), generated on first use and removed at exit."""
    from vista.shared.synth import SynthConfig, generate

    root = Path(tempfile.mkdtemp(prefix="graph-tests-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    generate(SynthConfig(n_subjects=40, seed=11, workers=1), root / "ds", progress=False)
    return root / "ds"


def synth_dataset() -> MedsDataset:
    return MedsDataset(synth_root(), now=NOW)


@cache
def synth_records() -> tuple[dict[int, PatientRecord], CodeCatalog]:
    dataset = synth_dataset()
    return {r.subject_id: r for r in dataset.iter_patients()}, dataset.code_catalog()


def richest(n: int = 3) -> list[PatientRecord]:
    """The ``n`` synthetic patients with the most notes (so notes, sections and mentions are exercised)."""
    records, _ = synth_records()
    return sorted(records.values(), key=lambda r: -sum(e.code.startswith("NOTE//") for e in r.events))[:n]


def canonical(graph: PatientGraph) -> tuple[dict[str, dict], set[tuple[str, str, int, str | None]]]:
    """Nodes by id (GraphML attributes plus the encounter id) and edges by (source id, target id, type, term)."""
    nodes = dict(graph.node_attribute_rows())
    for event in graph.events_in_order():
        nodes[event.event_id]["encounter"] = event.encounter
    types = graph.edges.column("type").to_pylist()
    terms = graph.edges.column("term").to_pylist()
    edges = {(a, b, t, term) for (a, b), t, term in zip(graph.edge_list(), types, terms)}
    return nodes, edges


SMALL_CATALOG = CodeCatalog([
    CodeInfo("LOINC//718-7", "Hemoglobin [Mass/volume] in Blood", unit="g/dL"),
    CodeInfo("ICD10CM//J18.9", "Pneumonia, unspecified organism", parent_codes=("ICD10CM//J18",)),
    CodeInfo("ICD10CM//J18", "Pneumonia, unspecified organism", parent_codes=("ICD10CM//J09-J18",)),
    CodeInfo("ICD10CM//J09-J18", "Influenza and pneumonia"),
    CodeInfo("RXNORM//82122", "levofloxacin"),
    CodeInfo("RXNORM//6809", "metformin"),
    CodeInfo("ENCOUNTER//AMB", "Ambulatory encounter"),
    CodeInfo("NOTE//PROGRESS", "Progress note"),
])


def small_record(events: list[tuple[datetime | None, str, float | None, str | None]], *, subject_id: int = 7,
                 shard: str = "data/train/0.parquet", first_row: int = 100) -> PatientRecord:
    """A record from (time, code, value, text) rows, ids e0, e1, ... in the given order."""
    return PatientRecord(subject_id, shard, first_row, [Event(f"e{k}", *row) for k, row in enumerate(events)])
