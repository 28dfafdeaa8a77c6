"""The cohort page's rows: every patient of a store with its build status, and the headline variables of the patients
on the page — without opening every patient.

What is read, and when (so a 100,000-patient store opens in well under a second):

- the store's manifest (`StoreManifest`: its parquet parts read by polars, once) — who is in the store and where
  each graph is (a `vista.graph.GraphStore` builds a Python object per manifest row: 0.8 s at 100,000 patients);
- a job's ``patients.parquet`` when the store is a `vista build` output (five columns, read once) — which builds
  failed (an ``error`` row: the stage and the one-line reason) or are partial (``failed``: some LLM calls failed);
- the names in ``toa/`` and ``display/`` (one directory listing each, per request) — what has been built;
- the display JSON of the patients **on the page only** — diagnosis, histology, stage, current therapy, and whether
  the display is incomplete or was built from another version of the graph (stale); a page's patients without a
  display show their first cancer diagnosis code instead, read from their graph.

Filtering by status and searching subject ids run over those arrays. A text search (diagnosis, histology, stage,
therapy) has to read displays: it reads them in subject order and stops at a page of matches or after
`SCAN_BUDGET` files, handing back a cursor to go on from, so no request reads the whole store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow.compute as pc

from vista.display.model import DisplayError, TumorBoardDisplay
from vista.display.store import DISPLAY_DIR, DisplayStore
from vista.graph import GraphStore, NodeType, PatientGraph
from vista.graph.store import read_stored_graph
from vista.graph.errors import GraphFileError
from vista.graph.store import MANIFEST_DIR, MANIFEST_FILE
from vista.toa.store import TOA_DIR

CANCER_CODE_PREFIX = "ICD10CM//C"
"""A graph-only patient's diagnosis column: its first code under this prefix (malignant neoplasms)."""
PAGE_SIZE = 50
SCAN_BUDGET = 2000
"""Most display files one text-search request reads before it answers with what it found and a cursor."""
JOB_ROWS = "patients.parquet"
Status = Literal["display", "timeline", "graph only", "partial", "failed", "stale"]
STATUSES: tuple[Status, ...] = ("display", "timeline", "graph only", "partial", "failed", "stale")
HEADLINE = {"diagnosis": ("primary_site", "diagnosis_date"), "histology": ("histology",), "stage": ("stage",),
            "current_line": ("current_therapy",)}
"""Cohort column -> the display variables it shows (the diagnosis is the primary site and its date)."""


@dataclass(frozen=True, slots=True)
class CohortRow:
    """One patient as the cohort page lists it; variables are None when no display is built."""

    subject_id: int
    nodes: int | None
    status: Status
    detail: str
    diagnosis: str | None = None
    histology: str | None = None
    stage: str | None = None
    current_line: str | None = None

    def matches(self, text: str) -> bool:
        """True when ``text`` (lower case) occurs in one of the row's variables."""
        return any(text in (v or "").lower() for v in (self.diagnosis, self.histology, self.stage, self.current_line))


@dataclass(frozen=True, slots=True)
class CohortPage:
    """One page of the cohort: its rows, the total count when known (a text search does not know it), and where the
    previous / next pages start (a 1-based page number, or a subject-id cursor for a text search)."""

    rows: tuple[CohortRow, ...]
    total: int | None
    patients: int
    page: int
    pages: int | None
    next_after: int | None
    scanned_to: int | None


def _headline(display: TumorBoardDisplay) -> dict[str, str]:
    values = {v.key: v.shown for v in display.values}
    out = {}
    for column, keys in HEADLINE.items():
        parts = [values[k] for k in keys if k in values]
        out[column] = parts[0] + (f" ({parts[1]})" if len(parts) > 1 and parts[1] != parts[0] else "") if parts else ""
    return out


