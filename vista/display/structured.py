"""Variables computed from the graph's structured data without a model (origin "structured").

Demographics come from the graph's patient info (static sex/race/ethnicity rows and the birth event); the age is
taken at the most recent clinical event. The value cites the graph events it rests on, so it traces to MEDS rows
like any model-written value.

>>> from datetime import datetime
>>> from vista.graph import build_graph
>>> from vista.records import CodeCatalog, Event, PatientRecord
>>> rec = PatientRecord(5, "data/train/0.parquet", 0, [
...     Event("e0", None, "GENDER//F", None, None), Event("e1", None, "RACE//White", None, None),
...     Event("e2", datetime(1950, 6, 1), "MEDS_BIRTH", None, None),
...     Event("e3", datetime(2020, 7, 1, 9), "ENCOUNTER//AMB", None, None),
...     Event("e4", datetime(2020, 7, 1, 9), "LOINC//718-7", 12.0, None)])
>>> v = demographics_value(build_graph(rec, CodeCatalog()))
>>> v.value, v.source_refs, v.origin
('70 years, female, race White, ethnicity not documented', ('e2', 'e0', 'e1', 'e4'), 'structured')
"""

from __future__ import annotations

from collections.abc import Callable

from vista.display.model import VariableValue
from vista.graph import PatientGraph
from vista.meds import schema

_SEX_WORDS = {"F": "female", "M": "male"}
_DEMOGRAPHIC_VOCABULARIES = (schema.GENDER_PREFIX, schema.RACE_PREFIX, schema.ETHNICITY_PREFIX)


def demographics_value(graph: PatientGraph) -> VariableValue:
    """Age at the most recent record, sex, race and ethnicity, citing the birth, static and latest events."""
    demo = graph.info.demographics
    refs: list[str] = []
    birth = [e.event_id for e in graph.patient_events() if e.code == schema.BIRTH_CODE]
    refs.extend(birth)
    refs.extend(e.event_id for e in graph.patient_events() if schema.vocabulary(e.code) in _DEMOGRAPHIC_VOCABULARIES)
    timed = [e for e in graph.events_in_order() if e.time is not None]
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


STRUCTURED_VARIABLES: dict[str, Callable[[PatientGraph], VariableValue]] = {"demographics": demographics_value}
"""Variable keys filled from structured graph data, and the function computing each (the rest go to the model)."""
