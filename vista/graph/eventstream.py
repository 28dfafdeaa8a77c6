"""Read the VISTA team's ``<eventstream>`` patient XML (their meds2text "LUMIA" markup) into a `GraphSource`.

The shape (public examples: VISTA-Stanford/meds2text ``tests/golden/``, HYGenAID/vista-architect-ollama
``examples/demo1.xml``)::

    <eventstream person_id="100">
      <encounter start_timestamp="2020-01-01 08:00" end_timestamp="2020-01-03 08:00">   (timestamps optional)
        <person>
          <birthdate>1980-05-15</birthdate>
          <age><days>14475</days><years>39</years></age>
          <demographics><ethnicity>…</ethnicity><gender code="Gender/8507">MALE</gender><race>White</race></demographics>
          <payerplan>Medicare</payerplan>
        </person>
        <caresites><caresite care_site_id="10" care_site_name="Main Hospital"/></caresites>
        <providers><provider provider_id="1" gender="MALE" speciality="Cardiology" year_of_birth="1975"
                             care_site_id="10" care_site_name="Main Hospital"/></providers>
        <events>
          <entry timestamp="2020-01-01 08:00">
            <event table="visit" code="Visit/IP" name="Inpatient Visit" visit_id="500" provider_id="1"/>
            <event type="note" code="LOINC/11537-8" name="Imaging Report" note_id="7">CT chest: …</event>
          </entry>
        </events>
      </encounter>
    </eventstream>

**Events.** Every ``<event>`` becomes one source event, ids ``e0, e1, …`` in document order, at its ``<entry>``'s
timestamp; provenance is (file, line of the ``<event>``). Its ``code`` goes through the coding profile (default
``vista_xml``: ``ICD10/C34.11`` → ``ICD10CM//C34.11``, the original kept as ``source_code``); ``type`` (older
files) or ``table`` (newer ones) names the source table. A visit (``type``/``table`` ``visit``) whose code the
profile does not spell as an encounter becomes ``ENCOUNTER//<value>``, and a note (``note``) ``NOTE//<kind>``,
the kind taken from the code or else from the ``name`` (``Imaging Report`` → ``RADIOLOGY``). The content is the
text value, or the numeric value when it is a plain number (meds2text writes numeric values that way); ``unit`` (or
``unit_source_value``) gives the unit and ``visit_id`` the visit. The ``name`` is the description of the code (the
most frequent one given for it; a different name is kept in the event's attributes). Every other attribute
(``provider_id``, ``care_site_id``, ``note_id``, ``procedure_id``…) is kept in the event's ``attributes``, as are
the source table and the ``<encounter>``'s payer plan; ``_`` and ``NULL`` (meds2text's null markers) are absent.

**Encounters.** meds2text's ``<encounter>`` groups the events of a stretch of care. A group holding one visit is
that visit: its events (those with that ``visit_id`` or none) are stated members of it, and the group's
``end_timestamp`` is the visit's end; when the visit's own row is missing (events carry a ``visit_id`` no visit
event has), the visit is a ``visit:<id>`` encounter of type ``VISIT`` starting at the group's ``start_timestamp``
(or its first event). A group holding several visits (or none) states nothing: the graph builder's rules apply —
events join the visit whose ``visit_id`` they carry, else the visit window they fall in, else their day.

**Demographics, providers, care sites.** ``<person>`` gives birth date, sex (``MALE``/``FEMALE`` → ``M``/``F``),
race and ethnicity; blocks repeated in later groups must agree. ``<provider>``s and ``<caresite>``s of all groups
become the graph's providers and care sites (a provider without a care-site id is linked by care-site name).

Bad input raises `GraphInputError` naming the file, the patient, the element (event id or line) and the field.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime

from lxml import etree

from vista.shared.coding import Category, CodingProfile, load_profile
from vista.shared.coding.terminology import standard_description
from vista.shared.coding.vocabularies import normalise_value, note_kind
from vista.graph.build import GivenEncounter, GraphSource
from vista.graph.errors import GraphInputError
from vista.graph.model import VISIT_ENCOUNTER_TYPE, CareSite, Provider, visit_node_id
from vista.shared.meds import schema
from vista.shared.records import CodeCatalog, CodeInfo, Demographics, Event

EVENTSTREAM_TAG = "eventstream"
XML_PROFILE = "vista_xml"
"""The coding profile of the VISTA team's XML (``vista/shared/coding/profiles/vista_xml.toml``)."""

