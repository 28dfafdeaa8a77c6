"""One patient's store entry opened for plan queries: the MEDS Graph, its stored TOA timeline (when there is one)
and an index built once per entry, so every plan afterwards is a few array slices (`vista.query.execute`).

The index holds, in (time, row) order, every dated source event of the graph as numpy columns (time, value, code
number, node id), the rows of each code (so "the hemoglobin rows between two dates" is one ``searchsorted``), the
notes' texts, and the patient's vocabulary: each code it has, with its catalog description and unit, to resolve
names such as "hemoglobin" or "carboplatin" (`Vocabulary`).

>>> from datetime import datetime
>>> from vista.graph.build import build_graph
>>> from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
>>> rec = PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2020, 1, 5, 9), "LOINC//718-7", 11.2, None),
...     Event("e1", datetime(2020, 2, 5, 9), "LOINC//718-7", 9.1, None), Event("e2", datetime(2020, 2, 6), "RXNORM//40048", None, None)])
>>> entry = PatientEntry.of(build_graph(rec, CodeCatalog([CodeInfo("LOINC//718-7", "Hemoglobin [Mass/volume] in Blood", unit="g/dL"),
...                                                      CodeInfo("RXNORM//40048", "carboplatin")])))
>>> entry.vocabulary.resolve("hgb", measure=True).code, entry.vocabulary.resolve("Carboplatin").code
('LOINC//718-7', 'RXNORM//40048')
>>> entry.rows_of("LOINC//718-7").ids.tolist()
['e0', 'e1']
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from vista.graph import NodeType, PatientGraph
from vista.query.errors import UnknownNameError
from vista.query.state import load_graph, open_graph_store
from vista.toa import PatientTimeline

ALIASES: dict[str, str] = {
    "hgb": "hemoglobin", "hb": "hemoglobin", "haemoglobin": "hemoglobin", "wbc": "leukocytes",
    "white blood cells": "leukocytes", "white cell count": "leukocytes", "white blood cell count": "leukocytes",
    "plt": "platelets", "platelet count": "platelets", "anc": "neutrophils", "neutrophil count": "neutrophils",
    "alc": "lymphocytes", "hct": "hematocrit", "bun": "urea nitrogen", "alt": "alanine aminotransferase",
    "ast": "aspartate aminotransferase", "alp": "alkaline phosphatase", "bilirubin": "bilirubin.total",
    "ca-125": "cancer ag 125", "ca125": "cancer ag 125", "bmi": "body mass index (bmi)", "weight": "body weight",
    "temperature": "body temperature", "pulse": "heart rate", "spo2": "oxygen saturation", "ecog": "ecog performance status score",
    "systolic": "systolic blood pressure", "diastolic": "diastolic blood pressure", "a1c": "hemoglobin a1c/hemoglobin.total",
    "hba1c": "hemoglobin a1c/hemoglobin.total", "glucose": "glucose", "creatinine": "creatinine",
}
"""Short names clinicians write, mapped to the head of a catalog description (lower case)."""

_HEAD = re.compile(r"\s*[\[(].*$")


def description_head(description: str) -> str:
    """The name part of a catalog description: text before its first bracket, lower case.

    >>> description_head("Hemoglobin [Mass/volume] in Blood"), description_head("carboplatin")
    ('hemoglobin', 'carboplatin')
    """
    return _HEAD.sub("", description).strip().lower()


@dataclass(frozen=True, slots=True)
class Term:
    """One code of the patient's vocabulary: its description, unit, how many rows have it, whether they are numeric."""

    code: str
    description: str | None
    unit: str | None
    rows: int
    numeric: bool

    @property
    def name(self) -> str:
        return description_head(self.description) if self.description else self.code.lower()


