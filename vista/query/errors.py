"""Errors of the query layer, each naming the store, the subject and the id or field at fault.

>>> str(UnknownEventError(21, ["e999", "t7"], where="its MEDS Graph"))
"subject 21: no source event 'e999', 't7' in its MEDS Graph (source events are named e<k>)"
"""

from __future__ import annotations

from collections.abc import Sequence

from vista.shared.errors import UserError


class QueryError(ValueError, UserError):
    """Base class: a question cannot be answered or a source cannot be opened because of the input."""


class StoreMissingError(QueryError):
    """The directory is not a graph store (no manifest), or it has no stored timeline for the subject."""


class UnknownSubjectError(QueryError):
    """The store has no graph for the requested subject."""


class UnknownEventError(QueryError):
    """Ids that are not source events of the patient's graph (or not events of its timeline)."""

    def __init__(self, subject_id: int, ids: Sequence[str], *, where: str = "its MEDS Graph",
                 kind: str = "source event", pattern: str = "e<k>"):
        self.subject_id = subject_id
        self.ids = tuple(ids)
        shown = ", ".join(repr(i) for i in self.ids[:10]) + (" ..." if len(self.ids) > 10 else "")
        super().__init__(f"subject {subject_id}: no {kind} {shown} in {where} ({kind}s are named {pattern})")


class ContextTooLongError(QueryError):
    """The timeline (or the opened sources) does not fit the model's context window with room for the answer."""


class PlanError(QueryError):
    """A query plan that cannot be run: malformed JSON, a field out of its bounds, an unknown episode."""


class UnknownNameError(PlanError):
    """A lab, vital, drug or code name the patient's record does not have; names the nearest ones it has.

    >>> str(UnknownNameError(21, "hemoglobn", "measurement (lab or vital)", ["hemoglobin"]))
    "subject 21: no measurement (lab or vital) 'hemoglobn' in its record (nearest: hemoglobin)"
    """

    def __init__(self, subject_id: int, name: str, kind: str, nearest: Sequence[str]):
        self.subject_id = subject_id
        self.name = name
        self.nearest = tuple(nearest)
        near = f"nearest: {', '.join(self.nearest)}" if self.nearest else "no similar name"
        super().__init__(f"subject {subject_id}: no {kind} {name!r} in its record ({near})")