def _listing(directory: Path) -> set[int]:
    """Subject ids with a ``<sid>.json`` in ``directory`` (empty when it does not exist)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return set()
    return {int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()}


class StoreManifest:
    """The whole-record graphs of a store as one polars frame (subject_id, nodes, content_hash, file), read from its
    manifest parts (the newest row of each task wins, as in `vista.graph.GraphStore`), and a patient's graph read
    through its locator (`vista.graph.store.read_stored_graph`: a pack record, or a file of a former layout) — what
    the pages need, without a Python object per manifest row."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        parts = sorted((self.root / MANIFEST_DIR).glob("part-*.parquet"))  # part-<zero-padded seq>-<id>: seq order
        columns = ["task", "subject_id", "prediction_time", "nodes", "content_hash", "file"]
        if (self.root / MANIFEST_FILE).is_file() or not parts:  # the former single-file layout: GraphStore reads it
            frame = GraphStore(self.root).manifest().select(columns[1:])
        else:
            try:
                frame = (pl.scan_parquet([str(p) for p in parts]).select(columns)
                         .unique(subset="task", keep="last", maintain_order=True)
                         .filter(pl.col("prediction_time").is_null()).drop("task", "prediction_time")
                         .sort("subject_id").collect())
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise GraphFileError(f"{self.root}: unreadable graph store manifest ({type(exc).__name__}: {exc})") from None
        self.subject_ids: np.ndarray = frame["subject_id"].to_numpy()
        self.nodes: np.ndarray = frame["nodes"].to_numpy()
        self.hashes: list[str] = frame["content_hash"].to_list()
        self.files: list[str] = frame["file"].to_list()

    def __len__(self) -> int:
        return len(self.subject_ids)

    def position(self, subject_id: int) -> int | None:
        i = int(np.searchsorted(self.subject_ids, subject_id))
        return i if i < len(self.subject_ids) and self.subject_ids[i] == subject_id else None

    def __contains__(self, subject_id: object) -> bool:
        return isinstance(subject_id, int) and self.position(subject_id) is not None

    def content_hash(self, subject_id: int) -> str | None:
        i = self.position(subject_id)
        return None if i is None else self.hashes[i]

    def load(self, subject_id: int) -> PatientGraph:
        """The stored graph of ``subject_id`` (its columnar copy; GraphML when it has none), as `GraphStore.load`."""
        i = self.position(subject_id)
        if i is None:
            raise KeyError(f"{self.root}: no graph for subject {subject_id}")
        return read_stored_graph(self.root, self.files[i])


