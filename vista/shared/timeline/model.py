"""The typed XML timeline: a patient root (demographics), then one block per distinct timestamp.

Every piece of text ends with ``>\\n`` and the next starts with ``<``. With cl100k_base that makes token
counts additive (no token spans the boundary), so the chunker sums per-block counts instead of
re-encoding; it still verifies the final strings.

>>> lab = EventElement("e3", Modality.LAB, (("code", "LOINC//718-7"), ("value", "11.2"), ("unit", "g/dL")), "Hemoglobin")
>>> print(lab.xml, end="")
<lab id="e3" code="LOINC//718-7" value="11.2" unit="g/dL">Hemoglobin</lab>
>>> block = TimeBlock(datetime(2020, 1, 5, 9), (lab,))
>>> print(block.text, end="")
<events time="2020-01-05 09:00">
<labs>
<lab id="e3" code="LOINC//718-7" value="11.2" unit="g/dL">Hemoglobin</lab>
</labs>
</events>
>>> root = PatientRoot(subject_id=7, sex="F", birth_date=date(1950, 3, 1), prediction_time=datetime(2021, 1, 1))
>>> print(Timeline(root, (block,)).to_xml(), end="")  # doctest: +ELLIPSIS
<patient id="7" sex="F" birth_date="1950-03-01" prediction_time="2021-01-01">
<events time="2020-01-05 09:00">
...
</events>
</patient>
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date, datetime

import numpy as np

from vista.shared.timeline.modality import Modality
from vista.shared.timeline.xmltext import escape_attribute, escape_text, format_time
from vista.shared.tokens import count_tokens, count_tokens_batch

ROOT_TAG = "patient"
BLOCK_TAG = "events"
PART_ATTRIBUTE = "part"
Part = tuple[int, int]
"""(k, n): this is piece k of n of a timestamp or of an event's text split to fit a token budget."""


def _part_attribute(part: Part | None) -> str:
    return "" if part is None else f' {PART_ATTRIBUTE}="{part[0]}/{part[1]}"'


def element_xml(modality: Modality, event_id: str, attributes: tuple[tuple[str, str], ...], content: str, part: Part | None = None) -> str:
    """One event as one element (a single line unless its content has newlines), ending with a newline."""
    attrs = "".join(f' {name}="{escape_attribute(value)}"' for name, value in attributes)
    return f'<{modality.tag} id="{escape_attribute(event_id)}"{attrs}{_part_attribute(part)}>{escape_text(content)}</{modality.tag}>\n'


def group_open(modality: Modality) -> str:
    return f"<{modality.group_tag}>\n"


def group_close(modality: Modality) -> str:
    return f"</{modality.group_tag}>\n"


def block_open(time: datetime, part: Part | None = None) -> str:
    return f'<{BLOCK_TAG} time="{format_time(time)}"{_part_attribute(part)}>\n'


BLOCK_CLOSE = f"</{BLOCK_TAG}>\n"
FOOTER = f"</{ROOT_TAG}>\n"


@dataclass(frozen=True, slots=True)
class EventElement:
    """One event as rendered: its provenance id, modality, attributes after ``id`` and text content (unescaped)."""

    event_id: str
    modality: Modality
    attributes: tuple[tuple[str, str], ...]
    content: str
    part: Part | None = None
    xml: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "xml", element_xml(self.modality, self.event_id, self.attributes, self.content, self.part))

    def attribute(self, name: str) -> str | None:
        return next((value for key, value in self.attributes if key == name), None)

    def with_content(self, content: str, part: Part | None) -> EventElement:
        """The same event carrying a slice of its text (used when one event alone exceeds a token budget)."""
        return replace(self, content=content, part=part)


