"""A columnar buffer of MEDS rows for one shard, built from numpy chunks (no per-event Python objects).

Codes are integer ids into the shared `Vocabulary` (dictionary encoding); free text is an index into the shard's
list of note strings; ``tag`` marks rows the ground truth must find again after sorting (index into a tag list).

>>> buf = RowBuffer()
>>> buf.add(np.array([0, 0]), np.array([10, 5]), np.array([3, 4]), order=1)
>>> rows = buf.build()
>>> rows.code.tolist(), rows.time.tolist(), bool(np.isnan(rows.numeric[0]))
([3, 4], [10, 5], True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

US_PER_DAY = 86_400_000_000
US_PER_MINUTE = 60_000_000
STATIC_TIME = np.iinfo(np.int64).min
"""Sentinel time of static rows (written as null)."""


def days_to_us(days: np.ndarray) -> np.ndarray:
    """Float days since the epoch -> int64 microseconds, rounded to the minute."""
    minutes = np.round(np.asarray(days, dtype=np.float64) * 1440.0).astype(np.int64)
    return minutes * US_PER_MINUTE


@dataclass(slots=True)
class Rows:
    """Parallel arrays of one shard's rows: subject index, time (us), code id, value, text index, sort order, tag, visit."""

    subject: np.ndarray
    time: np.ndarray
    code: np.ndarray
    numeric: np.ndarray
    text: np.ndarray
    order: np.ndarray
    tag: np.ndarray
    visit: np.ndarray

    def __len__(self) -> int:
        return len(self.code)

    def take(self, index: np.ndarray) -> Rows:
        return Rows(*(getattr(self, f)[index] for f in self.__slots__))


class RowBuffer:
    """Collects row chunks; `build` concatenates them into one `Rows`."""

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._py: list[tuple] = []

    def add(self, subject, time, code, numeric=None, text=None, order=1, tag=None, visit=-1) -> None:
        """Append a chunk of rows (arrays of equal length; scalars broadcast)."""
        self._flush_py()
        subject = np.asarray(subject, dtype=np.int32)
        n = len(subject)
        if n == 0:
            return
        time = np.broadcast_to(np.asarray(time, dtype=np.int64), (n,))
        code = np.broadcast_to(np.asarray(code, dtype=np.int32), (n,))
        numeric = np.full(n, np.nan, np.float32) if numeric is None else np.broadcast_to(np.asarray(numeric, dtype=np.float32), (n,))
        text = np.full(n, -1, np.int32) if text is None else np.broadcast_to(np.asarray(text, dtype=np.int32), (n,))
        order = np.broadcast_to(np.asarray(order, dtype=np.int8), (n,))
        tag = np.full(n, -1, np.int32) if tag is None else np.broadcast_to(np.asarray(tag, dtype=np.int32), (n,))
        visit = np.broadcast_to(np.asarray(visit, dtype=np.int32), (n,))
        self._chunks.append((subject, time, code, numeric, text, order, tag, visit))

    def add_one(self, subject: int, time: int, code: int, numeric: float = np.nan, text: int = -1, order: int = 1, tag: int = -1,
                visit: int = -1) -> None:
        """Append a single row from Python scalars (used by the per-case oncology course)."""
        self._py.append((subject, time, code, numeric, text, order, tag, visit))

    _TYPES = (np.int32, np.int64, np.int32, np.float32, np.int32, np.int8, np.int32, np.int32)

    def _flush_py(self) -> None:
        if self._py:
            cols = list(zip(*self._py))
            self._chunks.append(tuple(np.array(c, dtype=t) for c, t in zip(cols, self._TYPES)))
            self._py = []

    def select_visits(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(visit, code, numeric) of the buffered rows whose visit id is flagged in ``wanted``, without concatenating all rows."""
        vis, code, num = [], [], []
        self._flush_py()
        for chunk in self._chunks:
            c_vis = chunk[7]
            m = (c_vis >= 0) & wanted[np.maximum(c_vis, 0)]
            if m.any():
                vis.append(c_vis[m])
                code.append(np.asarray(chunk[2])[m])
                num.append(np.asarray(chunk[3])[m])
        if not vis:
            return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32)
        return np.concatenate(vis), np.concatenate(code), np.concatenate(num)

    def build(self) -> Rows:
        self._flush_py()
        if not self._chunks:
            return Rows(*(np.zeros(0, t) for t in self._TYPES))
        cols = list(zip(*self._chunks))
        self._chunks = []
        return Rows(*(np.concatenate(c) for c in cols))
