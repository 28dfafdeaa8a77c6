"""Load a patient's organized state from a graph store: its MEDS Graph and its stored TOA timeline.

Queries start from this state (built once at ingestion); nothing here rebuilds anything or calls a model. Missing
pieces are reported as one-line `QueryError`s naming the store and the subject, with the command that makes them.
A stored timeline is only ever returned together with a check that it was built from the graph now in the store
(`vista.toa.refs.check_provenance`): one built from another version of the patient's data is refused with a
`StaleProvenanceError` naming the patient and the refs that changed, since its ``e<k>`` refs would open other rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from vista.graph import GraphStore, PatientGraph
from vista.graph.store import MANIFEST_DIR, is_graph_store
from vista.query.errors import StoreMissingError, UnknownSubjectError
from vista.toa import PatientTimeline, TimelineStore


@dataclass(frozen=True, slots=True)
class PatientState:
    """One patient's graph and timeline, as stored."""

    graph: PatientGraph
    timeline: PatientTimeline


def open_graph_store(root: str | os.PathLike) -> GraphStore:
    """The graph store at ``root`` (`StoreMissingError` if the directory holds no store manifest)."""
    path = Path(root)
    if not is_graph_store(path):
        what = "does not exist" if not path.exists() else f"is not a graph store (no {MANIFEST_DIR}/)"
        raise StoreMissingError(f"{path}: {what}; build one with `vista graph --dataset MEDS --store {path}`")
    return GraphStore(path)


def load_graph(store: GraphStore, subject_id: int) -> PatientGraph:
    """The stored graph of ``subject_id`` (`UnknownSubjectError` naming the store when it has none)."""
    if subject_id not in store:
        known = store.subject_ids()
        shown = ", ".join(map(str, known[:8])) + (" ..." if len(known) > 8 else "")
        raise UnknownSubjectError(f"{store.root}: no graph for subject {subject_id} (the store holds {len(known)} "
                                  f"subject(s): {shown or 'none'})")
    return store.load(subject_id)


def load_timeline(root: str | os.PathLike, subject_id: int, graph: PatientGraph | None = None) -> PatientTimeline:
    """The stored timeline of ``subject_id``, checked against the patient's graph (``graph``, or the one the store
    at ``root`` holds): `StoreMissingError` with the command that builds it when absent, `StaleProvenanceError` when
    it was built from another version of the graph."""
    timelines = TimelineStore(root)
    if not timelines.path_of(subject_id).is_file():
        raise StoreMissingError(f"{timelines.path_of(subject_id)}: no timeline for subject {subject_id}; build it with "
                                f"`vista timeline --store {root} --subject {subject_id}`")
    if graph is None:
        store = open_graph_store(root)
        timeline = timelines.load(subject_id)
        stored_hash = store.content_hash_of(subject_id)
        if stored_hash is not None and timeline.graph_hash == stored_hash:
            return timeline  # the manifest's hash is the stored graph's version: no need to read the graph
        graph = load_graph(store, subject_id)  # to name what changed (or to check a graph with no manifest hash)
    return timelines.load(subject_id, graph)


def load_state(root: str | os.PathLike, subject_id: int) -> PatientState:
    """The graph and the stored timeline of ``subject_id`` in the store at ``root`` (checked to belong together)."""
    graph = load_graph(open_graph_store(root), subject_id)
    return PatientState(graph, load_timeline(root, subject_id, graph))