class Cohort:
    """A graph store read for the cohort page (see the module docstring); the manifest and job rows are read once."""

    def __init__(self, root: str | os.PathLike, manifest: StoreManifest | None = None):
        self.root = Path(root)
        self.manifest = manifest if manifest is not None else StoreManifest(root)

    @cached_property
    def _manifest(self) -> tuple[np.ndarray, np.ndarray]:
        return self.manifest.subject_ids, self.manifest.nodes

    @cached_property
    def _nodes_of(self) -> dict[int, int]:
        return dict(zip(self._manifest[0].tolist(), self._manifest[1].tolist()))

    @cached_property
    def _job(self) -> dict[int, tuple[str, str]]:
        """Subjects whose job row is not ok: subject -> (status, one-line reason)."""
        path = self.root / JOB_ROWS
        if not path.is_file():
            return {}
        scan = pl.scan_parquet(path)
        whole = [pl.col("prediction_time").is_null()] if "prediction_time" in scan.collect_schema().names() else []
        rows = (scan.filter(pl.col("status") != "ok", pl.col("subject_id").is_not_null(), *whole)  # whole records
                .select("subject_id", "status", "error_stage", "error").collect())
        out = {}
        for sid, status, stage, error in rows.iter_rows():
            first = (error or "").splitlines()[0][:300] if error else ""
            if status == "error":
                out[sid] = ("failed", f"stopped in {stage or '?'}: {first}")
            else:
                out[sid] = ("partial", f"some LLM calls of {stage or 'a stage'} failed: {first}".rstrip(": "))
        return out

    @cached_property
    def subjects(self) -> np.ndarray:
        """Every patient: those with a graph and those whose build failed before one was stored, sorted."""
        with_graph = self._manifest[0]
        failed = np.array(sorted(set(self._job) - set(with_graph.tolist())), np.int64)
        return np.union1d(with_graph, failed) if len(failed) else with_graph

    def __len__(self) -> int:
        return len(self.subjects)

    def cheap_status(self, subjects: np.ndarray) -> np.ndarray:
        """The status known without reading a display: failed/partial (job rows), display, timeline, graph only."""
        displays, timelines = _listing(self.root / DISPLAY_DIR), _listing(self.root / TOA_DIR)
        job = self._job
        out = np.empty(len(subjects), dtype=object)
        for i, sid in enumerate(subjects.tolist()):
            if sid in job:
                out[i] = job[sid][0]
            elif sid in displays:
                out[i] = "display"
            elif sid in timelines:
                out[i] = "timeline"
            else:
                out[i] = "graph only"
        return out

    def row(self, subject_id: int, cheap: str) -> CohortRow:
        """The row of one patient, reading its display when it has one."""
        nodes = self._nodes_of.get(subject_id)
        if cheap in ("failed", "partial") and subject_id in self._job:
            status, detail = self._job[subject_id]
        else:
            status, detail = cheap, {"timeline": "timeline built, no display yet",
                                     "graph only": "graph only: no timeline or display built"}.get(cheap, "")
        if cheap == "failed" or nodes is None:
            return CohortRow(subject_id, nodes, status, detail)  # type: ignore[arg-type]
        if not (self.root / DISPLAY_DIR / f"{subject_id}.json").is_file():
            return CohortRow(subject_id, nodes, status, detail, diagnosis=self._coded_diagnosis(subject_id))  # type: ignore[arg-type]
        try:
            display = DisplayStore(self.root).load(subject_id)
        except DisplayError as exc:
            return CohortRow(subject_id, nodes, "failed", f"unreadable display: {exc}")
        if display.graph_hash != self.manifest.content_hash(subject_id):
            status, detail = "stale", "display built from another version of the graph (the data changed)"
        elif (gaps := display.incomplete_reason()) is not None:
            status, detail = "partial", gaps
        return CohortRow(subject_id, nodes, status, detail, **_headline(display))  # type: ignore[arg-type]

    def _coded_diagnosis(self, subject_id: int) -> str | None:
        """Without a display: the patient's first cancer diagnosis code (ICD-10-CM C00-C96) and its date, read from
        the graph (one columnar read), marked as coded; None when it has none."""
        try:
            graph = self.manifest.load(subject_id)
        except (GraphFileError, OSError):
            return None
        nodes = graph.nodes
        codes = nodes.column("code")
        hit = pc.and_(pc.equal(nodes.column("type"), NodeType.EVENT.code),
                      pc.fill_null(pc.starts_with(codes, CANCER_CODE_PREFIX), False))
        found = nodes.filter(hit).select(["code", "time"]).slice(0, 1).to_pylist()
        if not found:
            return None
        code, time = found[0]["code"], found[0]["time"]
        try:
            name = graph.code(code).description or code
        except KeyError:
            name = code
        return f"{name}{f' ({time:%Y-%m-%d})' if time else ''} · coded"

    def page(self, *, query: str = "", status: str = "", page: int = 1, after: int | None = None,
             size: int = PAGE_SIZE) -> CohortPage:
        """One page of rows matching ``status`` (one of `STATUSES`, or empty) and ``query`` (digits: subject ids
        starting so; other text: a word of the diagnosis, histology, stage or therapy)."""
        subjects = self.subjects
        cheap = self.cheap_status(subjects)
        query = query.strip()
        if query.isdigit():
            mask = np.char.startswith(subjects.astype(str), query)
            subjects, cheap = subjects[mask], cheap[mask]
            query = ""
        if status in ("failed", "timeline", "graph only"):
            mask = cheap == status
            subjects, cheap = subjects[mask], cheap[mask]
        elif status in ("display", "partial", "stale"):  # decided only by reading the display (or the job row)
            mask = np.isin(cheap, ["display", "partial"])
            subjects, cheap = subjects[mask], cheap[mask]
        needs_read = bool(query) or status in ("display", "partial", "stale")
        if not needs_read:
            pages = max(1, -(-len(subjects) // size))
            page = min(max(page, 1), pages)
            chosen = range((page - 1) * size, min(page * size, len(subjects)))
            rows = tuple(self.row(int(subjects[i]), cheap[i]) for i in chosen)
            return CohortPage(rows, len(subjects), len(self), page, pages, None, None)
        start = int(np.searchsorted(subjects, after, side="right")) if after is not None else 0
        text = query.lower()
        found: list[CohortRow] = []
        last = None
        for i in range(start, min(len(subjects), start + SCAN_BUDGET)):
            row = self.row(int(subjects[i]), cheap[i])
            last = int(subjects[i])
            if (not status or row.status == status) and (not text or row.matches(text)):
                found.append(row)
                if len(found) == size:
                    break
        more = last is not None and last != int(subjects[-1])
        return CohortPage(tuple(found), None, len(self), page, None, last if more else None, last)
