"""Check refs against the graph: unknown refs are dropped, an event left with none is rejected, and so is an event
dated outside its cited events' dates (beyond the unifier's `MERGE_WINDOW_DAYS`); and keep refs honest after the
graph changes (versioned provenance).

Refs must be source events of the patient's graph (`PatientGraph.has_event`); when ``allowed`` is given (the ids a
chunk showed) they must also be among those, so a sub-agent cannot cite rows it never saw. Nothing unverified is
ever kept: the caller gets the surviving event (or None) and a `RejectedEvent` record for what was removed.

**The id scheme: shard + row, versioned by the graph's content hash.** A source event's id stays ``e<k>`` (``k``
= offset of its row in the subject's block of its shard; `vista.shared.records`), and a ref is only meaningful together
with the version of the graph it was made against: `graph_version` (the graph store's content hash, a digest of
every row's id, time, code, value, text, provenance row and unit, the catalog entries and the build settings).
Stored timelines (and displays) record it, plus a short digest of every cited event (`ref_fingerprint`); every read
that resolves refs compares it with the current graph (`check_provenance`) and refuses a mismatch with one message
naming the patient, both versions and the cited refs that now open other rows or are gone. Re-reading unchanged
data gives the same ids and the same version, so stored refs survive any number of re-reads.

Why not content-derived ids: the ids are what the models copy from the serialized record (``e143`` is 4 tokens, a
digest 8-12, and a 135M model copies short ids far more reliably); the generator's ground truth, the XML exchange
format and the ``RowRef`` provenance (row = ``first_row + k``) are all positional; and MEDS holds exact duplicate
rows, which a content id can only tell apart by adding a position back. Content ids would let refs to unchanged
rows survive a data change, but a timeline extracted from an older graph is stale anyway (it never saw the new
rows), so it must be rebuilt as a whole: the version check makes that explicit instead of silently opening other
rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from vista.graph import NodeType, PatientGraph
from vista.toa.errors import StaleProvenanceError
from vista.toa.model import ExtractedEvent, RejectedEvent
from vista.toa.profile import EventProfile
from vista.toa.unify import MERGE_WINDOW_DAYS


UNKNOWN_REFS_DROPPED = "unknown refs dropped"
"""Reason of the record left when an event is kept but some of its refs were removed."""
NO_SHOWN_REF = "none of its source_event_refs is a shown event of the graph"


def date_problem(day: dt.date, refs: Iterable[str], graph: PatientGraph,
                 window_days: int = MERGE_WINDOW_DAYS) -> str | None:
    """Why ``day`` is not a date its cited events can bear, or None (also when no cited event has a date).

    An event may not be dated more than the unifier's window after the latest of its cited events (rows recorded
    earlier cannot attest it), nor more than the window before the earliest of them — unless one of them is a note,
    whose text can recount an earlier event (a history or recap note).

    >>> from vista.graph import build_graph
    >>> from vista.shared.records import CodeCatalog, Event, PatientRecord
    >>> g = build_graph(PatientRecord(1, "data/train/0.parquet", 0, [
    ...     Event("e0", dt.datetime(2022, 1, 10), "ICD10CM//C34.1", None, None),
    ...     Event("e1", dt.datetime(2022, 3, 1), "CPT//71260", None, None),
    ...     Event("e2", dt.datetime(2022, 3, 1), "NOTE//PROGRESS", None, "Lobectomy in 2019.")]), CodeCatalog([]))
    >>> date_problem(dt.date(2024, 7, 15), ["e0", "e1"], g)
    "dated 2024-07-15, after its cited events' dates (2022-01-10 to 2022-03-01, ±3 days)"
    >>> date_problem(dt.date(2019, 5, 2), ["e1"], g)
    "dated 2019-05-02, before its cited events' dates (2022-03-01, ±3 days)"
    >>> date_problem(dt.date(2019, 5, 2), ["e2"], g) is None, date_problem(dt.date(2022, 3, 4), ["e1"], g) is None
    (True, True)
    """
    cited = [graph.event(r) for r in refs]
    dates = sorted(e.time.date() for e in cited if e.time is not None)
    if not dates:
        return None
    window = dt.timedelta(days=window_days)
    if day > dates[-1] + window:
        side = "after"
    elif day < dates[0] - window and not any(e.type is NodeType.NOTE for e in cited):
        side = "before"
    else:
        return None
    span = dates[0].isoformat() if dates[0] == dates[-1] else f"{dates[0].isoformat()} to {dates[-1].isoformat()}"
    return f"dated {day.isoformat()}, {side} its cited events' dates ({span}, ±{window_days} days)"


@dataclass(frozen=True, slots=True)
class CheckedEvent:
    """A proposed event whose type is in the profile and whose refs (deduplicated, in order) all resolve."""

    event: ExtractedEvent
    refs: tuple[str, ...]
    subtype: str


def check_event(event: ExtractedEvent, graph: PatientGraph, profile: EventProfile, *, chunk: int | None,
                allowed: Collection[str] | None = None) -> tuple[CheckedEvent | None, RejectedEvent | None]:
    """(the checked event or None, the record of what was dropped or None when nothing was)."""
    if event.type not in profile.type_names:
        return None, RejectedEvent(chunk=chunk, reason=f"type {event.type[:32]!r} is not in profile {profile.name!r}")
    refs = tuple(dict.fromkeys(r.strip() for r in event.source_event_refs))
    good = tuple(r for r in refs if graph.has_event(r) and (allowed is None or r in allowed))
    dropped = tuple(r for r in refs if r not in good)
    subtype = event.subtype.strip().lower() or "other"
    if subtype not in profile.subtypes_of(event.type):
        subtype = "other"
    if not event.description.strip():
        return None, RejectedEvent(chunk=chunk, reason="empty description", dropped_refs=dropped)
    if not good:
        reason = "no source_event_refs" if not refs else NO_SHOWN_REF
        return None, RejectedEvent(chunk=chunk, reason=reason, dropped_refs=dropped, problem="unknown_refs",
                                   date=event.date)
    if (misdated := date_problem(event.date, good, graph)) is not None:
        return None, RejectedEvent(chunk=chunk, reason=misdated, dropped_refs=dropped, problem="misdated",
                                   date=event.date)
    record = RejectedEvent(chunk=chunk, reason=UNKNOWN_REFS_DROPPED, dropped_refs=dropped) if dropped else None
    return CheckedEvent(event, good, subtype), record


TABLE_VERSION_PREFIX = "tables:"
"""Prefix of a version computed from the graph's tables (a graph built in memory, with no store content hash)."""
FINGERPRINT_CHARS = 12