NULL_MARKERS = frozenset({"_", "NULL", "null", "None"})
"""Attribute values meds2text writes for a missing value."""
VISIT_TABLES = frozenset({"visit", "visit_occurrence"})
NOTE_TABLES = frozenset({"note", "notes", "note_event"})
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_EVENT_KEYS = {"code", "type", "table", "name", "visit_id", "unit", "unit_source_value"}
_PERSON_PARTS = {"birthdate", "age", "demographics", "payerplan"}
_DEMOGRAPHIC_TAGS = ("gender", "race", "ethnicity")
_PROVIDER_FIELDS = {"speciality": "specialty", "specialty": "specialty", "gender": "gender",
                    "year_of_birth": "year_of_birth", "care_site_id": "care_site_id", "care_site_name": "care_site_name"}


def _present(value: str | None) -> str | None:
    """The value, or None for a missing one (absent, empty, or a null marker)."""
    if value is None:
        return None
    value = value.strip()
    return None if not value or value in NULL_MARKERS else value


@dataclass
class _Group:
    """One ``<encounter>`` element: its time span and the positions of its events."""

    line: int
    start: datetime | None
    end: datetime | None
    members: list[int] = field(default_factory=list)
    payer_plan: str | None = None


@dataclass
class _Reading:
    """What is collected while walking one ``<eventstream>`` document."""

    path: str
    profile: CodingProfile
    patient: str | None = None
    events: list[Event] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    names: list[str | None] = field(default_factory=list)
    attributes: list[dict[str, str]] = field(default_factory=list)
    groups: list[_Group] = field(default_factory=list)
    demographics: dict[str, object] = field(default_factory=dict)
    providers: dict[str, dict[str, object]] = field(default_factory=dict)
    care_sites: dict[str, dict[str, object]] = field(default_factory=dict)

    def fail(self, problem: str, node: etree._Element | None = None, *, field: str | None = None,
             event_id: str | None = None) -> GraphInputError:
        return GraphInputError.at_element(self.path, problem, node, patient=self.patient, field=field,
                                          event_id=event_id)

    def timestamp(self, node: etree._Element, name: str, *, required: bool) -> datetime | None:
        raw = _present(node.get(name))
        if raw is None:
            if required:
                raise self.fail(f"<{node.tag}> has no {name} attribute", node, field=name)
            return None
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            raise self.fail(f"{raw!r} is not a date/time (YYYY-MM-DD HH:MM[:SS])", node, field=name) from None

    def agree(self, node: etree._Element, name: str, value: object) -> None:
        """Record one demographic fact; a later ``<person>`` block must say the same."""
        before = self.demographics.setdefault(name, value)
        if before != value:
            raise self.fail(f"this <person> says {value!r} but an earlier one says {before!r}", node, field=name)


def _children(node: etree._Element) -> Iterable[etree._Element]:
    return (child for child in node if isinstance(child.tag, str))


def _text_only(reading: _Reading, node: etree._Element, *, event_id: str | None = None) -> str | None:
    if any(True for _ in _children(node)):
        raise reading.fail(f"<{node.tag}> holds text only", node, event_id=event_id)
    return node.text


# ------------------------------------------------------------------------------------------------ walking the tree
def _read_person(node: etree._Element, group: _Group, reading: _Reading) -> None:
    for part in _children(node):
        if part.tag not in _PERSON_PARTS:
            raise reading.fail(f"unexpected element <{part.tag}> in <person>", part)
        if part.tag == "birthdate":
            raw = _present(_text_only(reading, part))
            if raw is not None:
                try:
                    reading.agree(part, "birth", date.fromisoformat(raw[:10]))
                except ValueError:
                    raise reading.fail(f"{raw!r} is not a date (YYYY-MM-DD)", part, field="birthdate") from None
        elif part.tag == "payerplan":
            group.payer_plan = _present(_text_only(reading, part))
        elif part.tag == "demographics":
            for item in _children(part):
                if item.tag not in _DEMOGRAPHIC_TAGS:
                    raise reading.fail(f"unexpected element <{item.tag}> in <demographics>", item)
                value = _present(_text_only(reading, item))
                if value is not None:
                    name = "sex" if item.tag == "gender" else item.tag
                    reading.agree(item, name, normalise_value(schema.GENDER_PREFIX, value) if name == "sex" else value)
        # <age> is derived (birth date and the group's start): nothing to keep


