"""Writes the course's visits, rows and notes into the shard's buffers (Python scalars) and hands out row tags."""

from __future__ import annotations

import math

from vista.shared.synth.rows import US_PER_MINUTE, RowBuffer
from vista.shared.synth.visits import AMB, ED, IMP, VisitBuffer, panel_mask
from vista.shared.synth.vocabulary import CodeIds

ORDER_FIRST, ORDER_DEFAULT, ORDER_NOTE = 0, 1, 2
"""Sort order of rows at the same time: static rows first, notes after the coded rows of their visit."""

VISIT_HOUR = {AMB: 8.5, ED: 14.0, IMP: 11.0}
"""Hour of the day a course visit starts, per encounter type (before its per-visit spread of minutes)."""


class CourseWriter:
    """Appends course visits and rows to the shard's buffers; every tagged row gets the next tag number."""

    def __init__(self, ids: CodeIds, visits: VisitBuffer, rows: RowBuffer, texts: list[str]):
        self.ids = ids
        self.visits = visits
        self.rows = rows
        self.texts = texts
        self.n_tags = 0

    def visit(self, subject: int, day: float, encounter: int, kind: int, panels=(), chemo: bool = False) -> tuple[int, int]:
        """Add a visit on ``day`` (a deterministic time of that day); returns its id and its time in microseconds."""
        whole = math.floor(day)
        visit_day = whole + VISIT_HOUR[encounter] / 24.0 + ((subject * 7919 + whole * 31 + kind * 7) % 90) * 5 / 1440.0
        visit_id = self.visits.add_one(subject, visit_day, encounter, kind, panels=panel_mask(panels), chemo=chemo)
        return visit_id, int(round(visit_day * 1440.0)) * US_PER_MINUTE

    def row(self, subject: int, visit_id: int, time: int, code: int, offset_min: int = 10, numeric: float = math.nan,
            text: int = -1, tagged: bool = True, order: int = ORDER_DEFAULT) -> int:
        """Add one row ``offset_min`` minutes into the visit; returns its tag (-1 when untagged)."""
        tag = -1
        if tagged:
            tag = self.n_tags
            self.n_tags += 1
        self.rows.add_one(subject, time + offset_min * US_PER_MINUTE, code, numeric, text, order, tag, visit_id)
        return tag

    def text(self, value: str) -> int:
        """Store a text value; returns its index for a row's ``text``."""
        self.texts.append(value)
        return len(self.texts) - 1

    def note(self, subject: int, visit_id: int, time: int, kind: str, text: str, offset_min: int = 90) -> int:
        """Add a note row of ``kind`` (``PROGRESS``, ``RADIOLOGY``, ``PATHOLOGY``); returns its tag."""
        return self.row(subject, visit_id, time, self.ids.note[kind], offset_min, text=self.text(text), order=ORDER_NOTE)
