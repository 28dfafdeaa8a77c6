"""Render a `PatientRecord` into one XML `Timeline`: demographics on the root, events by timestamp then modality.

Only events strictly before the prediction time appear. Sex, race, ethnicity and the birth date become
root attributes; other static rows become elements at the top of the root; the rest are timestamp blocks.
Each event element carries ``id="e<k>"`` (`PatientRecord.provenance`) and the catalog's description.

>>> from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
>>> rec = PatientRecord(7, "data/train/0.parquet", 0, [
...     Event("e0", None, "GENDER//F", None, None),
...     Event("e1", datetime(1950, 3, 1), "MEDS_BIRTH", None, None),
...     Event("e2", datetime(2020, 1, 5, 9), "ENCOUNTER//AMB", None, None),
...     Event("e3", datetime(2020, 1, 5, 9), "LOINC//718-7", 11.2, None),
...     Event("e4", datetime(2020, 1, 5, 9), "ICD10CM//R05.9", None, None),
...     Event("e5", datetime(2021, 6, 1), "NOTE//PROGRESS", None, "Cough > 3 weeks & <weight loss>"),
... ])
>>> catalog = CodeCatalog([CodeInfo("LOINC//718-7", "Hemoglobin", unit="g/dL"), CodeInfo("ICD10CM//R05.9", "Cough, unspecified")])
>>> print(render_timeline(rec, catalog, datetime(2021, 1, 1)).to_xml(), end="")
<patient id="7" sex="F" birth_date="1950-03-01" prediction_time="2021-01-01">
<events time="2020-01-05 09:00">
<visits>
<visit id="e2" code="ENCOUNTER//AMB">ENCOUNTER//AMB</visit>
</visits>
<conditions>
<condition id="e4" code="ICD10CM//R05.9">Cough, unspecified</condition>
</conditions>
<labs>
<lab id="e3" code="LOINC//718-7" value="11.2" unit="g/dL">Hemoglobin</lab>
</labs>
</events>
</patient>
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from itertools import groupby

from vista.shared.meds import schema
from vista.shared.records import CodeCatalog, Event, PatientRecord
from vista.shared.timeline.errors import TimelineError
from vista.shared.timeline.modality import DEFAULT_MODALITIES, Modality, ModalityTable, modality_of_kind
from vista.shared.timeline.model import EventElement, PatientRoot, TimeBlock, Timeline
from vista.shared.timeline.truncate import truncate_left
from vista.shared.timeline.xmltext import format_number, sanitize

_DEMOGRAPHIC_VOCABULARIES = frozenset({schema.GENDER_PREFIX, schema.RACE_PREFIX, schema.ETHNICITY_PREFIX})


class _ElementFactory:
    """Builds event elements, looking each distinct code up once (modality, description, unit)."""

    def __init__(self, record: PatientRecord, catalog: CodeCatalog, modalities: ModalityTable):
        self._record = record
        self._catalog = catalog
        self._modalities = modalities
        self._codes: dict[str, tuple[Modality, str | None, str | None]] = {}

    def _lookup(self, event: Event) -> tuple[Modality, str | None, str | None]:
        found = self._codes.get(event.code)
        if found is not None and event.kind is None and event.unit is None:
            return found
        if found is None:
            modality = self._modalities.modality_of(event.code)
            if modality is None:
                raise TimelineError(
                    f"{self._record.shard}: subject {self._record.subject_id}, event {event.event_id}: "
                    f"code {event.code!r} matches no modality rule (vocabulary {schema.vocabulary(event.code)!r})"
                )
            info = self._catalog.describe(event.code)
            description = sanitize(info.description) if info.description else None
            unit = sanitize(info.unit) if info.unit else None
            found = self._codes[event.code] = (modality, description or None, unit or None)
        if event.kind is not None or event.unit is not None:  # what the row itself says wins over the code's defaults
            modality = modality_of_kind(event.kind) or found[0]
            unit = sanitize(event.unit) if event.unit else found[2]
            return modality, found[1], unit or None
        return found

    def element(self, event: Event) -> EventElement:
        modality, description, unit = self._lookup(event)
        code = sanitize(event.code)
        attributes: list[tuple[str, str]] = [("code", code)]
        if event.numeric_value is not None:
            attributes.append(("value", format_number(event.numeric_value)))
            if unit is not None:
                attributes.append(("unit", unit))
        if modality is Modality.NOTE:
            if description is not None:
                attributes.append(("title", description))
            content = sanitize(event.text_value) if event.text_value is not None else ""
        else:
            content = description or code
            if event.text_value is not None:
                content = f"{content}: {sanitize(event.text_value)}"
        return EventElement(event.event_id, modality, tuple(attributes), content)


def _check_ids(record: PatientRecord) -> None:
    counts = Counter(e.event_id for e in record.events)
    duplicated = [event_id for event_id, n in counts.items() if n > 1]
    if duplicated:
        raise TimelineError(f"{record.shard}: subject {record.subject_id}: duplicate event ids {duplicated[:5]} (ids must be unique)")


def _clean(value: str | None) -> str | None:
    return sanitize(value) if value is not None else None


def render_timeline(
    record: PatientRecord,
    catalog: CodeCatalog,
    prediction_time: datetime | None = None,
    *,
    modalities: ModalityTable = DEFAULT_MODALITIES,
    max_tokens: int | None = None,
) -> Timeline:
    """The patient's timeline from the events strictly before ``prediction_time`` (all events when None).

    ``max_tokens`` left-truncates: the oldest whole timestamps are dropped until the document fits, and the
    root says so (``truncated_before``, ``dropped_events``).
    """
    _check_ids(record)
    if prediction_time is not None:
        record = record.before(prediction_time)
    demographics = record.demographics
    factory = _ElementFactory(record, catalog, modalities)

    static: list[EventElement] = []
    timed: list[Event] = []
    for event in record.events:
        demographic = schema.vocabulary(event.code) in _DEMOGRAPHIC_VOCABULARIES  # on the root element instead
        if event.time is None:
            if not demographic:
                static.append(factory.element(event))
        elif event.code != schema.BIRTH_CODE and not demographic:  # OMOP's meds_etl dates them at birth
            timed.append(event)
    timed.sort(key=lambda e: e.time)  # MEDS order already; stable sort keeps the row order within a time

    blocks = []
    for time, same_time in groupby(timed, key=lambda e: e.time):
        elements = sorted((factory.element(e) for e in same_time), key=lambda el: el.modality.rank)
        blocks.append(TimeBlock(time, tuple(elements)))

    root = PatientRoot(
        subject_id=record.subject_id,
        sex=_clean(demographics.sex),
        birth_date=demographics.birth,
        race=_clean(demographics.race),
        ethnicity=_clean(demographics.ethnicity),
        prediction_time=prediction_time,
        static=tuple(static),
    )
    timeline = Timeline(root, tuple(blocks))
    return truncate_left(timeline, max_tokens) if max_tokens is not None else timeline
