"""Run a `Plan` over one patient's `PatientEntry`: pure, deterministic, no model call; every result cites the graph
node ids (``e<k>``, or timeline ids ``t<k>`` for episodes) its value came from.

Names are resolved against the patient's own vocabulary (`vista.query.entry.Vocabulary`); windows are date ranges
(``window``), the dates of a timeline episode (``episode``) or a drug's administration span (``during``), combined
by intersection; then the target's rows in that range are aggregated.

>>> from datetime import datetime
>>> from vista.graph.build import build_graph
>>> from vista.query.entry import PatientEntry
>>> from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
>>> rec = PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2020, 1, 5, 9), "LOINC//718-7", 11.2, None),
...     Event("e1", datetime(2020, 2, 5, 9), "LOINC//718-7", 9.1, None), Event("e2", datetime(2020, 3, 1), "LOINC//718-7", 10.0, None)])
>>> entry = PatientEntry(build_graph(rec, CodeCatalog([CodeInfo("LOINC//718-7", "Hemoglobin [Mass/volume] in Blood", unit="g/dL")])))
>>> r = run_plan(entry, Plan(measure="hemoglobin", aggregate="min"))
>>> r.value, r.unit, r.date.isoformat(), r.cited
(9.1, 'g/dL', '2020-02-05', ('e1',))
>>> r = run_plan(entry, Plan(measure="LOINC//718-7", aggregate="min", unit="g/L", window={"start": "2020-02-10"}))
>>> r.value, r.unit, r.cited
(100.0, 'g/L', ('e2',))
"""

from __future__ import annotations

import datetime as dt
import operator
import re
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from vista.query.entry import PatientEntry, Rows
from vista.query.errors import PlanError, UnknownNameError
from vista.query.plan import Aggregate, EpisodeSelector, Plan
from vista.toa import Episode

MAX_CITED = 200
"""Most ids a result cites (a ``count`` or ``list`` over more rows says how many were left out)."""
_DAY = np.timedelta64(1, "D")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}
UNIT_FACTORS: dict[tuple[str, str], float] = {
    ("g/dL", "g/L"): 10.0, ("g/L", "g/dL"): 0.1, ("g/dL", "mg/dL"): 1000.0, ("mg/dL", "g/dL"): 0.001,
    ("mg/dL", "mg/L"): 10.0, ("mg/L", "mg/dL"): 0.1, ("10*3/uL", "10*9/L"): 1.0, ("10*9/L", "10*3/uL"): 1.0,
    ("10*3/uL", "K/uL"): 1.0, ("K/uL", "10*3/uL"): 1.0, ("10*9/L", "K/uL"): 1.0, ("K/uL", "10*9/L"): 1.0,
    ("kg", "g"): 1000.0, ("g", "kg"): 0.001, ("kg", "lb"): 2.2046226218, ("lb", "kg"): 0.45359237,
    ("cm", "m"): 0.01, ("m", "cm"): 100.0, ("mmol/L", "mEq/L"): 1.0, ("mEq/L", "mmol/L"): 1.0,
}
"""Unit conversions by factor (``value * factor``); temperature is affine (`convert`)."""


class PlanResult(BaseModel):
    """What a plan found: the value (a number, a count, an episode id or None), its unit and date, the rows counted,
    the window used and the node ids cited."""

    model_config = ConfigDict(frozen=True)

    subject_id: int
    plan: Plan
    target: str = Field(description="What was looked for, as resolved: the code(s), the note pattern or the selector.")
    target_name: str = Field(description="The resolved name (catalog description head) or the pattern.")
    aggregate: Aggregate
    value: float | int | str | None
    unit: str | None = None
    date: dt.date | None = None
    n: int = Field(ge=0, description="Rows (or episodes) in the window before aggregation.")
    cited: tuple[str, ...] = Field(description="Graph node ids (e<k>) or timeline ids (t<k>) the value comes from.")
    cited_omitted: int = Field(default=0, ge=0, description="Ids over MAX_CITED not listed.")
    window_start: dt.date | None = None
    window_end: dt.date | None = None
    trend: str | None = Field(default=None, description="rising, falling or stable (aggregate trend).")
    dates: tuple[dt.date, ...] = Field(default=(), description="Dates of the listed rows (aggregate list).")
    values: tuple[float | None, ...] = Field(default=(), description="Values of the listed rows (aggregate list).")


def convert(values: np.ndarray, unit: str | None, wanted: str | None, subject_id: int, name: str) -> tuple[np.ndarray, str | None]:
    """``values`` in ``wanted`` units (unchanged when it is None or the same); `PlanError` for an unknown conversion."""
    if wanted is None or unit is None or wanted == unit:
        return values, unit if wanted is None or unit is None else wanted
    if (unit, wanted) in UNIT_FACTORS:
        return values * UNIT_FACTORS[(unit, wanted)], wanted
    if {unit, wanted} <= {"Cel", "degC", "[degF]", "degF"}:
        to_f = wanted in ("[degF]", "degF")
        return (values * 9 / 5 + 32 if to_f else (values - 32) * 5 / 9), wanted
    raise PlanError(f"subject {subject_id}: {name} is recorded in {unit}; no known conversion to {wanted!r}")