class Vocabulary:
    """The codes one patient has (with rows), to resolve a plan's names: a code as written (``LOINC//718-7``), a
    code prefix (``CPT//7*``), or a name matched against the descriptions (an alias first, then the description's
    head equal to the name, then a head starting with it, then the name as a word of the description)."""

    def __init__(self, terms: list[Term], subject_id: int):
        self.terms = {t.code: t for t in terms}
        self.subject_id = subject_id
        self._resolved: dict[tuple[str, bool, bool], list[Term]] = {}

    def __contains__(self, code: str) -> bool:
        return code in self.terms

    def names(self, *, measure: bool = False) -> list[str]:
        return sorted({t.name for t in self.terms.values() if t.numeric or not measure})

    def nearest(self, name: str, *, measure: bool = False, n: int = 5) -> list[str]:
        """The patient's names closest to ``name`` (difflib ratio), for the one-line error and the re-ask."""
        names = self.names(measure=measure)
        wanted = ALIASES.get(name.strip().lower(), name.strip().lower())
        close = difflib.get_close_matches(wanted, names, n=n, cutoff=0.3)
        return close or [n_ for n_ in names if wanted.split()[0:1] and wanted.split()[0] in n_][:n]

    def resolve(self, name: str, *, measure: bool = False) -> Term:
        """The one code ``name`` means for this patient (`UnknownNameError` with the nearest names when none)."""
        found = self.resolve_all(name, measure=measure, single=True)
        return found[0]

    def resolve_all(self, name: str, *, measure: bool = False, single: bool = False) -> list[Term]:
        """Every code ``name`` means (a prefix ``X*`` may mean several; a name means its best-matching codes);
        answers are kept, so a name is matched against the descriptions once per entry."""
        key = (name, measure, single)
        if key not in self._resolved:
            self._resolved[key] = self._match(name, measure, single)
        return self._resolved[key]

    def _match(self, name: str, measure: bool, single: bool) -> list[Term]:
        text = name.strip()
        pool = [t for t in self.terms.values() if t.numeric or not measure]
        if text in self.terms and (self.terms[text].numeric or not measure):
            return [self.terms[text]]
        if text.endswith("*") and "//" in text:
            hits = sorted((t for t in pool if t.code.startswith(text[:-1])), key=lambda t: t.code)
            if hits and not single:
                return hits
        else:
            wanted = ALIASES.get(text.lower(), text.lower())
            for rule in (lambda t: t.name == wanted, lambda t: t.name.startswith(wanted),
                         lambda t: bool(re.search(rf"\b{re.escape(wanted)}\b", (t.description or "").lower()))):
                hits = sorted((t for t in pool if rule(t)), key=lambda t: (-t.rows, t.code))
                if hits:
                    return hits[:1] if single else hits
        kind = "measurement (lab or vital)" if measure else "code or name"
        raise UnknownNameError(self.subject_id, name, kind, self.nearest(text, measure=measure))


@dataclass(frozen=True, slots=True)
class Rows:
    """Rows of one code (or of several, merged) in (time, row) order: times (datetime64[us]), values, node ids."""

    times: np.ndarray
    values: np.ndarray
    ids: np.ndarray

    def window(self, start: np.datetime64 | None, end: np.datetime64 | None) -> Rows:
        """The rows with ``start <= time < end`` (either bound open when None)."""
        lo = 0 if start is None else int(np.searchsorted(self.times, start, "left"))
        hi = len(self.times) if end is None else int(np.searchsorted(self.times, end, "left"))
        return Rows(self.times[lo:hi], self.values[lo:hi], self.ids[lo:hi])

    def take(self, keep: np.ndarray) -> Rows:
        return Rows(self.times[keep], self.values[keep], self.ids[keep])

    def __len__(self) -> int:
        return len(self.times)


_EMPTY = Rows(np.array([], "datetime64[us]"), np.array([], float), np.array([], object))
_SOURCE_TYPES = (NodeType.EVENT.code, NodeType.NOTE.code, NodeType.ENCOUNTER.code)


