"""Read a patient from XML into a graph; write the encounter-structured XML of a graph.

Three document shapes are accepted. The VISTA team's ``<eventstream>`` markup (their meds2text tool) is read by
`vista.graph.eventstream`; the project's own two have a ``<patient>`` root whose ``id`` is the integer subject id,
and optional demographic attributes (``sex``, ``race``, ``ethnicity``, ``birth_date``, ``death_date``).

**Timeline variant** — what `vista.shared.timeline.render_timeline` writes: static elements first, then one ``<events
time=…>`` block per timestamp holding modality groups (``<labs>``, ``<notes>``…) of typed elements, each with
``id`` and ``code`` (``value``/``unit`` for measurements; a note's text is its content and its ``title`` the code's
description; other content is the description, then ``": "`` and any text value)::

    <patient id="7" sex="F" birth_date="1950-03-01">
    <events time="2020-01-05 09:00">
    <visits><visit id="e2" code="ENCOUNTER//AMB">Ambulatory encounter</visit></visits>
    <labs><lab id="e3" code="LOINC//718-7" value="11.2" unit="g/dL">Hemoglobin</lab></labs>
    </events>
    </patient>

**Encounter variant** — events nested in the encounters they belong to. ``<event>`` has ``id``, ``code``, ``time``
(required inside an encounter; absent for static rows), optional ``value``, ``unit``, ``description``,
``source_code`` (the dataset's own spelling), ``visit_id``, and its text value as content. ``<encounter>`` has
``id``, ``start``, optional ``end``, ``type``, ``code`` (default ``ENCOUNTER//<type>``) and ``visit_id``: a real
visit is itself a source event; without a code, ``type="DAY"`` marks a per-day pseudo-encounter and
``type="VISIT"`` a visit known only by its visit id.
Events directly under ``<patient>`` with a time (other than the birth) are assigned by the visit-window rule::

    <patient id="7" sex="F">
    <event id="e0" code="GENDER//F"/>
    <event id="e1" code="MEDS_BIRTH" time="1950-03-01T00:00:00"/>
    <encounter id="e2" type="AMB" start="2020-01-05T09:00:00" end="2020-01-05T10:00:00">
    <event id="e3" code="LOINC//718-7" time="2020-01-05T09:30:00" value="11.2" unit="g/dL" description="Hemoglobin"/>
    <event id="e4" code="NOTE//PROGRESS" time="2020-01-05T10:00:00">Findings: anemia.</event>
    </encounter>
    </patient>

**Provenance.** When the root also carries ``shard`` and ``first_row`` (the MEDS location of the patient's rows),
event ids must be ``e<k>`` and provenance is (shard, first_row + k), exactly as for MEDS input; otherwise it is
(XML file, line of the element).

**Codes.** Descriptions and units come from the ``catalog`` when given (it also supplies parent codes), else from the
document (a timeline element's content, or the shortest one seen for that code when some carry ``": text"``).
A timeline element's text value is what follows ``"<description>: "`` in its content; content that is neither the
description nor of that form is kept whole as the event's text.

Bad input raises `GraphInputError` naming the file, the patient, the element (event id or line) and the field.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from lxml import etree

from vista.shared.coding import CodingProfile
from vista.shared.coding.terminology import standard_description
from vista.graph.build import DEFAULT_CONFIG, GivenEncounter, GraphConfig, GraphSource, build_graph
from vista.graph.errors import GraphInputError
from vista.graph.eventstream import EVENTSTREAM_TAG, XML_PROFILE, eventstream_source
from vista.graph.model import PSEUDO_ENCOUNTER_TYPE, VISIT_ENCOUNTER_TYPE, PatientGraph, SourceFormat
from vista.shared.meds import schema
from vista.shared.records import CodeCatalog, CodeInfo, Demographics, Event, PatientRecord
from vista.shared.timeline.modality import MODALITY_BY_GROUP_TAG, MODALITY_BY_TAG, Modality
from vista.shared.timeline.model import BLOCK_TAG, PART_ATTRIBUTE, ROOT_TAG
from vista.shared.timeline.xmltext import escape_attribute, escape_text
from vista.shared.xml_reading import XmlLimits, XmlReadError, stream_xml

ENCOUNTER_TAG = "encounter"
EVENT_TAG = "event"
_DEMOGRAPHIC_ATTRIBUTES = ("sex", "race", "ethnicity")


@dataclass
class _Reading:
    """What is collected while walking one document."""

    path: str
    patient: str | None = None
    events: list[Event] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    units: list[str | None] = field(default_factory=list)
    contents: list[str | None] = field(default_factory=list)  # timeline variant: element content to split
    descriptions: dict[str, list[str]] = field(default_factory=dict)  # code → descriptions the document gives
    given: list[GivenEncounter] = field(default_factory=list)

    def fail(self, problem: str, node: etree._Element | None = None, *, field: str | None = None,
             event_id: str | None = None) -> GraphInputError:
        return GraphInputError.at_element(self.path, problem, node, patient=self.patient, field=field,
                                          event_id=event_id)

    def time(self, node: etree._Element, name: str, event_id: str | None, *, required: bool) -> datetime | None:
        raw = node.get(name)
        if raw is None:
            if required:
                raise self.fail(f"<{node.tag}> has no {name} attribute", node, field=name, event_id=event_id)
            return None
        try:
            return datetime.fromisoformat(raw.strip())
        except ValueError:
            raise self.fail(f"{raw!r} is not an ISO date/time", node, field=name, event_id=event_id) from None

    def add(self, node: etree._Element, event_id: str | None, time: datetime | None, code: str | None,
            content: str | None, *, text: str | None, description: str | None) -> Event:
        if not event_id:
            raise self.fail(f"<{node.tag}> has no id attribute", node, field="id")
        if not code:
            raise self.fail(f"<{node.tag}> has no code attribute", node, field="code", event_id=event_id)
        raw_value = node.get("value")
        value = None
        if raw_value is not None:
            try:
                value = float(raw_value)
            except ValueError:
                raise self.fail(f"{raw_value!r} is not a number", node, field="value", event_id=event_id) from None
        event = Event(event_id, time, code, value, text, source_code=node.get("source_code") or None,
                      visit_id=node.get("visit_id") or None)
        self.events.append(event)
        self.lines.append(node.sourceline or 0)
        self.units.append(node.get("unit") or None)
        self.contents.append(content)
        if description:
            self.descriptions.setdefault(code, []).append(description)
        return event


def _check_root(root: etree._Element, reading: _Reading) -> None:
    if root.tag != ROOT_TAG:
        raise reading.fail(f"root element is <{root.tag}>, expected <{ROOT_TAG}> or <{EVENTSTREAM_TAG}>", root)
    raw_id = root.get("id")
    reading.patient = raw_id
    if raw_id is None or not raw_id.strip().lstrip("-").isdigit():
        raise reading.fail(f"<{ROOT_TAG}> id={raw_id!r} is not an integer subject id", root, field="id")


def _stream(data: Path | bytes, path: str, catalog: CodeCatalog | None, profile: CodingProfile | str,
            limits: XmlLimits | None) -> GraphSource:
    """Read a document as a stream: an ``<eventstream>`` group by group, a ``<patient>`` whole."""
    reading = _Reading(path)
    pairs = stream_xml(data, name=path, limits=limits, stream_tags=(EVENTSTREAM_TAG,))
    root, first = next(pairs)
    if root.tag == EVENTSTREAM_TAG:
        groups = itertools.chain([first] if first is not None else [], (child for _, child in pairs if child is not None))
        return eventstream_source(root, groups, path=path, catalog=catalog, profile=profile)
    _check_root(root, reading)
    return _patient_source(root, reading, catalog)


def _read_timeline(root: etree._Element, reading: _Reading) -> None:
    """Timeline variant: static elements, then ``<events time>`` blocks of modality groups."""
    for child in root:
        if child.tag == BLOCK_TAG:
            time = reading.time(child, "time", None, required=True)
            for group in child:
                modality = MODALITY_BY_GROUP_TAG.get(group.tag) if isinstance(group.tag, str) else None
                if modality is None:
                    raise reading.fail(f"unknown group <{group.tag}> in <{BLOCK_TAG}>", group)
                for element in group:
                    _timeline_event(element, time, reading, expected=modality)
        else:
            _timeline_event(child, None, reading, expected=None)


def _timeline_event(node: etree._Element, time: datetime | None, reading: _Reading, *, expected: Modality | None) -> None:
    modality = MODALITY_BY_TAG.get(node.tag) if isinstance(node.tag, str) else None
    if modality is None or (expected is not None and modality is not expected):
        raise reading.fail(f"unexpected element <{node.tag}>", node)
    event_id = node.get("id")
    if node.get(PART_ATTRIBUTE) is not None:
        raise reading.fail("split pieces (part=) are not accepted: join the chunks first (vista.shared.timeline.join_timelines)",
                           node, field=PART_ATTRIBUTE, event_id=event_id)
    if len(node):
        raise reading.fail("event elements hold text only", node, event_id=event_id)
    content = node.text or ""
    if modality is Modality.NOTE:
        reading.add(node, event_id, time, node.get("code"), None, text=content or None, description=node.get("title"))
    else:
        reading.add(node, event_id, time, node.get("code"), content, text=None, description=None)


def _read_encounters(root: etree._Element, reading: _Reading) -> None:
    """Encounter variant: ``<event>``s and ``<encounter>``s of ``<event>``s."""
    for child in root:
        if child.tag == EVENT_TAG:
            _plain_event(child, reading, required_time=False)
        elif child.tag == ENCOUNTER_TAG:
            node_id = child.get("id")
            if not node_id:
                raise reading.fail("<encounter> has no id attribute", child, field="id")
            start = reading.time(child, "start", node_id, required=True)
            end = reading.time(child, "end", node_id, required=False)
            kind = child.get("type")
            code = child.get("code")
            pseudo = code is None and kind in (PSEUDO_ENCOUNTER_TYPE, VISIT_ENCOUNTER_TYPE)
            if not pseudo:
                if code is None and not kind:
                    raise reading.fail("<encounter> has neither a type nor a code", child, field="code", event_id=node_id)
                code = code or f"{schema.ENCOUNTER_PREFIX}{schema.SEP}{kind}"
                if schema.vocabulary(code) != schema.ENCOUNTER_PREFIX:
                    raise reading.fail(f"encounter code {code!r} is not an {schema.ENCOUNTER_PREFIX}// code", child,
                                       field="code", event_id=node_id)
                reading.add(child, node_id, start, code, None, text=None, description=child.get("description"))
            members = []
            for node in child:
                if node.tag != EVENT_TAG:
                    raise reading.fail(f"unexpected element <{node.tag}> in <encounter>", node)
                members.append(_plain_event(node, reading, required_time=True).event_id)
            reading.given.append(GivenEncounter(node_id, start, end, kind or schema.code_value(code), tuple(members), pseudo,
                                                child.get("visit_id") if pseudo else None))
        else:
            raise reading.fail(f"unexpected element <{child.tag}> in <{ROOT_TAG}>", child)


def _plain_event(node: etree._Element, reading: _Reading, *, required_time: bool) -> Event:
    event_id = node.get("id")
    if len(node):
        raise reading.fail("<event> holds text only", node, event_id=event_id)
    time = reading.time(node, "time", event_id, required=required_time)
    return reading.add(node, event_id, time, node.get("code"), None, text=node.text or None,
                       description=node.get("description"))


def _content_text(content: str, description: str | None, code: str) -> str | None:
    """The text value inside a timeline element's content ``description[: text]`` (None when it is only the label)."""
    for label in (description, code):
        if label is None:
            continue
        if content == label:
            return None
        if content.startswith(label + ": "):
            return content[len(label) + 2:]
    return content or None


