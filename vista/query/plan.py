"""The plan language of the query bridge: what to find in one patient's record, where, and how to aggregate it.

A plan names exactly one **target** and optionally narrows it:

- ``measure``: a lab or vital, by code (``LOINC//718-7``) or name (``hemoglobin``, ``hgb``, ``wbc``); its numeric rows;
- ``events``: codes, code prefixes (``CPT//7*``) or names (``carboplatin``); every row with one of them;
- ``notes``: a regular expression (case-insensitive) searched in the notes' text;
- ``episodes``: the stored TOA timeline's episodes matching a selector (kind, line, drug).

Narrowing, all optional and combined by intersection: ``window`` (ISO dates, both ends inclusive), ``episode``
(the dates of the one timeline episode a selector picks), ``during`` (a drug: from its first to its last
administration row), ``where`` (a value test on measurements, e.g. ``{"op": "<", "value": 8}``) and ``unit`` (the
unit wanted: converted when the conversion is known, refused otherwise).

``aggregate``: ``min``, ``max``, ``first``, ``last``, ``count``, ``mean``, ``change`` (last minus first),
``trend`` (least-squares slope per 30 days), ``list`` (every row; the default).

>>> Plan.model_validate({"measure": "LOINC//718-7", "aggregate": "min"}).target
'measure'
>>> Plan.model_validate({"measure": "hgb", "notes": "x"})
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for Plan
  Value error, a plan has exactly one target of measure, events, notes, episodes; this one has 2 (measure, notes) ...
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vista.query.errors import PlanError

Aggregate = Literal["min", "max", "first", "last", "count", "mean", "change", "trend", "list"]
AGGREGATES: tuple[str, ...] = Aggregate.__args__  # type: ignore[attr-defined]
EpisodeKindName = Literal["baseline", "diagnosis", "treatment_line", "post_oncological"]
TARGETS = ("measure", "events", "notes", "episodes")
NAME_MAX = 120
PATTERN_MAX = 200
MAX_CODES = 50
PLAN_TEXT_MAX = 20_000
"""Longest plan text accepted (a plan is a few hundred characters)."""

Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Window(_Frozen):
    """Dates, both inclusive; an absent end is open."""

    start: dt.date | None = None
    end: dt.date | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValueError(f"window end {self.end} is before its start {self.start}")
        return self


class EpisodeSelector(_Frozen):
    """Episodes of the stored timeline: of a kind, a treatment line number, and/or a line whose events name a drug."""

    kind: EpisodeKindName | None = None
    line: int | None = Field(default=None, ge=1, le=30)
    drug: Name | None = None


class ValueFilter(_Frozen):
    """A test every kept measurement satisfies."""

    op: Literal["<", "<=", ">", ">=", "=="]
    value: float


class Plan(_Frozen):
    """One deterministic query over one patient's store entry (see the module docstring)."""

    measure: Name | None = None
    events: list[Name] | None = Field(default=None, min_length=1, max_length=MAX_CODES)
    notes: str | None = Field(default=None, min_length=1, max_length=PATTERN_MAX)
    episodes: EpisodeSelector | None = None
    window: Window | None = None
    episode: EpisodeSelector | None = None
    during: Name | None = None
    where: ValueFilter | None = None
    unit: str | None = Field(default=None, max_length=20)
    aggregate: Aggregate = "list"

    @field_validator("notes")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"notes pattern {value!r} is not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_target(self) -> Plan:
        given = [t for t in TARGETS if getattr(self, t) is not None]
        if len(given) != 1:
            raise ValueError(f"a plan has exactly one target of {', '.join(TARGETS)}; this one has {len(given)}"
                             + (f" ({', '.join(given)})" if given else ""))
        if self.where is not None and self.measure is None:
            raise ValueError("'where' tests measurement values: it needs a 'measure' target")
        return self

    @property
    def target(self) -> str:
        return next(t for t in TARGETS if getattr(self, t) is not None)

    def compact(self) -> str:
        """The plan as one line of JSON with only the fields given (how the CLI and answers show it)."""
        return self.model_dump_json(exclude_none=True, exclude_defaults=True)


def plan_schema() -> dict:
    """The plan's JSON schema (what ``vista query --plan-schema`` prints)."""
    return Plan.model_json_schema()


def parse_plan(text: str, where: str = "--plan") -> Plan:
    """A plan from JSON text, or from the file ``text`` names; one-line `PlanError` naming ``where`` and the field.

    >>> parse_plan('{"measure": "hemoglobin", "aggregate": "avg"}')
    Traceback (most recent call last):
    ...
    vista.query.errors.PlanError: --plan: field 'aggregate': Input should be 'min', 'max', 'first', 'last', 'count', 'mean', 'change', 'trend' or 'list'
    """
    body = text.strip()
    if not body.startswith("{"):
        path = Path(body)
        if len(body) > 4096 or not path.is_file():
            raise PlanError(f"{where}: neither a JSON object nor a plan file ({body[:60]!r}...)"
                            if len(body) > 60 else f"{where}: neither a JSON object nor a plan file ({body!r})")
        where, body = str(path), path.read_text(encoding="utf-8")
    if len(body) > PLAN_TEXT_MAX:
        raise PlanError(f"{where}: the plan has {len(body):,} characters (at most {PLAN_TEXT_MAX:,})")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    return plan_of(data, where)


def plan_of(data: object, where: str) -> Plan:
    """`Plan.model_validate` with its first error as one `PlanError` line naming the field."""
    if not isinstance(data, dict):
        raise PlanError(f"{where}: a plan is a JSON object, not {type(data).__name__}")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise PlanError(f"{where}: " + (f"field {field!r}: " if field else "") + message) from None