def _merge(kind: str, key: str, found: dict[str, object], into: dict[str, dict[str, object]], node: etree._Element,
           reading: _Reading) -> None:
    """Add one provider/care site; the same id listed again (in a later group) must not contradict it."""
    known = into.setdefault(key, {})
    for name, value in found.items():
        if known.get(name) is None:
            known[name] = value
        elif value is not None and known[name] != value:
            raise reading.fail(f"{kind} {key}: {name} is {value!r} here but {known[name]!r} earlier", node, field=name)


def _listed(node: etree._Element, tag: str, id_attribute: str, reading: _Reading):
    """(element, its id, its other attributes) for each ``<tag>`` child of a ``<providers>``/``<caresites>`` list."""
    for item in _children(node):
        if item.tag != tag:
            raise reading.fail(f"unexpected element <{item.tag}> in <{node.tag}>", item)
        attrs = {k: _present(v) for k, v in item.attrib.items()}
        key = attrs.pop(id_attribute, None)
        if key is None:
            raise reading.fail(f"<{tag}> has no {id_attribute}", item, field=id_attribute)
        yield item, key, attrs


def _read_providers(node: etree._Element, reading: _Reading) -> None:
    for item, provider_id, attrs in _listed(node, "provider", "provider_id", reading):
        found: dict[str, object] = {}
        extra: dict[str, str] = {}
        for name, value in attrs.items():
            if name in _PROVIDER_FIELDS:
                found[_PROVIDER_FIELDS[name]] = value
            elif value is not None:
                extra[name] = value
        year = found.get("year_of_birth")
        if year is not None:
            try:
                found["year_of_birth"] = int(str(year))
            except ValueError:
                raise reading.fail(f"{year!r} is not a year", item, field="year_of_birth") from None
        found.update({f"attr:{k}": v for k, v in extra.items()})
        _merge("provider", provider_id, found, reading.providers, item, reading)


def _read_care_sites(node: etree._Element, reading: _Reading) -> None:
    for item, site_id, attrs in _listed(node, "caresite", "care_site_id", reading):
        found: dict[str, object] = {"name": attrs.pop("care_site_name", None)}
        found.update({f"attr:{k}": v for k, v in attrs.items() if v is not None})
        _merge("care site", site_id, found, reading.care_sites, item, reading)


def _read_events(node: etree._Element, group: _Group, reading: _Reading) -> None:
    for entry in _children(node):
        if entry.tag != "entry":
            raise reading.fail(f"unexpected element <{entry.tag}> in <events>", entry)
        time = reading.timestamp(entry, "timestamp", required=True)
        for item in _children(entry):
            if item.tag != "event":
                raise reading.fail(f"unexpected element <{item.tag}> in <entry>", item)
            group.members.append(len(reading.events))
            _read_event(item, time, reading)


def _read_event(node: etree._Element, time: datetime, reading: _Reading) -> None:
    event_id = f"e{len(reading.events)}"
    attrs = {k: _present(v) for k, v in node.attrib.items()}
    code = attrs.get("code")
    if code is None:
        raise reading.fail("<event> has no code", node, field="code", event_id=event_id)
    table = attrs.get("type") or attrs.get("table")
    content = _text_only(reading, node, event_id=event_id)
    text = content if content is not None and content.strip() else None
    value = None
    if text is not None and table not in NOTE_TABLES and _NUMBER.fullmatch(text.strip()):
        value, text = float(text), None
    event = Event(event_id, time, code, value, text, unit=attrs.get("unit") or attrs.get("unit_source_value"),
                  visit_id=attrs.get("visit_id"))
    event = _canonical(reading.profile.normalise_event(event), code, table, attrs.get("name"), reading.profile)
    kept = {k: v for k, v in attrs.items() if v is not None and k not in _EVENT_KEYS}
    if table is not None:
        kept["table"] = table
        if attrs.get("type") and attrs.get("table") and attrs["table"] != table:
            kept["source_table"] = attrs["table"]  # both spellings given, and they differ: keep the second
    reading.events.append(event)
    reading.lines.append(node.sourceline or 0)
    reading.names.append(attrs.get("name"))
    reading.attributes.append(kept)


