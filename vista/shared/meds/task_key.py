"""The unit of work and of output of a cohort task: one subject at one prediction time.

A label file (`vista.shared.meds.labels`) has one row per task; jobs plan, run, name and resume work by this key, and the
rows they write (VISTA graphs, TrajOnco predictions) carry it.

>>> TaskKey(42, datetime(2019, 3, 5, 9, 30)).name
'42_20190305T093000'
>>> TaskKey.from_name("42_20190305T093000") == TaskKey(42, datetime(2019, 3, 5, 9, 30)), TaskKey.from_name("7")
(True, TaskKey(subject_id=7, prediction_time=None))
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

_TIME_FORMAT = "%Y%m%dT%H%M%S"


@dataclass(frozen=True, order=True, slots=True)
class TaskKey:
    """One unit of work and of output: a subject at a prediction time (None: every event of the record)."""

    subject_id: int
    prediction_time: datetime | None = None

    def __post_init__(self) -> None:
        if self.prediction_time is not None and self.prediction_time.tzinfo is not None:
            raise ValueError(f"subject {self.subject_id}: prediction_time must be naive (MEDS times are), not {self.prediction_time}")

    def sort_key(self) -> tuple[int, datetime]:
        return self.subject_id, self.prediction_time or datetime.min

    @property
    def name(self) -> str:
        """A file-name-safe, unique, reversible name (``<subject>_<YYYYmmddTHHMMSS>``; microseconds are kept when set)."""
        if self.prediction_time is None:
            return str(self.subject_id)
        stamp = self.prediction_time.strftime(_TIME_FORMAT)
        if self.prediction_time.microsecond:
            stamp += f".{self.prediction_time.microsecond:06d}"
        return f"{self.subject_id}_{stamp}"

    @classmethod
    def from_name(cls, name: str) -> TaskKey:
        subject, sep, stamp = name.partition("_")
        if not sep:
            return cls(int(subject))
        main, _, micro = stamp.partition(".")
        when = datetime.strptime(main, _TIME_FORMAT)
        return cls(int(subject), when.replace(microsecond=int(micro)) if micro else when)