def block_text(time: datetime, elements: Iterable[EventElement], part: Part | None = None) -> str:
    """A timestamp element holding ``elements`` in one group element per run of the same modality."""
    out = [block_open(time, part)]
    current: Modality | None = None
    for element in elements:
        if element.modality is not current:
            if current is not None:
                out.append(group_close(current))
            out.append(group_open(element.modality))
            current = element.modality
        out.append(element.xml)
    if current is not None:
        out.append(group_close(current))
    out.append(BLOCK_CLOSE)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class TimeBlock:
    """All events of one timestamp (or piece ``part`` of them), grouped by modality, as XML text."""

    time: datetime
    elements: tuple[EventElement, ...]
    part: Part | None = None
    text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", block_text(self.time, self.elements, self.part))

    @property
    def event_ids(self) -> tuple[str, ...]:
        return tuple(e.event_id for e in self.elements)


@dataclass(frozen=True, slots=True)
class PatientRoot:
    """The root element: demographics, prediction time, the left-truncation flag, and static rows that are not demographics."""

    subject_id: int
    sex: str | None = None
    birth_date: date | None = None
    race: str | None = None
    ethnicity: str | None = None
    prediction_time: datetime | None = None
    truncated_before: datetime | None = None  # set by left-truncation: older history was left out
    dropped_events: int = 0
    static: tuple[EventElement, ...] = ()

    def attributes(self) -> list[tuple[str, str]]:
        """The root's attributes in document order (absent values are left out)."""
        attrs = [("id", str(self.subject_id))]
        for name, value in (("sex", self.sex), ("birth_date", self.birth_date), ("race", self.race), ("ethnicity", self.ethnicity)):
            if value is not None:
                attrs.append((name, value.isoformat() if isinstance(value, date) else value))
        if self.prediction_time is not None:
            attrs.append(("prediction_time", format_time(self.prediction_time)))
        if self.dropped_events:
            if self.truncated_before is not None:
                attrs.append(("truncated_before", format_time(self.truncated_before)))
            attrs.append(("dropped_events", str(self.dropped_events)))
        return attrs

    @property
    def header(self) -> str:
        attrs = "".join(f' {name}="{escape_attribute(value)}"' for name, value in self.attributes())
        return f"<{ROOT_TAG}{attrs}>\n" + "".join(e.xml for e in self.static)


@dataclass(eq=False)
class Timeline:
    """One patient's XML timeline: ``header`` + the blocks' texts + ``footer``; token counts are cached."""

    root: PatientRoot
    blocks: tuple[TimeBlock, ...]
    _block_tokens: np.ndarray | None = field(default=None, repr=False, kw_only=True)  # cache of block_tokens()

    @property
    def header(self) -> str:
        return self.root.header

    @property
    def footer(self) -> str:
        return FOOTER

    def to_xml(self) -> str:
        return self.header + "".join(b.text for b in self.blocks) + self.footer

    def event_ids(self) -> list[str]:
        """Ids of the timestamped events, in timeline order."""
        return [i for b in self.blocks for i in b.event_ids]

    def block_tokens(self) -> np.ndarray:
        """Token count of each block's text (computed once, in a threaded batch)."""
        if self._block_tokens is None:
            self._block_tokens = count_tokens_batch([b.text for b in self.blocks])
        return self._block_tokens

    def header_tokens(self) -> int:
        return count_tokens(self.header)

    def footer_tokens(self) -> int:
        return count_tokens(self.footer)

    def n_tokens(self) -> int:
        """Tokens of `to_xml()` (by additivity of the pieces)."""
        return self.header_tokens() + int(self.block_tokens().sum()) + self.footer_tokens()

    def select(self, event_ids: Iterable[str]) -> Timeline:
        """Only the timestamped events in ``event_ids`` (blocks left empty are dropped); the root is unchanged."""
        keep = set(event_ids)
        blocks = []
        for block in self.blocks:
            kept = tuple(e for e in block.elements if e.event_id in keep)
            if len(kept) == len(block.elements):
                blocks.append(block)
            elif kept:
                blocks.append(TimeBlock(block.time, kept, block.part))
        return Timeline(self.root, tuple(blocks))