def _canonical(event: Event, source: str, table: str | None, name: str | None, profile: CodingProfile) -> Event:
    """The event with a visit spelled ``ENCOUNTER//…`` and a note ``NOTE//<kind>``, whatever the profile made of them."""
    canonical = profile.canonical(source)
    vocabulary = schema.vocabulary(event.code)
    if table in VISIT_TABLES and vocabulary != schema.ENCOUNTER_PREFIX:
        value = canonical.value or source
        return replace(event, code=f"{schema.ENCOUNTER_PREFIX}{schema.SEP}{value}", source_code=source)
    if table in NOTE_TABLES or profile.category_of(source, table) is Category.NOTE:
        own = schema.code_value(event.code) if vocabulary == schema.NOTE_PREFIX else None
        from_name = note_kind(name) if name else None
        # a kind that is a word (RADIOLOGY) beats a document code (NOTE//11506-3 from ``Note/11506-3``)
        kind = next((k for k in (own, from_name) if k and not any(ch.isdigit() for ch in k)), None)
        kind = kind or own or from_name or "OTHER"
        code = f"{schema.NOTE_PREFIX}{schema.SEP}{kind}"
        if code != event.code:
            return replace(event, code=code, source_code=source)
    return event


def _walk(groups: Iterable[etree._Element], reading: _Reading) -> None:
    for group_node in groups:
        if not isinstance(group_node.tag, str):
            continue
        if group_node.tag != "encounter":
            raise reading.fail(f"unexpected element <{group_node.tag}> in <{EVENTSTREAM_TAG}>", group_node)
        start = reading.timestamp(group_node, "start_timestamp", required=False)
        end = reading.timestamp(group_node, "end_timestamp", required=False)
        if start is not None and end is not None and end < start:
            raise reading.fail(f"end_timestamp {end} is before start_timestamp {start}", group_node, field="end_timestamp")
        group = _Group(group_node.sourceline or 0, start, end)
        reading.groups.append(group)
        for part in _children(group_node):
            if part.tag == "person":
                _read_person(part, group, reading)
            elif part.tag == "providers":
                _read_providers(part, reading)
            elif part.tag == "caresites":
                _read_care_sites(part, reading)
            elif part.tag == "events":
                _read_events(part, group, reading)
            else:
                raise reading.fail(f"unexpected element <{part.tag}> in <encounter>", part)
        if group.payer_plan is not None:
            for k in group.members:
                reading.attributes[k].setdefault("payer_plan", group.payer_plan)


# ------------------------------------------------------------------------------------------------ encounters
def _stated_encounters(reading: _Reading) -> tuple[GivenEncounter, ...]:
    """Encounters stated by groups that hold exactly one visit (see the module docstring)."""
    events = reading.events
    is_visit = [schema.vocabulary(e.code) == schema.ENCOUNTER_PREFIX for e in events]
    member_ok = [not v and e.code != schema.BIRTH_CODE for e, v in zip(events, is_visit)]
    visit_row: dict[str, int] = {}
    for k, event in enumerate(events):
        if is_visit[k] and event.visit_id is not None:
            visit_row.setdefault(event.visit_id, k)
    stated: dict[str, dict] = {}  # node id -> start, end, type, members, pseudo, visit id
    for group in reading.groups:
        visits = [k for k in group.members if is_visit[k]]
        ids = {events[k].visit_id for k in group.members if events[k].visit_id is not None}
        if len(visits) > 1 or len(ids) > 1 or (not visits and not ids):
            continue
        visit_id = next(iter(ids), None)
        row = visits[0] if visits else visit_row.get(visit_id)
        members = [k for k in group.members if member_ok[k] and events[k].visit_id in (None, visit_id)]
        if row is not None:
            node_id = events[row].event_id
            entry = stated.setdefault(node_id, {"start": events[row].time, "end": None, "pseudo": False,
                                                "type": schema.code_value(events[row].code), "visit": None, "members": []})
        else:
            node_id = visit_node_id(visit_id)
            first = min((events[k].time for k in members), default=group.start)
            entry = stated.setdefault(node_id, {"start": group.start or first, "end": None, "pseudo": True,
                                                "type": VISIT_ENCOUNTER_TYPE, "visit": visit_id, "members": []})
            if group.start is not None and group.start < entry["start"]:
                entry["start"] = group.start
        if group.end is not None:
            entry["end"] = group.end if entry["end"] is None else max(entry["end"], group.end)
        entry["members"].extend(events[k].event_id for k in members)
    return tuple(GivenEncounter(node_id, e["start"], e["end"], e["type"], tuple(e["members"]), e["pseudo"], e["visit"])
                 for node_id, e in stated.items() if e["start"] is not None)