def _demographics(root: etree._Element, events: list[Event], reading: _Reading) -> Demographics:
    """Demographics from the static/birth/death events, completed by the root's attributes (which must agree)."""
    vital = (schema.BIRTH_CODE, schema.DEATH_CODE)
    from_events = PatientRecord(0, reading.path, 0, [e for e in events if e.time is None or e.code in vital]).demographics
    values = {}
    for name in _DEMOGRAPHIC_ATTRIBUTES:
        values[name] = _agree(reading, root, name, getattr(from_events, name), root.get(name))
    for name, attribute in (("birth", "birth_date"), ("death", "death_date")):
        raw = root.get(attribute)
        try:
            given = date.fromisoformat(raw.strip()) if raw is not None else None
        except ValueError:
            raise reading.fail(f"{raw!r} is not an ISO date", root, field=attribute) from None
        values[name] = _agree(reading, root, attribute, getattr(from_events, name), given)
    return Demographics(**values)


def _agree(reading: _Reading, root: etree._Element, name: str, from_events, from_root):
    if from_events is not None and from_root is not None and from_events != from_root:
        raise reading.fail(f"root says {from_root!r} but the events say {from_events!r}", root, field=name)
    return from_events if from_events is not None else from_root


def source_from_xml(data: bytes | str | Path, *, path: str | None = None, catalog: CodeCatalog | None = None,
                    profile: CodingProfile | str = XML_PROFILE, limits: XmlLimits | None = None) -> GraphSource:
    """The `GraphSource` of one patient XML document (``<patient>``, either variant, or ``<eventstream>``, whose
    codes ``profile`` normalises): its bytes or text, or a file read as a stream; ``path`` names it in errors and
    provenance. Entities are decoded, never resolved, and ``limits`` (default `XmlLimits.from_env`) bound the
    document (`vista.shared.xml_reading`)."""
    name = str(path if path is not None else data if isinstance(data, Path) else "<xml>")
    try:
        return _stream(data.encode("utf-8") if isinstance(data, str) else data, name, catalog, profile, limits)
    except XmlReadError as exc:
        raise GraphInputError(exc.path, exc.problem, element=f"line {exc.line}" if exc.line else None) from None


