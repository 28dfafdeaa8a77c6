"""Variables computed from the graph's structured data without a model (origin "structured").

Demographics come from the graph's patient info (static sex/race/ethnicity rows and the birth event); the age is
taken at the most recent clinical event. Height and weight are the latest LOINC body height (8302-2) and body weight
(29463-7) measurements; medications are the distinct drugs (codes of a medication vocabulary — RxNorm, NDC, ATC… —
or rows of a drug table) recorded in the last `MEDICATION_WINDOW_DAYS` days of the record. Each value cites the graph
events it rests on, so it traces to MEDS rows like any model-written value; an absent fact reads "Not documented".

>>> from datetime import datetime
>>> from vista.graph import build_graph
>>> from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
>>> rec = PatientRecord(5, "data/train/0.parquet", 0, [
...     Event("e0", None, "GENDER//F", None, None), Event("e1", None, "RACE//White", None, None),
...     Event("e2", datetime(1950, 6, 1), "MEDS_BIRTH", None, None),
...     Event("e3", datetime(2020, 7, 1, 9), "ENCOUNTER//AMB", None, None),
...     Event("e4", datetime(2020, 7, 1, 9), "LOINC//718-7", 12.0, None),
...     Event("e5", datetime(2020, 7, 1, 9), "LOINC//29463-7", 71.25, None),
...     Event("e6", datetime(2020, 7, 1, 9), "RXNORM//6809", None, None)])
>>> g = build_graph(rec, CodeCatalog([CodeInfo("RXNORM//6809", "metformin"), CodeInfo("LOINC//29463-7", "Body weight", unit="kg")]))
>>> v = demographics_value(g)
>>> v.value, v.source_refs, v.origin
('70 years, female, race White, ethnicity not documented', ('e2', 'e0', 'e1', 'e6'), 'structured')
>>> height_weight_value(g).value, height_weight_value(g).source_refs
('height not documented; weight 71.25 kg (2020-07-01)', ('e5',))
>>> medications_value(g).value
'metformin (last recorded 2020-07-01)'
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from vista.shared.coding.model import Category
from vista.shared.coding.vocabularies import VOCABULARY_CATEGORY
from vista.display.answers import NOT_DOCUMENTED
from vista.display.model import VariableValue
from vista.graph import PatientGraph
from vista.graph.model import GraphEvent
from vista.shared.meds import schema

_SEX_WORDS = {"F": "female", "M": "male"}
_DEMOGRAPHIC_VOCABULARIES = (schema.GENDER_PREFIX, schema.RACE_PREFIX, schema.ETHNICITY_PREFIX)
HEIGHT_CODE = f"{schema.LOINC}{schema.SEP}8302-2"
WEIGHT_CODE = f"{schema.LOINC}{schema.SEP}29463-7"
MEDICATION_WINDOW_DAYS = 365
"""Medications are those recorded within this many days before the latest clinical event (the current list)."""
MAX_MEDICATIONS = 15


def _timed(graph: PatientGraph) -> list[GraphEvent]:
    return [e for e in graph.events_in_order() if e.time is not None]


def demographics_value(graph: PatientGraph) -> VariableValue:
    """Age at the most recent record, sex, race and ethnicity, citing the birth, static and latest events."""
    demo = graph.info.demographics
    refs: list[str] = []
    birth = [e.event_id for e in graph.patient_events() if e.code == schema.BIRTH_CODE]
    refs.extend(birth)
    refs.extend(e.event_id for e in graph.patient_events() if schema.vocabulary(e.code) in _DEMOGRAPHIC_VOCABULARIES)
    timed = _timed(graph)
    latest = timed[-1] if timed else None
    age = demo.age_at(latest.time) if latest is not None else None
    if age is not None and latest is not None:
        refs.append(latest.event_id)
    parts = [f"{int(age)} years" if age is not None else "age not documented",
             _SEX_WORDS.get(demo.sex or "", demo.sex.lower()) if demo.sex else "sex not documented",
             f"race {demo.race}" if demo.race else "race not documented",
             f"ethnicity {demo.ethnicity}" if demo.ethnicity else "ethnicity not documented"]
    return VariableValue(key="demographics", value=", ".join(parts), source_refs=tuple(dict.fromkeys(refs)),
                         origin="structured")


def _latest_measure(timed: list[GraphEvent], code: str) -> GraphEvent | None:
    found = [e for e in timed if e.code == code and e.value is not None]
    return found[-1] if found else None


def height_weight_value(graph: PatientGraph) -> VariableValue:
    """The latest body height and weight with their units and dates ("Not documented" when neither is recorded)."""
    timed = _timed(graph)
    parts, refs = [], []
    for word, code, unit in (("height", HEIGHT_CODE, "cm"), ("weight", WEIGHT_CODE, "kg")):
        event = _latest_measure(timed, code)
        if event is None or event.time is None:
            parts.append(f"{word} not documented")
            continue
        parts.append(f"{word} {event.value:g} {event.unit or unit} ({event.time.date().isoformat()})")
        refs.append(event.event_id)
    value = "; ".join(parts) if refs else NOT_DOCUMENTED
    return VariableValue(key="height_weight", value=value, source_refs=tuple(refs), origin="structured")


def is_medication(event: GraphEvent) -> bool:
    """A drug row: its code's vocabulary is a medication vocabulary, or its source table says it is a drug."""
    kind = event.attribute("kind")
    if kind is not None:
        return kind == Category.MEDICATION.value
    return VOCABULARY_CATEGORY.get(schema.vocabulary(event.code)) is Category.MEDICATION


def medications_value(graph: PatientGraph) -> VariableValue:
    """The distinct drugs recorded in the record's last `MEDICATION_WINDOW_DAYS` days, most recent first."""
    timed = _timed(graph)
    if not timed:
        return VariableValue(key="medications", value=NOT_DOCUMENTED, origin="structured")
    since = timed[-1].time - timedelta(days=MEDICATION_WINDOW_DAYS)  # type: ignore[operator]
    latest: dict[str, GraphEvent] = {}
    for event in reversed(timed):
        if event.time < since:  # type: ignore[operator]
            break
        if is_medication(event):
            name = " ".join((event.description or event.original_code).split())
            latest.setdefault(name.lower(), event)
    if not latest:
        return VariableValue(key="medications", value=NOT_DOCUMENTED, origin="structured")
    shown = list(latest.values())[:MAX_MEDICATIONS]
    names = [f"{' '.join((e.description or e.original_code).split())} (last recorded {e.time.date().isoformat()})"
             for e in shown]  # type: ignore[union-attr]
    more = len(latest) - len(shown)
    value = "; ".join(names) + (f"; and {more} more" if more else "")
    return VariableValue(key="medications", value=value, source_refs=tuple(e.event_id for e in shown),
                         origin="structured")


STRUCTURED_VARIABLES: dict[str, Callable[[PatientGraph], VariableValue]] = {
    "demographics": demographics_value, "height_weight": height_weight_value, "medications": medications_value}
"""Variable keys filled from structured graph data, and the function computing each (the rest go to the model)."""