# ------------------------------------------------------------------------------------------------ assembling
def _catalog(reading: _Reading, given: CodeCatalog | None) -> tuple[CodeCatalog, list[dict[str, str]]]:
    """Descriptions from the ``name``s (the catalog first), and the events' attributes with names that differ."""
    catalog = given if given is not None else CodeCatalog(fallback=standard_description)
    said: dict[str, Counter[str]] = {}
    for event, name in zip(reading.events, reading.names):
        if name is not None:
            said.setdefault(event.code, Counter())[name] += 1
    extra = [CodeInfo(code, names.most_common(1)[0][0]) for code, names in said.items() if code not in catalog]
    if extra:
        catalog = catalog.extended(extra)
    attributes = []
    for event, name, attrs in zip(reading.events, reading.names, reading.attributes):
        if name is not None and name != catalog.describe(event.code).description:
            attrs = {**attrs, "name": name}
        attributes.append(attrs)
    return catalog, attributes


def _providers(reading: _Reading) -> tuple[tuple[Provider, ...], tuple[CareSite, ...]]:
    def split(found: dict[str, object]) -> tuple[dict[str, object], tuple[tuple[str, str], ...]]:
        plain = {k: v for k, v in found.items() if not k.startswith("attr:")}
        extra = tuple(sorted((k[5:], str(v)) for k, v in found.items() if k.startswith("attr:") and v is not None))
        return plain, extra

    sites = []
    by_name: dict[str, str] = {}
    for site_id, found in reading.care_sites.items():
        plain, extra = split(found)
        site = CareSite(site_id, attributes=extra, **plain)
        sites.append(site)
        if site.name is not None:
            by_name.setdefault(site.name, site_id)
    providers = []
    for provider_id, found in reading.providers.items():
        plain, extra = split(found)
        provider = Provider(provider_id, attributes=extra, **plain)
        if provider.care_site_id is None and provider.care_site_name in by_name:
            provider = replace(provider, care_site_id=by_name[provider.care_site_name])
        providers.append(provider)
    return tuple(providers), tuple(sites)


def source_from_eventstream(root: etree._Element, *, path: str, catalog: CodeCatalog | None = None,
                            profile: CodingProfile | str = XML_PROFILE) -> GraphSource:
    """The `GraphSource` of a parsed ``<eventstream>`` document (``path`` names it in errors and provenance)."""
    return eventstream_source(root, _children(root), path=path, catalog=catalog, profile=profile)


def eventstream_source(root: etree._Element, groups: Iterable[etree._Element], *, path: str,
                       catalog: CodeCatalog | None = None, profile: CodingProfile | str = XML_PROFILE) -> GraphSource:
    """The `GraphSource` of an ``<eventstream>`` whose ``<encounter>`` groups come one by one (a streaming reader
    may clear each once the next is asked for), ``root`` giving the person id."""
    reading = _Reading(str(path), load_profile(profile))
    raw_id = root.get("person_id")
    reading.patient = raw_id
    if raw_id is None or not raw_id.strip().lstrip("-").isdigit():
        raise reading.fail(f"<{EVENTSTREAM_TAG}> person_id={raw_id!r} is not an integer subject id", root,
                           field="person_id")
    _walk(groups, reading)
    if not reading.events:
        raise reading.fail("the document holds no <event>", root, field="events")
    code_catalog, attributes = _catalog(reading, catalog)
    providers, care_sites = _providers(reading)
    deaths = [e.time.date() for e in reading.events if e.code == schema.DEATH_CODE and e.time is not None]
    known = {f.name for f in fields(Demographics)}
    demographics = Demographics(**{k: v for k, v in reading.demographics.items() if k in known},
                                death=min(deaths) if deaths else None)
    units = [e.unit for e in reading.events]
    return GraphSource(int(raw_id.strip()), reading.path, "xml-eventstream", reading.events, reading.lines, units,
                       demographics, code_catalog, first_row=None, given_encounters=_stated_encounters(reading),
                       attributes=attributes, providers=providers, care_sites=care_sites)
