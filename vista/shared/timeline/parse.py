"""Read timeline XML (a whole timeline or chunks of one) back into a `Timeline`, e.g. to re-chunk filtered chunks.

`parse_timeline` keeps a document as it is (pieces stay pieces, so parsing and writing a chunk gives the
chunk back). `join_timelines` puts documents of one patient together and joins what the chunker split:
consecutive blocks with the same time become one block, consecutive pieces of one event's text (same
``id``, ``part="k/n"``) one element.

>>> xml = ('<patient id="7" sex="F"><events time="2020-01-05"><labs>'
...        '<lab id="e3" code="LOINC//718-7" value="11.2">Hemoglobin</lab></labs></events></patient>')
>>> tl = parse_timeline(xml)
>>> tl.root.subject_id, tl.root.sex, tl.event_ids()
(7, 'F', ['e3'])
>>> parse_timeline(tl.to_xml()).to_xml() == tl.to_xml()
True
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from datetime import date, datetime

from lxml import etree

from vista.shared.timeline.errors import TimelineError
from vista.shared.timeline.modality import MODALITY_BY_GROUP_TAG, MODALITY_BY_TAG
from vista.shared.timeline.model import BLOCK_TAG, PART_ATTRIBUTE, ROOT_TAG, EventElement, Part, PatientRoot, TimeBlock, Timeline
from vista.shared.timeline.xmltext import parse_time
from vista.shared.xml_reading import XmlReadError, parse_xml

def _fail(source: str, what: str) -> TimelineError:
    return TimelineError(f"{source}: {what}")


def _part(source: str, node: etree._Element) -> Part | None:
    raw = node.get(PART_ATTRIBUTE)
    if raw is None:
        return None
    k, sep, n = raw.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise _fail(source, f"line {node.sourceline}: {PART_ATTRIBUTE}={raw!r} is not 'k/n'")
    return int(k), int(n)


def _time(source: str, node: etree._Element, name: str) -> datetime | None:
    raw = node.get(name)
    if raw is None:
        return None
    try:
        return parse_time(raw)
    except ValueError:
        raise _fail(source, f"line {node.sourceline}: <{node.tag}> attribute {name}={raw!r} is not an ISO date/time") from None


def _element(source: str, node: etree._Element) -> EventElement:
    modality = MODALITY_BY_TAG.get(node.tag) if isinstance(node.tag, str) else None
    if modality is None:
        raise _fail(source, f"line {node.sourceline}: unknown event element <{node.tag}>")
    event_id = node.get("id")
    if not event_id:
        raise _fail(source, f"line {node.sourceline}: <{node.tag}> has no id attribute")
    if len(node):
        raise _fail(source, f"line {node.sourceline}: event {event_id} contains child elements or entity references (only text is allowed)")
    attributes = tuple((k, v) for k, v in node.attrib.items() if k not in ("id", PART_ATTRIBUTE))
    return EventElement(event_id, modality, attributes, node.text or "", _part(source, node))


def _block(source: str, node: etree._Element) -> TimeBlock:
    time = _time(source, node, "time")
    if time is None:
        raise _fail(source, f"line {node.sourceline}: <{BLOCK_TAG}> has no time attribute")
    elements: list[EventElement] = []
    for group in node:
        modality = MODALITY_BY_GROUP_TAG.get(group.tag) if isinstance(group.tag, str) else None
        if modality is None:
            raise _fail(source, f"line {group.sourceline}: unknown group <{group.tag}> in <{BLOCK_TAG} time={node.get('time')!r}>")
        for child in group:
            element = _element(source, child)
            if element.modality is not modality:
                raise _fail(source, f"line {child.sourceline}: <{child.tag}> inside <{group.tag}>")
            elements.append(element)
    return TimeBlock(time, tuple(elements), _part(source, node))


def _root(source: str, node: etree._Element, static: tuple[EventElement, ...]) -> PatientRoot:
    raw_id = node.get("id", "")
    try:
        subject_id = int(raw_id)
    except ValueError:
        raise _fail(source, f"<{ROOT_TAG}> id={raw_id!r} is not an integer subject id") from None
    birth = node.get("birth_date")
    try:
        birth_date = date.fromisoformat(birth) if birth is not None else None
        dropped = int(node.get("dropped_events", "0"))
    except ValueError as exc:
        raise _fail(source, f"subject {subject_id}: bad root attribute ({exc})") from None
    return PatientRoot(
        subject_id=subject_id,
        sex=node.get("sex"),
        birth_date=birth_date,
        race=node.get("race"),
        ethnicity=node.get("ethnicity"),
        prediction_time=_time(source, node, "prediction_time"),
        truncated_before=_time(source, node, "truncated_before"),
        dropped_events=dropped,
        static=static,
    )


def _merge_elements(elements: Iterable[EventElement]) -> tuple[EventElement, ...]:
    """Join consecutive text pieces of the same event back into one element."""
    out: list[EventElement] = []
    for element in elements:
        previous = out[-1] if out else None
        if previous is not None and element.part is not None and previous.part is not None and previous.event_id == element.event_id:
            out[-1] = previous.with_content(previous.content + element.content, element.part)  # labels dropped below
        else:
            out.append(element)
    return tuple(e.with_content(e.content, None) if e.part is not None else e for e in out)


def merge_blocks(blocks: Iterable[TimeBlock]) -> tuple[TimeBlock, ...]:
    """Join consecutive blocks with the same time (pieces of a split timestamp) and split event texts."""
    runs: list[tuple[datetime, list[EventElement]]] = []
    for block in blocks:
        if runs and runs[-1][0] == block.time:
            runs[-1][1].extend(block.elements)
        else:
            runs.append((block.time, list(block.elements)))
    return tuple(TimeBlock(time, _merge_elements(elements)) for time, elements in runs if elements)


def parse_timeline(xml: str | bytes, *, source: str = "<timeline>") -> Timeline:
    """The `Timeline` written in ``xml``, as written; `TimelineError` naming ``source`` if it is not one."""
    data = xml.encode("utf-8") if isinstance(xml, str) else xml
    try:
        node = parse_xml(data, name=source)  # entities decoded, never resolved (vista.shared.xml_reading)
    except XmlReadError as exc:
        raise TimelineError(str(exc)) from None
    if node.tag != ROOT_TAG:
        raise _fail(source, f"root element is <{node.tag}>, expected <{ROOT_TAG}>")
    static: list[EventElement] = []
    blocks: list[TimeBlock] = []
    for child in node:
        if child.tag == BLOCK_TAG:
            blocks.append(_block(source, child))
        elif blocks:
            raise _fail(source, f"line {child.sourceline}: <{child.tag}> after the first <{BLOCK_TAG}> (static rows come first)")
        else:
            static.append(_element(source, child))
    return Timeline(_root(source, node, tuple(static)), tuple(blocks))


def join_timelines(documents: Sequence[str], *, source: str = "<chunks>") -> Timeline:
    """One timeline from documents of the same patient in time order (e.g. filtered chunks), pieces joined.

    The root (demographics, flags, static rows) is the first document's. A joined text keeps no part
    label, even when some of its pieces were filtered out.
    """
    if not documents:
        raise _fail(source, "no documents to join")
    parts = [parse_timeline(doc, source=f"{source}[{i}]") for i, doc in enumerate(documents)]
    subjects = {p.root.subject_id for p in parts}
    if len(subjects) > 1:
        raise _fail(source, f"documents of different subjects {sorted(subjects)}")
    blocks = [b for p in parts for b in p.blocks]
    for before, after in itertools.pairwise(blocks):
        if after.time < before.time:
            raise _fail(source, f"subject {parts[0].root.subject_id}: blocks out of time order ({before.time} then {after.time})")
    return Timeline(parts[0].root, merge_blocks(blocks))
