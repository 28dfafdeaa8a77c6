"""Split a clinical note into sections on its header lines.

A header is a line that starts with a short label followed by a colon (``Findings: ...``, ``Assessment and plan:``):
the label starts with a capital letter, has at most five words and no sentence punctuation. An all-capitals line
(``RADIOLOGY REPORT``) is a header too, with the line itself as the label. A section runs from its header line to
the next header; text before the first header is a section without a title. Sections keep their text exactly, header
line included, so joining them gives the note back and each one's (start, end) offsets point into the source text.

>>> note = "RADIOLOGY REPORT\\nExam: CT chest\\nFindings: 7 mm nodule.\\nNo effusion.\\nImpression: Stable."
>>> [(s.title, s.text) for s in split_sections(note)]  # doctest: +NORMALIZE_WHITESPACE
[('RADIOLOGY REPORT', 'RADIOLOGY REPORT\\n'), ('Exam', 'Exam: CT chest\\n'),
 ('Findings', 'Findings: 7 mm nodule.\\nNo effusion.\\n'), ('Impression', 'Impression: Stable.')]
>>> [(s.title, s.start, s.end) for s in split_sections("seen today.\\nPlan: rest")]
[(None, 0, 12), ('Plan', 12, 22)]
>>> split_sections("")
[]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LABEL = r"[A-Z][A-Za-z0-9/&'()-]*(?:[ \t][A-Za-z0-9/&'()-]+){0,4}"
_HEADER = re.compile(
    rf"[ \t]*(?:(?P<label>{_LABEL})[ \t]*:(?=[ \t\r\n]|$)|(?P<caps>[A-Z][A-Z0-9/&-]*(?:[ \t]+[A-Z0-9/&-]+)*)[ \t\r]*(?:\n|$))"
)
"""A header at the start of a line (matched line by line: anchoring with re.MULTILINE tries every character)."""


@dataclass(frozen=True, slots=True)
class NoteSection:
    """One section: its header label (None before the first header), its text, and its offsets in the note."""

    title: str | None
    text: str
    start: int
    end: int


def split_sections(text: str) -> list[NoteSection]:
    """The sections of ``text`` in order; their texts concatenate to ``text``."""
    if not text:
        return []
    starts: list[tuple[int, str | None]] = []
    line = 0
    while line >= 0:
        match = _HEADER.match(text, line)
        if match is not None:
            starts.append((line, (match.group("label") or match.group("caps")).strip()))
        line = text.find("\n", line)
        if line >= 0:
            line += 1
    if not starts or starts[0][0] > 0:
        starts.insert(0, (0, None))
    bounds = [s for s, _ in starts[1:]] + [len(text)]
    return [NoteSection(title, text[start:end], start, end) for (start, title), end in zip(starts, bounds)]