class PatientEntry:
    """A patient's graph and stored timeline (None when none is stored), indexed once for plan queries."""

    def __init__(self, graph: PatientGraph, timeline: PatientTimeline | None = None):
        self.graph = graph
        self.timeline = timeline

    @classmethod
    def of(cls, graph: PatientGraph, timeline: PatientTimeline | None = None) -> PatientEntry:
        return cls(graph, timeline)

    @property
    def subject_id(self) -> int:
        return self.graph.subject_id

    @cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str | None]]:
        """Dated source events in (time, row) order: times, values, codes, ids, texts."""
        nodes = self.graph.nodes
        types = nodes.column("type").to_numpy()
        times_col = nodes.column("time")
        dated = np.isin(types, _SOURCE_TYPES) & times_col.is_valid().to_numpy(zero_copy_only=False)
        dated &= nodes.column("row").is_valid().to_numpy(zero_copy_only=False)
        keep = np.flatnonzero(dated)
        times = times_col.to_numpy(zero_copy_only=False).astype("datetime64[us]")[keep]
        order = np.argsort(times, kind="stable")  # the node table is in (time, row) order already: stable keeps it
        keep = keep[order]
        values = nodes.column("value").to_numpy(zero_copy_only=False).astype(float)[keep]
        codes = np.asarray(nodes.column("code").to_pylist(), dtype=object)[keep]
        ids = np.asarray(nodes.column("id").to_pylist(), dtype=object)[keep]
        texts = nodes.column("text").to_pylist()
        return times[order], values, codes, ids, [texts[i] for i in keep.tolist()]

    @cached_property
    def _by_code(self) -> dict[str, np.ndarray]:
        _, _, codes, _, _ = self._table
        order = np.argsort(codes.astype(str), kind="stable")
        sorted_codes = codes[order]
        groups: dict[str, np.ndarray] = {}
        if len(order):
            cuts = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
            for part in np.split(order, cuts):
                groups[str(codes[part[0]])] = part
        return groups

    @cached_property
    def _rows(self) -> dict[str, Rows]:
        times, values, _, ids, _ = self._table
        return {code: Rows(times[k], values[k], ids[k]) for code, k in self._by_code.items()}

    def build_index(self) -> None:
        """Build the plan index now (otherwise the first plan builds what it needs): rows by code, notes, names."""
        _ = self._rows, self.notes, self.vocabulary

    def rows_of(self, *codes: str) -> Rows:
        """The rows of ``codes`` in (time, row) order (empty when the patient has none)."""
        if len(codes) == 1:
            return self._rows.get(codes[0], _EMPTY)
        positions = np.sort(np.concatenate([self._by_code.get(c, np.array([], np.int64)) for c in codes]))
        times, values, _, ids, _ = self._table
        return Rows(times[positions], values[positions], ids[positions])

    def all_rows(self) -> Rows:
        times, values, _, ids, _ = self._table
        return Rows(times, values, ids)

    @cached_property
    def notes(self) -> tuple[Rows, list[str]]:
        """Note rows (time, no value, id) and their texts, in (time, row) order."""
        times, values, codes, ids, texts = self._table
        keep = np.flatnonzero(np.char.startswith(codes.astype(str), "NOTE//"))
        return Rows(times[keep], values[keep], ids[keep]), [texts[i] or "" for i in keep.tolist()]

    def code_of(self, node_id: str) -> str:
        return self.graph.event(node_id).code

    @cached_property
    def vocabulary(self) -> Vocabulary:
        graph = self.graph
        units: dict[str, str | None] = {}
        unit_column = graph.nodes.column("unit").to_pylist()
        code_column = graph.nodes.column("code").to_pylist()
        for code, unit in zip(code_column, unit_column):
            if unit is not None and code not in units:
                units[code] = unit
        descriptions = {c.code: c.description for c in graph.codes()}
        terms = []
        for code, positions in self._by_code.items():
            values = self._table[1][positions]
            terms.append(Term(code, descriptions.get(code), units.get(code), len(positions),
                              bool(np.isfinite(values).any())))
        return Vocabulary(terms, graph.subject_id)


def open_entry(store: str | os.PathLike, subject_id: int) -> PatientEntry:
    """The store's entry of ``subject_id``: its graph, and its timeline when one is stored and current."""
    from vista.query.state import load_timeline
    from vista.toa import TimelineStore

    graph = load_graph(open_graph_store(store), subject_id)
    timeline = None
    if TimelineStore(store).path_of(subject_id).is_file():
        timeline = load_timeline(store, subject_id, graph)
    return PatientEntry(graph, timeline)
