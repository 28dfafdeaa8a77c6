"""Build a `PatientGraph` from a patient's events: encounter assignment, note sections, code hierarchy, mentions.

Input is a `GraphSource` (what every route agrees on: events with provenance rows, demographics, a code catalog,
and optionally the encounters an XML document states). `build_graph` accepts a `PatientRecord` directly.

**Encounter assignment.** Each ``ENCOUNTER//<type>`` row is a visit starting at its time. An XML source that nests
events in encounters keeps its nesting. Then visit ids (`Event.visit_id`, from a MEDS ``visit_id``-like column or
an XML ``visit_id`` attribute): a clinical event (any timed row but the birth and the encounter rows) carrying the
visit id of an encounter row joins that visit (the earliest such row when several carry it); events carrying a
visit id no encounter row has form a visit of their own (id ``visit:<visit id>``, type ``VISIT``, from the first
to the last of them). Any other clinical event belongs to the encounter with the latest start at or before it whose
visit window (`EncounterWindows`, by encounter type) still contains it: an event at the same timestamp as a visit
joins it, an event in the hours after joins the visit still open. An event in no window joins the pseudo-encounter
of its calendar day (type ``DAY``, id ``day:YYYY-MM-DD``). Static rows, the birth and the sex/race/ethnicity
rows (timed or not) hang off the patient node.

Work is done column-wise (numpy, pyarrow); per-event Python work is limited to reading the `Event` fields and
one dictionary lookup per code: a ~10,000-node patient takes about 40 ms of CPU (``benchmarks/bench_graph.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from types import MappingProxyType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vista.graph.errors import GraphInputError
from vista.graph.mentions import DEFAULT_MIN_CHARS, TermMatcher
from vista.graph.model import (
    EDGE_SCHEMA,
    NODE_SCHEMA,
    PSEUDO_ENCOUNTER_TYPE,
    VISIT_ENCOUNTER_TYPE,
    CareSite,
    EdgeType,
    NodeType,
    PatientGraph,
    PatientInfo,
    Provider,
    SourceFormat,
    attributes_texts,
    code_node_id,
    patient_node_id,
    section_node_id,
    visit_node_id,
)
from vista.graph.sections import split_sections
from vista.shared.meds import schema
from vista.shared.records import CodeCatalog, Demographics, Event, PatientRecord
from vista.shared.timeline.xmltext import sanitize

US_PER_DAY = 86_400_000_000
_NAT = np.iinfo(np.int64).min
_EPOCH = datetime(1970, 1, 1)
_EVENT_FIELDS = attrgetter("event_id", "time", "code", "numeric_value", "text_value")
_DEMOGRAPHIC_VOCABULARIES = frozenset({schema.GENDER_PREFIX, schema.RACE_PREFIX, schema.ETHNICITY_PREFIX})
_NOT_MENTIONABLE = _DEMOGRAPHIC_VOCABULARIES | {schema.ENCOUNTER_PREFIX, schema.NOTE_PREFIX, schema.BIRTH_CODE,
                                                schema.DEATH_CODE}


def _us(delta: timedelta) -> int:
    return delta // timedelta(microseconds=1)


@dataclass(frozen=True)
class EncounterWindows:
    """How long after its start a visit still collects events, per encounter type (the part after ``ENCOUNTER//``).

    Defaults: ambulatory 12 h, emergency 36 h, inpatient 30 days (a later visit's start takes over), others 24 h;
    types spelled as the generator writes them (AMB, ED, IMP) and as OMOP's visit concepts do (OP, ER, IP).
    """

    by_type: Mapping[str, timedelta] = field(default_factory=lambda: MappingProxyType(
        {"AMB": timedelta(hours=12), "ED": timedelta(hours=36), "IMP": timedelta(days=30),
         "OP": timedelta(hours=12), "ER": timedelta(hours=36), "IP": timedelta(days=30)}))
    default: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        for kind, window in {**self.by_type, "default": self.default}.items():
            if window <= timedelta(0):
                raise ValueError(f"encounter window for {kind!r} must be positive, not {window}")

    def of(self, encounter_type: str) -> timedelta:
        return self.by_type.get(encounter_type, self.default)


@dataclass(frozen=True)
class GraphConfig:
    """Build settings: visit windows, the plausible time range of events, the shortest mention term."""

    windows: EncounterWindows = field(default_factory=EncounterWindows)
    earliest: datetime = datetime(1900, 1, 1)
    latest: datetime = datetime(2300, 1, 1)  # de-identified datasets shift dates far ahead (MIMIC-IV: 2110–2210)
    min_term_chars: int = DEFAULT_MIN_CHARS

    def __post_init__(self) -> None:
        if not self.earliest < self.latest:
            raise ValueError(f"earliest ({self.earliest}) must be before latest ({self.latest})")

    def fingerprint(self) -> str:
        """A stable text of every setting (part of a graph's content hash)."""
        windows = ",".join(f"{k}={_us(v)}" for k, v in sorted(self.windows.by_type.items()))
        return (f"windows[{windows};default={_us(self.windows.default)}];earliest={self.earliest.isoformat()};"
                f"latest={self.latest.isoformat()};min_term_chars={self.min_term_chars}")


DEFAULT_CONFIG = GraphConfig()


@dataclass(frozen=True, slots=True)
class GivenEncounter:
    """An encounter as an XML source states it. A real one's ``node_id`` is the event id of its ``ENCOUNTER//`` row;
    a pseudo one (no row: a day, or a visit known only by its id) keeps its ``encounter_type`` and ``visit_id``."""

    node_id: str
    start: datetime
    end: datetime | None
    encounter_type: str
    members: tuple[str, ...]
    pseudo: bool
    visit_id: str | None = None


@dataclass(frozen=True, slots=True)
class GraphSource:
    """Everything a graph is built from, whatever the route (MEDS record or XML document).

    ``rows[i]`` is the provenance of ``events[i]`` in ``origin``; ``units[i]`` the unit of its value;
    ``attributes[i]`` (when given: empty, or one per event) the source attributes of ``events[i]`` that no column
    holds, e.g. an XML event's ``provider_id``/``care_site_id`` (naming one of ``providers``/``care_sites``),
    ``note_id``, source table.
    """

    subject_id: int
    origin: str
    source_format: SourceFormat
    events: Sequence[Event]
    rows: Sequence[int]
    units: Sequence[str | None]
    demographics: Demographics
    catalog: CodeCatalog
    first_row: int | None = None
    given_encounters: tuple[GivenEncounter, ...] = ()
    attributes: Sequence[Mapping[str, str] | None] = ()
    providers: tuple[Provider, ...] = ()
    care_sites: tuple[CareSite, ...] = ()


def _event_offsets(record: PatientRecord) -> np.ndarray:
    """k of every event id ``e<k>`` (GraphInputError naming the first id of another form)."""
    ids = pa.array([e.event_id for e in record.events], pa.string())
    well_formed = pc.match_substring_regex(ids, r"^e[0-9]{1,18}$")
    if not pc.all(well_formed).as_py() and len(ids):
        bad = ids[int(np.flatnonzero(~well_formed.to_numpy(zero_copy_only=False))[0])].as_py()
        raise GraphInputError(record.shard, f"event id {bad!r} is not of the form e<k>", patient=str(record.subject_id),
                              field="id", element=f"event {bad}")
    return pc.cast(pc.utf8_slice_codeunits(ids, 1), pa.int64()).to_numpy()


def source_from_record(record: PatientRecord, catalog: CodeCatalog) -> GraphSource:
    """The `GraphSource` of a MEDS patient: rows from the event ids (``e<k>`` → ``first_row + k``), units from the
    event (its row's unit column, or the unit its code embeds), else from the catalog."""
    rows = record.first_row + _event_offsets(record)
    unit_of: dict[str, str | None] = {}
    units: list[str | None] = []
    demographic: list[Event] = []
    vital = (schema.BIRTH_CODE, schema.DEATH_CODE)
    demographic_code: dict[str, bool] = {}  # per distinct code
    for event in record.events:
        code = event.code
        is_demographic = demographic_code.get(code)
        if is_demographic is None:
            is_demographic = demographic_code[code] = (code in vital or
                                                       schema.vocabulary(code) in _DEMOGRAPHIC_VOCABULARIES)
        if event.time is None or is_demographic:
            demographic.append(event)  # meds_etl times the sex/race/ethnicity rows at the birth
        if event.numeric_value is None:
            units.append(None)
            continue
        if event.unit:
            units.append(event.unit)
            continue
        if code not in unit_of:
            unit_of[code] = catalog.describe(code).unit or None
        units.append(unit_of[code])
    demographics = PatientRecord(record.subject_id, record.shard, record.first_row, demographic).demographics
    # the category a row's source table states (Event.kind) is kept as the event's "kind" attribute
    kinds = [{"kind": e.kind} if e.kind else None for e in record.events]
    return GraphSource(record.subject_id, record.shard, "meds", record.events, rows.tolist(), units, demographics,
                       catalog, first_row=record.first_row, attributes=kinds if any(kinds) else ())


def _clean(text: str | None) -> str | None:
    """Text as a graph stores it: characters XML 1.0 cannot carry removed; empty strings are absent values."""
    return sanitize(text) or None if text else None


def _cleaned(values: list[str | None]) -> list[str | None]:
    """`_clean` of each value, each distinct value cleaned once."""
    done: dict[str | None, str | None] = {None: None}
    return [done[v] if v in done else done.setdefault(v, _clean(v)) for v in values]


def _to_datetime(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=int(us))


class _Builder:
    """One build: the arrays of one patient, filled in stages (checks, order, encounters, notes, codes, edges)."""

    def __init__(self, source: GraphSource, config: GraphConfig):
        self.s = source
        self.config = config
        self.patient = str(source.subject_id)

    def fail(self, problem: str, *, field: str | None = None, event_id: str | None = None) -> GraphInputError:
        return GraphInputError(self.s.origin, problem, patient=self.patient, field=field,
                               element=f"event {event_id}" if event_id is not None else None)

    # ------------------------------------------------------------------------------------------ stage 1: checks
    def check(self) -> None:
        s = self.s
        n = len(s.events)
        if not (len(s.rows) == len(s.units) == n) or len(s.attributes) not in (0, n):
            raise ValueError(f"{s.origin}: patient {self.patient}: rows/units/attributes do not match the {n} events")
        columns = list(zip(*map(_EVENT_FIELDS, s.events))) or [(), (), (), (), ()]
        self.ids, times, self.codes, self.values, texts = (list(c) for c in columns)
        if not all(self.ids):
            raise self.fail("event without an id", field="id")
        if not all(self.codes):
            k = self.codes.index("") if "" in self.codes else self.codes.index(None)
            raise self.fail("event without a code", field="code", event_id=self.ids[k])
        self.texts = [_clean(t) if t is not None else None for t in texts]
        self.visit_ids = _cleaned([e.visit_id for e in s.events])  # a visit's rows share its id: cleaned once
        self.source_codes = _cleaned([e.source_code if e.source_code != e.code else None for e in s.events])
        if len(set(self.ids)) != n:
            seen: set[str] = set()
            duplicate = next(i for i in self.ids if i in seen or seen.add(i))
            raise self.fail(f"event id {duplicate!r} is used twice", field="id", event_id=duplicate)
        for name, values in (("id", self.ids), ("code", self.codes)):
            joined = "".join(values)
            if sanitize(joined) != joined:
                bad = next(v for v in values if sanitize(v) != v)
                raise self.fail(f"{bad!r} contains characters XML cannot carry", field=name)
        times = pa.array(times, pa.timestamp("us"))
        self.has_time = times.is_valid().to_numpy(zero_copy_only=False)
        self.t = times.cast(pa.int64()).fill_null(_NAT).to_numpy()
        lo, hi = (_us(self.config.earliest - _EPOCH), _us(self.config.latest - _EPOCH))
        out_of_range = self.has_time & ((self.t < lo) | (self.t >= hi))
        if out_of_range.any():
            k = int(np.flatnonzero(out_of_range)[0])
            when = s.events[k].time
            limit = f"before {self.config.earliest:%Y-%m-%d}" if self.t[k] < lo else f"on or after {self.config.latest:%Y-%m-%d}"
            raise self.fail(f"time {when.isoformat()} is {limit} (implausible date)", field="time", event_id=self.ids[k])
        self.rows = np.asarray(s.rows, np.int64)

    # ------------------------------------------------------------------------------------------ stage 2: kinds, order
    def classify(self) -> None:
        kinds: dict[str, tuple[bool, bool, bool]] = {}
        for code in set(self.codes):
            vocab = schema.vocabulary(code)
            # the birth and demographic rows hang off the patient even when timed (meds_etl times them at birth)
            kinds[code] = (vocab == schema.ENCOUNTER_PREFIX, vocab == schema.NOTE_PREFIX,
                           code == schema.BIRTH_CODE or vocab in _DEMOGRAPHIC_VOCABULARIES)
        flags = np.array([kinds[c] for c in self.codes], dtype=bool).reshape(len(self.codes), 3)
        is_encounter_code, self.is_note, is_birth = flags[:, 0], flags[:, 1], flags[:, 2]
        self.patient_level = ~self.has_time | is_birth
        self.is_encounter = self.has_time & is_encounter_code & ~is_birth
        self.clinical = self.has_time & ~is_birth & ~is_encounter_code
        if not self.clinical.any() and not self.is_encounter.any():
            raise self.fail("patient has no events (only static rows and the birth)", field="time")

        def ordered(mask: np.ndarray) -> np.ndarray:
            idx = np.flatnonzero(mask)
            return idx[np.lexsort((self.rows[idx], self.t[idx]))]

        self.level_order = ordered(self.patient_level)
        self.enc_events = ordered(self.is_encounter)  # real encounters in (start, row) order
        self.clin_order = ordered(self.clinical)

    # ------------------------------------------------------------------------------------------ stage 3: encounters
    def assign(self) -> None:
        """Encounter of each clinical event as an index into the final encounter list (real and pseudo, by start)."""
        s = self.s
        real_ids = [self.ids[k] for k in self.enc_events.tolist()]
        real_types = [schema.code_value(self.codes[k]) for k in self.enc_events.tolist()]
        n_real = len(real_ids)
        starts = self.t[self.enc_events]
        key_of_real = {eid: j for j, eid in enumerate(real_ids)}
        clin_t = self.t[self.clin_order]
        assigned = np.full(len(self.clin_order), -1, np.int64)

        # Encounters the source states (XML): real ones must be encounter rows; pseudo ones are added.
        pseudo_ids: list[str] = []
        pseudo_starts: list[int] = []
        pseudo_types: list[str] = []
        pseudo_visits: list[str | None] = []
        pseudo_key: dict[str, int] = {}

        def add_pseudo(node_id: str, start_us: int, kind: str, visit_id: str | None) -> int:
            key = pseudo_key[node_id] = n_real + len(pseudo_ids)
            pseudo_ids.append(node_id)
            pseudo_starts.append(start_us)
            pseudo_types.append(kind)
            pseudo_visits.append(visit_id)
            return key

        given_end: dict[int, int] = {}
        if s.given_encounters:
            position = {self.ids[k]: p for p, k in enumerate(self.clin_order.tolist())}
            for given in s.given_encounters:
                if given.pseudo:
                    if given.node_id in pseudo_key:
                        raise self.fail(f"encounter {given.node_id!r} is stated twice", field="id", event_id=given.node_id)
                    key = add_pseudo(given.node_id, _us(given.start - _EPOCH), given.encounter_type, given.visit_id)
                else:
                    key = key_of_real.get(given.node_id)
                    if key is None:
                        raise self.fail(f"encounter {given.node_id!r} is not an ENCOUNTER// event of this patient",
                                        field="id", event_id=given.node_id)
                if given.end is not None:
                    given_end[key] = _us(given.end - _EPOCH)
                for member in given.members:
                    p = position.get(member)
                    if p is None:
                        raise self.fail(f"event {member!r} of encounter {given.node_id!r} is not a timed clinical event",
                                        field="id", event_id=member)
                    if assigned[p] != -1:
                        raise self.fail(f"event {member!r} is in two encounters", field="id", event_id=member)
                    assigned[p] = key

        # Visit ids: the encounter row carrying the event's visit id, else a visit of that id without a row.
        if any(v is not None for v in self.visit_ids):
            row_of_visit: dict[str, int] = {}
            for j, k in enumerate(self.enc_events.tolist()):  # in (start, row) order: the earliest row wins
                if self.visit_ids[k] is not None:
                    row_of_visit.setdefault(self.visit_ids[k], j)
            visit_ids = self.visit_ids
            for p, k in enumerate(self.clin_order.tolist()):  # in time order: a new visit starts at its first event
                visit = visit_ids[k]
                if visit is None or assigned[p] != -1:
                    continue
                key = row_of_visit.get(visit)
                if key is None:
                    node_id = visit_node_id(visit)
                    key = pseudo_key.get(node_id)
                    if key is None:
                        key = add_pseudo(node_id, int(clin_t[p]), VISIT_ENCOUNTER_TYPE, visit)
                assigned[p] = key

        # The window rule for the rest: the latest real encounter start at or before the event, if still open.
        loose = np.flatnonzero(assigned == -1)
        if loose.size and n_real:
            window = np.array([_us(self.config.windows.of(kind)) for kind in real_types], np.int64)
            closes = starts + window
            t = clin_t[loose]
            j = np.searchsorted(starts, t, side="right") - 1
            inside = (j >= 0) & (t < closes[np.maximum(j, 0)])
            assigned[loose[inside]] = j[inside]
            # A longer window opened earlier may still cover what the latest start's window does not.
            latest_close = np.maximum.accumulate(closes)
            for p, jj in zip(loose[~inside].tolist(), j[~inside].tolist()):
                if jj < 0 or latest_close[jj] <= clin_t[p]:
                    continue
                while jj >= 0 and closes[jj] <= clin_t[p]:
                    jj -= 1
                assigned[p] = jj
        # Per-day pseudo-encounters for what is left (reusing a stated pseudo-encounter with the same id).
        left = np.flatnonzero(assigned == -1)
        if left.size:
            days, inverse = np.unique(np.floor_divide(clin_t[left], US_PER_DAY), return_inverse=True)
            day_keys = []
            for day in days.tolist():
                node_id = f"day:{_to_datetime(day * US_PER_DAY).date().isoformat()}"
                key = pseudo_key.get(node_id)
                if key is None:
                    key = add_pseudo(node_id, day * US_PER_DAY, PSEUDO_ENCOUNTER_TYPE, None)
                day_keys.append(key)
            assigned[left] = np.asarray(day_keys, np.int64)[inverse]

        # Final encounter order: by start, then row (pseudo-encounters have no row: they sort first on ties).
        all_starts = np.concatenate([starts, np.asarray(pseudo_starts, np.int64)])
        all_rows = np.concatenate([self.rows[self.enc_events], np.full(len(pseudo_ids), -1, np.int64)])
        enc_order = np.lexsort((all_rows, all_starts))
        rank = np.empty_like(enc_order)
        rank[enc_order] = np.arange(enc_order.size)
        self.enc_ids = [(real_ids + pseudo_ids)[k] for k in enc_order.tolist()]
        self.enc_types = [(real_types + pseudo_types)[k] for k in enc_order.tolist()]
        real_visits = [self.visit_ids[k] for k in self.enc_events.tolist()]
        self.enc_visits = [(real_visits + pseudo_visits)[k] for k in enc_order.tolist()]
        self.enc_real_event = np.concatenate([self.enc_events, np.full(len(pseudo_ids), -1, np.int64)])[enc_order]
        self.enc_start = all_starts[enc_order]
        self.clin_encounter = rank[assigned] if assigned.size else assigned
        end = all_starts.copy()
        if assigned.size:
            np.maximum.at(end, assigned, clin_t)
        for key, value in given_end.items():
            end[key] = value
        self.enc_end = end[enc_order]
        if len(set(self.enc_ids)) != len(self.enc_ids) or set(pseudo_ids) & set(self.ids):
            clash = sorted(set(pseudo_ids) & set(self.ids)) or sorted(pseudo_ids)
            raise self.fail(f"pseudo-encounter id {clash[0]!r} is used twice or is also an event id", field="id")

    # ------------------------------------------------------------------------------------------ stage 4: nodes
    def build(self) -> PatientGraph:
        self.check()
        self.classify()
        self.assign()
        s = self.s
        n_level, n_enc, n_clin = self.level_order.size, len(self.enc_ids), self.clin_order.size
        base_enc = 1 + n_level
        base_clin = base_enc + n_enc
        base_sec = base_clin + n_clin

        # Node index of every source event.
        node_of_event = np.full(len(s.events), -1, np.int64)
        node_of_event[self.level_order] = np.arange(1, base_enc)
        real = self.enc_real_event >= 0
        node_of_event[self.enc_real_event[real]] = base_enc + np.flatnonzero(real)
        node_of_event[self.clin_order] = np.arange(base_clin, base_sec)

        # Note sections, in clinical (time) order.
        sec_ids: list[str] = []
        sec_text: list[str] = []
        sec_title: list[str | None] = []
        sec_span: list[tuple[int, int]] = []
        sec_note: list[int] = []  # node index of the note
        sec_time: list[int] = []
        texts = self.texts
        for k in self.clin_order[self.is_note[self.clin_order]].tolist():
            text = texts[k]
            if text is None:
                continue
            for j, section in enumerate(split_sections(text)):
                sec_ids.append(section_node_id(self.ids[k], j))
                sec_text.append(section.text)
                sec_title.append(section.title)
                sec_span.append((section.start, section.end))
                sec_note.append(int(node_of_event[k]))
                sec_time.append(int(self.t[k]))
        n_sec = len(sec_ids)
        base_code = base_sec + n_sec

        # Codes used, plus their catalog ancestors, sorted.
        catalog = s.catalog
        used = set(self.codes)
        parents: dict[str, tuple[str, ...]] = {}
        todo = list(used)
        while todo:
            code = todo.pop()
            ps = tuple(dict.fromkeys(catalog.describe(code).parent_codes))
            parents[code] = ps
            todo.extend(p for p in ps if p not in parents and p not in todo)
        code_list = sorted(parents)
        code_node = {c: base_code + i for i, c in enumerate(code_list)}
        descriptions = [_clean(catalog.describe(c).description) for c in code_list]
        n_nodes = base_code + len(code_list)

        # ---- columns
        ids = np.empty(n_nodes, object)
        ids[0] = patient_node_id(s.subject_id)
        ids[node_of_event] = self.ids
        pseudo_pos = np.flatnonzero(~real)
        ids[base_enc + pseudo_pos] = [self.enc_ids[p] for p in pseudo_pos.tolist()]
        ids[base_sec:base_code] = sec_ids
        ids[base_code:] = [code_node_id(c) for c in code_list]
        if len(set(ids.tolist())) != n_nodes:
            taken = set(self.ids)
            clash = next(i for i in ids.tolist()[base_sec:] if i in taken)
            raise self.fail(f"event id {clash!r} clashes with a generated node id", field="id", event_id=clash)

        types = np.empty(n_nodes, np.int8)
        types[0] = NodeType.PATIENT.code
        types[1:base_enc] = NodeType.EVENT.code
        types[base_enc:base_clin] = NodeType.ENCOUNTER.code
        types[base_clin:base_sec] = np.where(self.is_note[self.clin_order], NodeType.NOTE.code, NodeType.EVENT.code)
        types[base_sec:base_code] = NodeType.SECTION.code
        types[base_code:] = NodeType.CODE.code
        if self.is_note[self.level_order].any():
            types[1:base_enc][self.is_note[self.level_order]] = NodeType.NOTE.code

        time = np.full(n_nodes, _NAT, np.int64)
        time[node_of_event] = self.t
        time[base_enc:base_clin] = self.enc_start
        time[base_sec:base_code] = sec_time
        end = np.full(n_nodes, _NAT, np.int64)
        end[base_enc:base_clin] = self.enc_end

        code_col = np.full(n_nodes, None, object)
        code_col[node_of_event] = self.codes
        code_col[base_code:] = code_list
        value = np.full(n_nodes, np.nan)
        value_valid = np.zeros(n_nodes, bool)
        raw_values = self.values
        has_value = np.array([v is not None for v in raw_values], bool)
        value[node_of_event[has_value]] = [v for v in raw_values if v is not None]
        value_valid[node_of_event[has_value]] = True
        unit = np.full(n_nodes, None, object)
        cleaned_units = {u: _clean(u) for u in set(s.units)}
        unit[node_of_event] = [cleaned_units[u] for u in s.units]
        text = np.full(n_nodes, None, object)
        text[node_of_event] = texts
        text[base_sec:base_code] = sec_text
        description = np.full(n_nodes, None, object)
        description[base_code:] = descriptions
        title = np.full(n_nodes, None, object)
        title[base_sec:base_code] = sec_title
        encounter_type = np.full(n_nodes, None, object)
        encounter_type[base_enc:base_clin] = self.enc_types
        row = np.full(n_nodes, -1, np.int64)
        row[node_of_event] = self.rows
        encounter = np.full(n_nodes, -1, np.int32)
        encounter[base_clin:base_sec] = base_enc + self.clin_encounter
        span = np.full((n_nodes, 2), -1, np.int32)
        if n_sec:
            span[base_sec:base_code] = sec_span
        source_code = np.full(n_nodes, None, object)
        source_code[node_of_event] = self.source_codes
        visit_id = np.full(n_nodes, None, object)
        visit_id[node_of_event] = self.visit_ids
        visit_id[base_enc:base_clin] = self.enc_visits
        attributes = np.full(n_nodes, None, object)
        if s.attributes:
            attributes[node_of_event] = attributes_texts(s.attributes)

        nodes = pa.table({
            "id": pa.array(ids, pa.string()),
            "type": pa.array(types, pa.int8()),
            "time": pa.array(time, pa.timestamp("us"), mask=time == _NAT),
            "end": pa.array(end, pa.timestamp("us"), mask=end == _NAT),
            "code": pa.array(code_col, pa.string()),
            "value": pa.array(value, pa.float64(), mask=~value_valid),
            "unit": pa.array(unit, pa.string()),
            "text": pa.array(text, pa.large_string()),
            "description": pa.array(description, pa.string()),
            "title": pa.array(title, pa.string()),
            "encounter_type": pa.array(encounter_type, pa.string()),
            "row": pa.array(row, pa.int64(), mask=row < 0),
            "encounter": pa.array(encounter, pa.int32(), mask=encounter < 0),
            "span_start": pa.array(span[:, 0], pa.int32(), mask=span[:, 0] < 0),
            "span_end": pa.array(span[:, 1], pa.int32(), mask=span[:, 1] < 0),
            "source_code": pa.array(source_code, pa.string()),
            "visit_id": pa.array(visit_id, pa.string()),
            "attributes": pa.array(attributes, pa.string()),
        }, schema=NODE_SCHEMA)

        # ---- edges
        src: list[np.ndarray] = []
        dst: list[np.ndarray] = []
        kind: list[np.ndarray] = []
        terms: list[str | None] = []

        def add(a, b, edge_type: EdgeType, term: list[str] | None = None) -> None:
            a = np.asarray(a, np.int64)
            b = np.broadcast_to(np.asarray(b, np.int64), a.shape) if np.ndim(b) == 0 else np.asarray(b, np.int64)
            a = np.broadcast_to(a, b.shape) if a.ndim == 0 else a
            src.append(a)
            dst.append(b)
            kind.append(np.full(a.shape, edge_type.code, np.int8))
            terms.extend(term if term is not None else [None] * a.size)

        enc_nodes = np.arange(base_enc, base_clin)
        clin_nodes = np.arange(base_clin, base_sec)
        add(0, enc_nodes, EdgeType.HAS_ENCOUNTER)
        add(0, np.arange(1, base_enc), EdgeType.HAS_EVENT)
        add(base_enc + self.clin_encounter, clin_nodes, EdgeType.HAS_EVENT)
        source_nodes = np.sort(node_of_event)
        add(source_nodes, [code_node[c] for c in code_col[source_nodes].tolist()], EdgeType.HAS_CODE)
        is_a = [(code_node[c], code_node[p]) for c in code_list for p in parents[c]]
        add([a for a, _ in is_a], [b for _, b in is_a], EdgeType.IS_A)
        add(sec_note, np.arange(base_sec, base_code), EdgeType.HAS_SECTION)
        mention_src, mention_dst, mention_terms = self.mentions(code_list, descriptions, base_code, sec_text, base_sec)
        add(mention_src, mention_dst, EdgeType.MENTIONS, mention_terms)
        add(enc_nodes[:-1], enc_nodes[1:], EdgeType.NEXT)
        add(clin_nodes[:-1], clin_nodes[1:], EdgeType.NEXT)
        edges = pa.table({
            "src": pa.array(np.concatenate(src), pa.int32()),
            "dst": pa.array(np.concatenate(dst), pa.int32()),
            "type": pa.array(np.concatenate(kind), pa.int8()),
            "term": pa.array(terms, pa.string()),
        }, schema=EDGE_SCHEMA)
        info = PatientInfo(s.subject_id, s.origin, s.source_format, s.first_row, s.demographics,
                           providers=tuple(s.providers), care_sites=tuple(s.care_sites))
        return PatientGraph(info, nodes, edges)

    def mentions(self, code_list: list[str], descriptions: list[str | None], base_code: int, sec_text: list[str],
                 base_sec: int) -> tuple[list[int], list[int], list[str]]:
        """Mention edges: section → code whose description occurs in the section (see `vista.graph.mentions`)."""
        own = set(self.codes)
        items = [(base_code + i, d) for i, (c, d) in enumerate(zip(code_list, descriptions))
                 if d is not None and c in own and schema.vocabulary(c) not in _NOT_MENTIONABLE]
        matcher = TermMatcher.from_descriptions(items, self.config.min_term_chars)
        a: list[int] = []
        b: list[int] = []
        terms: list[str] = []
        if matcher:
            for j, found in enumerate(matcher.find_many(sec_text)):
                for mention in found:
                    a.append(base_sec + j)
                    b.append(mention.target)
                    terms.append(mention.term)
        return a, b, terms


def build_graph(patient: PatientRecord | GraphSource, catalog: CodeCatalog | None = None, *,
                config: GraphConfig = DEFAULT_CONFIG) -> PatientGraph:
    """The MEDS Graph of a patient record (with ``catalog`` for descriptions, units, parents) or of a `GraphSource`.

    Raises `GraphInputError` naming the source, patient, event and field when the input cannot be a graph.
    """
    if isinstance(patient, PatientRecord):
        source = source_from_record(patient, catalog if catalog is not None else CodeCatalog())
    elif isinstance(patient, GraphSource):
        if catalog is not None:
            raise TypeError("pass the catalog inside the GraphSource, not as an argument")
        source = patient
    else:
        raise TypeError(f"build_graph needs a PatientRecord or a GraphSource, not {type(patient).__name__}")
    return _Builder(source, config).build()