def _patient_source(root: etree._Element, reading: _Reading, catalog: CodeCatalog | None) -> GraphSource:
    """The `GraphSource` of a whole ``<patient>`` document (either variant)."""
    subject_id = int(root.get("id", "").strip())
    tags = {child.tag for child in root if isinstance(child.tag, str)}
    if tags & {EVENT_TAG, ENCOUNTER_TAG}:
        source_format: SourceFormat = "xml-encounters"
        _read_encounters(root, reading)
    else:
        source_format = "xml-timeline"
        _read_timeline(root, reading)

    # Code metadata: the catalog first, else what the document says.
    catalog = catalog if catalog is not None else CodeCatalog(fallback=standard_description)
    timeline_labels: dict[str, list[str]] = {}
    for event, content in zip(reading.events, reading.contents):
        if content is not None:
            timeline_labels.setdefault(event.code, []).append(content)
    extra = []
    for code in dict.fromkeys(e.code for e in reading.events):
        if code in catalog:
            continue
        said = reading.descriptions.get(code) or timeline_labels.get(code)
        description = min(said, key=len) if said else None
        if description == code:
            description = None
        extra.append(CodeInfo(code, description))
    if extra:
        catalog = catalog.extended(extra)
    events = reading.events
    if any(c is not None for c in reading.contents):
        events = [e if content is None else Event(e.event_id, e.time, e.code, e.numeric_value,
                                                  _content_text(content, catalog.describe(e.code).description, e.code))
                  for e, content in zip(events, reading.contents)]
    units = [u if e.numeric_value is not None else None for e, u in zip(events, reading.units)]
    if any(e.numeric_value is not None and u is None for e, u in zip(events, units)):
        units = [u if u is not None or e.numeric_value is None else catalog.describe(e.code).unit for e, u in zip(events, units)]

    # Provenance: the MEDS location when the document states it, else lines of this file.
    shard, first_row_raw = root.get("shard"), root.get("first_row")
    if (shard is None) != (first_row_raw is None):
        raise reading.fail("shard and first_row go together (the MEDS location of the rows)", root,
                           field="first_row" if first_row_raw is None else "shard")
    if shard is not None:
        try:
            first_row = int(first_row_raw)
        except ValueError:
            raise reading.fail(f"{first_row_raw!r} is not an integer", root, field="first_row") from None
        rows = []
        for event, line in zip(events, reading.lines):
            k = event.event_id[1:]
            if not (event.event_id.startswith("e") and k.isdigit()):
                raise GraphInputError(reading.path, f"id {event.event_id!r} is not of the form e<k> (needed with first_row)",
                                      patient=reading.patient, field="id", element=f"event {event.event_id} (line {line})")
            rows.append(first_row + int(k))
        origin = shard
    else:
        first_row = None
        rows = reading.lines
        origin = reading.path
    return GraphSource(subject_id, origin, source_format, events, rows, units, _demographics(root, events, reading), catalog,
                       first_row=first_row, given_encounters=tuple(reading.given))


