"""The visit table of a shard: one entry per encounter, with its setting, kind, reason and ordered lab panels.

Visits are generated in bulk (background visits, screening and follow-up visits, signal visits) and one at a time
by the oncology course; `VisitBuffer` accepts both and `build` returns flat numpy arrays. Visit times are float
days since 1970-01-01 including the time of day (minute precision).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vista.shared.synth.catalog import PANELS

AMB, ED, IMP = 0, 1, 2
"""Encounter settings (written as ENCOUNTER//AMB, ENCOUNTER//ED, ENCOUNTER//IMP)."""

(K_ACUTE, K_WELLNESS, K_CHRONIC, K_SCREEN, K_FOLLOWUP, K_SIGNAL, K_ONC, K_WORKUP, K_PROC) = range(9)
"""Visit kinds: background acute, wellness, chronic follow-up, screening procedure, follow-up procedure, cancer signal,
oncology care, cancer work-up, procedure-only oncology visit (imaging, infusion room, radiation)."""

PANEL_KEYS: tuple[str, ...] = tuple(PANELS)
PANEL_BIT: dict[str, int] = {k: 1 << i for i, k in enumerate(PANEL_KEYS)}


def panel_mask(panels) -> int:
    m = 0
    for p in panels:
        m |= PANEL_BIT[p]
    return m


def time_of_day(rng: np.random.Generator, enc: np.ndarray) -> np.ndarray:
    """Fraction of a day at which visits start: office hours for AMB, any hour for ED, daytime/evening for IMP."""
    n = len(enc)
    amb = (8.0 + np.floor(rng.random(n) * 102) * 5 / 60) / 24.0
    ed = np.floor(rng.random(n) * 288) * 5 / 1440.0
    imp = (8.0 + np.floor(rng.random(n) * 168) * 5 / 60) / 24.0
    return np.where(enc == AMB, amb, np.where(enc == ED, ed, imp))


@dataclass(slots=True)
class Visits:
    subject: np.ndarray
    day: np.ndarray
    enc: np.ndarray
    kind: np.ndarray
    reason: np.ndarray
    panels: np.ndarray
    chemo: np.ndarray
    note: np.ndarray

    def __len__(self) -> int:
        return len(self.subject)


class VisitBuffer:
    """Collects visits; ids are assigned in insertion order."""

    _FIELDS = ("subject", "day", "enc", "kind", "reason", "panels", "chemo", "note")
    _TYPES = (np.int32, np.float64, np.int8, np.int8, np.int16, np.int64, bool, bool)

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._py: list[tuple] = []
        self.count = 0

    def add(self, subject, day, enc, kind, reason=-1, panels=0, chemo=False, note=False) -> np.ndarray:
        subject = np.asarray(subject, dtype=np.int32)
        n = len(subject)
        self._flush_py()
        cols = [subject]
        for value, t in zip((day, enc, kind, reason, panels, chemo, note), self._TYPES[1:]):
            cols.append(np.broadcast_to(np.asarray(value, dtype=t), (n,)).copy())
        self._chunks.append(tuple(cols))
        ids = np.arange(self.count, self.count + n)
        self.count += n
        return ids

    def add_one(self, subject: int, day: float, enc: int, kind: int, reason: int = -1, panels: int = 0, chemo: bool = False,
                note: bool = False) -> int:
        self._py.append((subject, day, enc, kind, reason, panels, chemo, note))
        self.count += 1
        return self.count - 1

    def _flush_py(self) -> None:
        if self._py:
            cols = list(zip(*self._py))
            self._chunks.append(tuple(np.array(c, dtype=t) for c, t in zip(cols, self._TYPES)))
            self._py = []

    def build(self) -> Visits:
        self._flush_py()
        if not self._chunks:
            return Visits(*(np.zeros(0, t) for t in self._TYPES))
        cols = list(zip(*self._chunks))
        return Visits(*(np.concatenate(c) for c in cols))