def graph_version(graph: PatientGraph) -> str:
    """The version stamp of ``graph``: its content hash as the graph store computed it (`vista.graph.content_hash`,
    kept in the GraphML file and the store manifest), or, for a graph built in memory without one, a digest of its
    node and edge tables and info (computed once per graph object).
    """
    if graph.info.content_hash:
        return graph.info.content_hash
    cached = getattr(graph, "_vista_table_version", None)
    if cached is None:
        digest = hashlib.blake2b(digest_size=16)
        digest.update(repr(graph.info).encode("utf-8"))
        for table in (graph.nodes, graph.edges):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            digest.update(sink.getvalue())
        cached = TABLE_VERSION_PREFIX + digest.hexdigest()
        graph._vista_table_version = cached  # type: ignore[attr-defined]
    return cached


def ref_fingerprint(graph: PatientGraph, ref: str) -> str | None:
    """A short digest of what ``ref`` opens in ``graph`` (its kind, time, code, value, unit, text and source row),
    or None when ``ref`` is not a source event of the graph."""
    if not graph.has_event(ref):
        return None
    e = graph.event(ref)
    content = (e.type.value, e.time.isoformat() if e.time else None, e.code, e.value, e.unit, e.text,
               e.provenance.shard, e.provenance.row)
    return hashlib.blake2b(repr(content).encode("utf-8"), digest_size=FINGERPRINT_CHARS // 2).hexdigest()


def ref_fingerprints(graph: PatientGraph, refs: Iterable[str]) -> dict[str, str]:
    """``ref -> ref_fingerprint`` of every ref that is a source event of ``graph`` (each once)."""
    out: dict[str, str] = {}
    for ref in refs:
        if ref not in out:
            fingerprint = ref_fingerprint(graph, ref)
            if fingerprint is not None:
                out[ref] = fingerprint
    return out


def _short(version: str | None) -> str:
    if version is None:
        return "none recorded"
    return version.removeprefix(TABLE_VERSION_PREFIX)[:12]


def changed_refs(graph: PatientGraph, fingerprints: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(refs that now open a different event, refs that are no longer source events of ``graph``), each sorted."""
    changed, gone = [], []
    for ref, fingerprint in fingerprints.items():
        now = ref_fingerprint(graph, ref)
        if now is None:
            gone.append(ref)
        elif now != fingerprint:
            changed.append(ref)
    key = lambda r: (len(r), r)  # noqa: E731 - e2 before e10
    return sorted(changed, key=key), sorted(gone, key=key)


def _listed(refs: list[str], limit: int = 6) -> str:
    return ", ".join(refs[:limit]) + (f" and {len(refs) - limit} more" if len(refs) > limit else "")


def check_provenance(graph: PatientGraph, *, what: str, graph_hash: str | None, fingerprints: Mapping[str, str],
                     rebuild: str) -> None:
    """Refuse (`StaleProvenanceError`) a stored result whose refs were made against another version of ``graph``.

    ``what`` names the stored result (e.g. ``"the stored timeline store/toa/21.json"``) and ``rebuild`` the command
    or step that makes a current one; the message names the patient, both graph versions and the cited refs that
    now open other rows or are gone (or says that none of them did but the graph has other changes).
    """
    now = graph_version(graph)
    if graph_hash == now:
        return
    subject = graph.subject_id
    if graph_hash is None:
        raise StaleProvenanceError(
            f"subject {subject}: {what} records no MEDS Graph version (built before refs were versioned), so its refs "
            f"cannot be trusted to open the rows they were made from; {rebuild}")
    changed, gone = changed_refs(graph, fingerprints)
    if changed or gone:
        parts = []
        if changed:
            parts.append(f"{len(changed)} now open a different row ({_listed(changed)})")
        if gone:
            parts.append(f"{len(gone)} are no longer source events ({_listed(gone)})")
        detail = f"of its {len(fingerprints)} cited source events, " + " and ".join(parts)
    else:
        detail = (f"its {len(fingerprints)} cited source events are unchanged, but the graph has other changes "
                  "(rows it never saw, or edited rows it did not cite)")
    raise StaleProvenanceError(
        f"subject {subject}: {what} was built from another version of the patient's MEDS Graph (graph "
        f"{_short(graph_hash)} then, {_short(now)} now; the data or the graph build changed): {detail}; its refs "
        f"are refused; {rebuild}")