def read_patient_xml(path: str | os.PathLike, catalog: CodeCatalog | None = None, *,
                     config: GraphConfig = DEFAULT_CONFIG, profile: CodingProfile | str = XML_PROFILE) -> PatientGraph:
    """The `PatientGraph` of the patient XML file at ``path`` (any shape; see the module docstring)."""
    path = Path(path)
    source = source_from_xml(path, path=str(path), catalog=catalog, profile=profile)
    try:
        return build_graph(source, config=config)
    except GraphInputError as exc:
        if exc.source == str(path):
            raise
        # Errors of the build name the MEDS shard when the document gives one: say which file too.
        raise GraphInputError(f"{path} (rows of {exc.source})", exc.problem, patient=exc.patient, field=exc.field,
                              element=exc.element) from None


# ---------------------------------------------------------------------------------------------------- writing
def _attributes(pairs) -> str:
    return "".join(f' {name}="{escape_attribute(str(value))}"' for name, value in pairs if value is not None)


def encounter_xml(graph: PatientGraph) -> str:
    """The encounter-variant XML of ``graph`` (with its MEDS location when it has one); a graph built from MEDS reads
    back the same (source attributes, providers and care sites of an ``<eventstream>`` source are not written)."""
    info, demo = graph.info, graph.info.demographics
    root = [("id", info.subject_id), ("sex", demo.sex), ("race", demo.race), ("ethnicity", demo.ethnicity),
            ("birth_date", demo.birth.isoformat() if demo.birth else None),
            ("death_date", demo.death.isoformat() if demo.death else None)]
    if info.first_row is not None:
        root += [("shard", info.source), ("first_row", info.first_row)]
    out = [f"<{ROOT_TAG}{_attributes(root)}>\n"]

    def event_xml(e) -> str:
        attrs = [("id", e.event_id), ("code", e.code), ("time", e.time.isoformat() if e.time else None),
                 ("value", repr(e.value) if e.value is not None else None), ("unit", e.unit), ("description", e.description),
                 ("source_code", e.source_code), ("visit_id", e.visit_id)]
        if e.text is None:
            return f"<{EVENT_TAG}{_attributes(attrs)}/>\n"
        return f"<{EVENT_TAG}{_attributes(attrs)}>{escape_text(e.text)}</{EVENT_TAG}>\n"

    out.extend(event_xml(e) for e in graph.patient_events())
    for encounter in graph.encounters():
        attrs = [("id", encounter.node_id), ("type", encounter.encounter_type), ("start", encounter.start.isoformat()),
                 ("end", encounter.end.isoformat()), ("visit_id", encounter.visit_id)]
        if not encounter.pseudo:
            own = graph.event(encounter.node_id)
            attrs += [("code", own.code), ("description", own.description), ("source_code", own.source_code)]
        out.append(f"<{ENCOUNTER_TAG}{_attributes(attrs)}>\n")
        out.extend(event_xml(e) for e in graph.events_of(encounter))
        out.append(f"</{ENCOUNTER_TAG}>\n")
    out.append(f"</{ROOT_TAG}>\n")
    return "".join(out)
