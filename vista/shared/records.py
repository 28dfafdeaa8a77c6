"""Typed per-patient records shared by every layer: events with provenance, demographics, code metadata.

A `PatientRecord` holds one subject's MEDS rows in MEDS order (static rows first, then by time).
Each event's id (``e<k>``, k = offset of the row inside the subject's block) is stable for a given
dataset and maps back to the exact source row with `PatientRecord.provenance`.

>>> from datetime import datetime
>>> rec = PatientRecord(subject_id=7, shard="data/train/0.parquet", first_row=100, events=[
...     Event("e0", None, "GENDER//F", None, None),
...     Event("e1", datetime(1950, 3, 1), "MEDS_BIRTH", None, None),
...     Event("e2", datetime(2020, 1, 5, 9), "ENCOUNTER//AMB", None, None),
...     Event("e3", datetime(2020, 1, 5, 9), "LOINC//718-7", 11.2, None),
... ])
>>> rec.provenance("e3")
RowRef(shard='data/train/0.parquet', row=103)
>>> [e.event_id for e in rec.before(datetime(2020, 1, 5, 9)).events]
['e0', 'e1']
>>> rec.demographics.sex, rec.demographics.birth
('F', datetime.date(1950, 3, 1))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

from vista.shared.meds import schema


@dataclass(frozen=True, slots=True)
class Event:
    """One MEDS row of a patient. ``time`` is None for static rows.

    ``code`` is in the project's canonical spelling (``ICD10CM//C34.11``, ``GENDER//F``…, see `vista.shared.coding`);
    ``source_code`` is the dataset's own spelling when it differs (``DIAGNOSIS//ICD//10//C3411``). ``unit`` and
    ``visit_id`` come from the row's extension columns when the dataset has them (a MEDS ``unit`` column, a
    ``visit_id``-like column), or from the code itself (MIMIC's ``LAB//50912//mg/dL``).
    """

    event_id: str
    time: datetime | None
    code: str
    numeric_value: float | None
    text_value: str | None
    source_code: str | None = None
    unit: str | None = None
    visit_id: str | None = None
    kind: str | None = None
    """The category the row's source states (OMOP/Synthea table, XML event type) when it refines the code's own
    (a SNOMED code from the procedure table is a procedure): a `vista.shared.coding.Category` value."""

    @property
    def original_code(self) -> str:
        """The code as the dataset spells it."""
        return self.source_code or self.code


@dataclass(frozen=True, slots=True)
class RowRef:
    """Where an event came from: the shard file (relative to the dataset root) and the row inside it."""

    shard: str
    row: int


@dataclass(frozen=True, slots=True)
class Demographics:
    """Demographics read from a patient's static rows and birth/death events."""

    birth: date | None = None
    sex: str | None = None
    race: str | None = None
    ethnicity: str | None = None
    death: date | None = None

    def age_at(self, when: datetime | date) -> float | None:
        """Age in years at ``when`` (None when the birth date is unknown)."""
        if self.birth is None:
            return None
        day = when.date() if isinstance(when, datetime) else when
        return (day - self.birth).days / 365.25


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """Metadata of one code from ``metadata/codes.parquet`` (``unit`` is an optional extra column)."""

    code: str
    description: str | None = None
    parent_codes: tuple[str, ...] = ()
    unit: str | None = None


class CodeCatalog(Mapping[str, CodeInfo]):
    """Read-only code → `CodeInfo` lookup; unknown codes get an empty `CodeInfo` from `describe`, or one whose
    description comes from ``fallback`` (a module-level function, so the catalog still pickles: e.g. the ICD-10-CM
    titles `vista.shared.coding.terminology.standard_description` knows offline)."""

    def __init__(self, infos: Iterable[CodeInfo] = (), fallback: Callable[[str], str | None] | None = None):
        self._infos = {info.code: info for info in infos}
        self._fallback = fallback
        self._looked_up: dict[str, CodeInfo] = {}  # fallback answers, kept apart so the mapping itself never changes

    def __getitem__(self, code: str) -> CodeInfo:
        return self._infos[code]

    def __iter__(self):
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def extended(self, infos: Iterable[CodeInfo]) -> CodeCatalog:
        """This catalog with ``infos`` added (same fallback)."""
        return CodeCatalog([*self._infos.values(), *infos], fallback=self._fallback)

    def describe(self, code: str) -> CodeInfo:
        """The code's entry; its description from ``fallback`` when the catalog has none (no entry, or an entry
        without a description — codes.parquet often lists a code with a null description)."""
        found = self._infos.get(code)
        if found is not None and (found.description or self._fallback is None):
            return found
        if self._fallback is None:
            return CodeInfo(code)
        looked = self._looked_up.get(code)
        if looked is None:
            title = self._fallback(code)
            if found is None:
                looked = CodeInfo(code, title)
            else:
                looked = found if title is None else CodeInfo(code, title, found.parent_codes, found.unit)
            self._looked_up[code] = looked
        return looked


@dataclass(slots=True)
class PatientRecord:
    """All MEDS rows of one subject, in MEDS order, with the provenance needed to find them again."""

    subject_id: int
    shard: str
    first_row: int
    events: list[Event] = field(default_factory=list)

    def provenance(self, event_id: str) -> RowRef:
        """The source row of ``event_id`` (raises KeyError naming the patient if the id is not one of ours)."""
        if not event_id.startswith("e") or not event_id[1:].isdigit() or int(event_id[1:]) >= len(self.events):
            raise KeyError(f"subject {self.subject_id}: no event with id {event_id!r}")
        return RowRef(self.shard, self.first_row + int(event_id[1:]))

    @property
    def static_events(self) -> list[Event]:
        return [e for e in self.events if e.time is None]

    @property
    def timed_events(self) -> list[Event]:
        return [e for e in self.events if e.time is not None]

    @property
    def demographics(self) -> Demographics:
        birth = death = sex = race = ethnicity = None
        for e in self.events:
            vocab = schema.vocabulary(e.code)
            if e.code == schema.BIRTH_CODE and e.time is not None:
                birth = e.time.date()
            elif e.code == schema.DEATH_CODE and e.time is not None:
                death = e.time.date()
            elif vocab == schema.GENDER_PREFIX:
                sex = schema.code_value(e.code)
            elif vocab == schema.RACE_PREFIX:
                race = schema.code_value(e.code)
            elif vocab == schema.ETHNICITY_PREFIX:
                ethnicity = schema.code_value(e.code)
        return Demographics(birth=birth, sex=sex, race=race, ethnicity=ethnicity, death=death)

    def before(self, cutoff: datetime) -> PatientRecord:
        """A copy keeping static rows and the events strictly before ``cutoff`` (ids and provenance unchanged)."""
        kept = [e for e in self.events if e.time is None or e.time < cutoff]
        return PatientRecord(self.subject_id, self.shard, self.first_row, kept)

    def visit_dates(self) -> list[date]:
        """Distinct dates with an encounter row; without encounter codes, distinct dates of clinical events."""
        enc = sorted({e.time.date() for e in self.events if e.time is not None and schema.vocabulary(e.code) == schema.ENCOUNTER_PREFIX})
        if enc:
            return enc
        skip = {schema.BIRTH_CODE, schema.DEATH_CODE}
        return sorted({e.time.date() for e in self.events if e.time is not None and e.code not in skip})