def _day(t: np.datetime64) -> dt.date:
    return t.astype("datetime64[D]").item()


def _bound(day: dt.date | None) -> np.datetime64 | None:
    return None if day is None else np.datetime64(day, "us")


def episodes_matching(entry: PatientEntry, selector: EpisodeSelector) -> list[Episode]:
    """The stored timeline's episodes the selector picks (`PlanError` when no timeline is stored)."""
    timeline = entry.timeline
    if timeline is None:
        raise PlanError(f"subject {entry.subject_id}: the plan names an episode but no timeline is stored; build it "
                        f"with `vista timeline --subject {entry.subject_id}` (or use 'window' or 'during')")
    found = [e for e in timeline.episodes if (selector.kind is None or e.kind.value == selector.kind)
             and (selector.line is None or e.line == selector.line)]
    if selector.drug is not None:
        from vista.toa.drugs import drugs_in

        by_id = {e.event_id: e for e in timeline.events}
        wanted = drugs_in(selector.drug) or frozenset({selector.drug.lower()})
        found = [e for e in found if e.kind.value == "treatment_line"
                 and any(wanted & drugs_in(by_id[i].description) for i in e.event_ids if i in by_id)]
    return found


def _episode_window(entry: PatientEntry, selector: EpisodeSelector) -> tuple[dt.date, dt.date]:
    found = episodes_matching(entry, selector)
    if not found:
        have = ", ".join(f"{e.episode_id} {e.kind.value}" + (f" {e.line}" if e.line else "")
                         for e in entry.timeline.episodes) or "none"  # type: ignore[union-attr]
        raise PlanError(f"subject {entry.subject_id}: no episode matches {selector.model_dump_json(exclude_none=True)} "
                        f"(its timeline has: {have})")
    return found[0].start, found[0].end


def _window(entry: PatientEntry, plan: Plan) -> tuple[dt.date | None, dt.date | None]:
    """The intersection of the plan's window, episode and drug span (inclusive dates; None: open)."""
    spans: list[tuple[dt.date | None, dt.date | None]] = []
    if plan.window is not None:
        spans.append((plan.window.start, plan.window.end))
    if plan.episode is not None:
        spans.append(_episode_window(entry, plan.episode))
    if plan.during is not None:
        terms = entry.vocabulary.resolve_all(plan.during)
        rows = entry.rows_of(*(t.code for t in terms))
        spans.append((_day(rows.times[0]), _day(rows.times[-1])))
    starts = [s for s, _ in spans if s is not None]
    ends = [e for _, e in spans if e is not None]
    return (max(starts) if starts else None), (min(ends) if ends else None)


def run_plan(entry: PatientEntry, plan: Plan) -> PlanResult:
    """The result of ``plan`` over ``entry`` (`PlanError`/`UnknownNameError` for names, episodes or units it lacks)."""
    start, end = _window(entry, plan)
    common = {"subject_id": entry.subject_id, "plan": plan, "aggregate": plan.aggregate, "window_start": start,
              "window_end": end}
    if plan.episodes is not None:
        return _episodes_result(entry, plan, common)
    lo, hi = _bound(start), None if end is None else _bound(end) + _DAY  # type: ignore[operator]
    unit = None
    if plan.measure is not None:
        term = entry.vocabulary.resolve(plan.measure, measure=True)
        rows = entry.rows_of(term.code).window(lo, hi)
        rows = rows.take(np.isfinite(rows.values)) if len(rows) else rows
        values, unit = convert(rows.values, term.unit, plan.unit, entry.subject_id, term.name)
        rows = Rows(rows.times, values, rows.ids)
        if plan.where is not None and len(rows):
            rows = rows.take(_OPS[plan.where.op](rows.values, plan.where.value))
        target, name = term.code, term.name
    elif plan.events is not None:
        terms = _resolve_codes(entry, plan.events)
        rows = entry.rows_of(*(t.code for t in terms)).window(lo, hi)
        target, name = ",".join(t.code for t in terms), ", ".join(dict.fromkeys(t.name for t in terms))
        units = {t.unit for t in terms}
        unit = units.pop() if len(units) == 1 else None
    else:
        notes, texts = entry.notes
        pattern = re.compile(plan.notes, re.IGNORECASE)  # type: ignore[arg-type]
        a = 0 if lo is None else int(np.searchsorted(notes.times, lo, "left"))
        b = len(notes) if hi is None else int(np.searchsorted(notes.times, hi, "left"))
        keep = np.array([a + k for k, text in enumerate(texts[a:b]) if pattern.search(text)], dtype=np.int64)
        rows = notes.take(keep)
        target = name = plan.notes  # type: ignore[assignment]
    return _aggregate(rows, plan.aggregate, unit, {**common, "target": target, "target_name": name})


def _resolve_codes(entry: PatientEntry, names: Sequence[str]):
    """The codes a code set means for this patient: codes it lacks are skipped (a code set lists what to look
    for), names must resolve; `UnknownNameError` when nothing in the set is in the record."""
    terms, seen, missing = [], set(), None
    for name in names:
        try:
            found = entry.vocabulary.resolve_all(name)
        except UnknownNameError as exc:
            if "//" not in name:
                raise
            missing = missing or exc
            continue
        for term in found:
            if term.code not in seen:
                seen.add(term.code)
                terms.append(term)
    if not terms:
        raise missing or PlanError(f"subject {entry.subject_id}: the plan's code set is empty")
    return terms


def _cite(ids: np.ndarray) -> dict:
    listed = ids[:MAX_CITED].tolist()
    return {"cited": tuple(listed), "cited_omitted": max(0, len(ids) - MAX_CITED)}


def _aggregate(rows: Rows, aggregate: str, unit: str | None, common: dict) -> PlanResult:
    n = len(rows)
    if n == 0:
        return PlanResult(**common, value=0 if aggregate == "count" else None, unit=unit, n=0, cited=())
    values, times, ids = rows.values, rows.times, rows.ids
    numeric = np.isfinite(values)
    if aggregate in ("min", "max", "mean", "change", "trend") and not numeric.all():
        raise PlanError(f"subject {common['subject_id']}: {common['target_name']!r} rows carry no numeric value; "
                        f"'{aggregate}' needs a measurement (use count, first, last or list)")
    if aggregate in ("min", "max"):
        k = int(np.argmin(values) if aggregate == "min" else np.argmax(values))
        return PlanResult(**common, value=float(values[k]), unit=unit, date=_day(times[k]), n=n, cited=(ids[k],))
    if aggregate in ("first", "last"):
        k = 0 if aggregate == "first" else n - 1
        value = float(values[k]) if numeric[k] else None
        return PlanResult(**common, value=value, unit=unit if value is not None else None, date=_day(times[k]), n=n,
                          cited=(ids[k],))
    if aggregate == "count":
        return PlanResult(**common, value=n, unit=None, date=_day(times[-1]), n=n, **_cite(ids))
    if aggregate == "mean":
        return PlanResult(**common, value=float(values.mean()), unit=unit, date=_day(times[-1]), n=n, **_cite(ids))
    if aggregate == "change":
        return PlanResult(**common, value=float(values[-1] - values[0]), unit=unit, date=_day(times[-1]), n=n,
                          cited=(ids[0], ids[-1]) if n > 1 else (ids[0],))
    if aggregate == "trend":
        return _trend(rows, unit, common)
    listed = min(n, MAX_CITED)
    return PlanResult(**common, value=n, unit=unit, date=_day(times[0]), n=n, **_cite(ids),
                      dates=tuple(_day(t) for t in times[:listed]),
                      values=tuple(float(v) if np.isfinite(v) else None for v in values[:listed]))


def _trend(rows: Rows, unit: str | None, common: dict) -> PlanResult:
    """Least-squares slope per 30 days; stable when the fitted change over the span is under 5% of the mean."""
    n = len(rows)
    days = (rows.times - rows.times[0]) / _DAY
    slope = float(np.polyfit(days, rows.values, 1)[0]) * 30 if n > 1 and days[-1] > 0 else 0.0
    span_change = slope / 30 * float(days[-1]) if n > 1 else 0.0
    scale = abs(float(rows.values.mean())) or 1.0
    label = "stable" if abs(span_change) < 0.05 * scale else ("rising" if slope > 0 else "falling")
    return PlanResult(**common, value=round(slope, 6), unit=f"{unit}/30 days" if unit else "per 30 days",
                      date=_day(rows.times[-1]), n=n, trend=label, **_cite(rows.ids))


def _episodes_result(entry: PatientEntry, plan: Plan, common: dict) -> PlanResult:
    selector = plan.episodes
    assert selector is not None
    found = episodes_matching(entry, selector)
    start, end = common["window_start"], common["window_end"]
    found = [e for e in found if (start is None or e.end >= start) and (end is None or e.start <= end)]
    name = selector.model_dump_json(exclude_none=True)
    common = {**common, "target": name, "target_name": name}
    if not found:
        return PlanResult(**common, value=0 if plan.aggregate == "count" else None, n=0, cited=())
    if plan.aggregate in ("min", "max", "mean", "change", "trend"):
        raise PlanError(f"subject {entry.subject_id}: episodes have dates, not values; use first, last, count or list")
    by_id = {e.event_id: e for e in entry.timeline.events}  # type: ignore[union-attr]

    def cited(episode: Episode) -> tuple[str, ...]:
        anchor = episode.anchor_event_id
        refs = by_id[anchor].source_event_refs if anchor in by_id else ()
        return tuple(dict.fromkeys((anchor, *refs))) if anchor else ()

    if plan.aggregate in ("count", "list"):
        ids = np.array([i for e in found for i in cited(e)], dtype=object)
        return PlanResult(**common, value=len(found), n=len(found), date=found[0].start, **_cite(ids),
                          dates=tuple(e.start for e in found))
    episode = found[0] if plan.aggregate == "first" else found[-1]
    return PlanResult(**common, value=episode.episode_id, date=episode.start, n=len(found), cited=cited(episode))


__all__ = ["MAX_CITED", "PlanResult", "UnknownNameError", "convert", "episodes_matching", "run_plan"]
