"""The typed cohort query: which patients have coded events (optionally with a value test), text findings, and in
which order. Built from Python or from the CLI's short specs (`parse_code_term`, `parse_text_term`,
`parse_order`); evaluated by `vista.patient_search.evaluate.run_query`.

>>> q = CohortQuery(terms=[parse_code_term("lung=ICD10CM//C34*"),
...                        parse_text_term("egfr@NOTE//PATHOLOGY=EGFR: (?!no )[^.]*detected"),
...                        parse_text_term("pd1=progression of .* on line 1 therapy")],
...                 order=[parse_order("egfr:pd1")])
>>> [t.name for t in q.terms], q.terms[1].codes, q.order[0]
(['lung', 'egfr', 'pd1'], ['NOTE//PATHOLOGY'], Order(first='egfr', then='pd1', within_days=None))
>>> parse_code_term("hb=LOINC//718-7<10").value
ValueTest(op='<', number=10.0)
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vista.patient_search.errors import PatientSearchError
from vista.shared.regex_field import PythonRegex

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ValueTest(_Model):
    """A test on an event's numeric value (``value < 10``)."""

    op: Literal["<", "<=", ">", ">=", "==", "!="] = Field(description="comparison")
    number: float = Field(description="the number compared with")


def _check_patterns(codes: list[str]) -> list[str]:
    for code in codes:
        if not code or "*" in code[:-1]:
            raise ValueError(f"code pattern {code!r}: a code, or a code prefix ending in one '*'")
    return codes


class CodeTerm(_Model):
    """Patients with an event whose code matches one of ``codes`` (exact, or a prefix ending in ``*``)."""

    kind: Literal["code"] = "code"
    name: str = Field(pattern=f"^{_NAME}$", description="the term's name (shown in results, used by `Order`)")
    codes: list[str] = Field(min_length=1, description="codes or code prefixes ending in '*' (ICD10CM//C34*)")
    value: ValueTest | None = Field(None, description="optional test on the event's numeric value")

    _codes = field_validator("codes")(_check_patterns)


class TextTerm(_Model):
    """Patients with a note (or an event text value) matching a regular expression (case-insensitive); text lives
    in the graphs, not the index, so these terms are read only for patients passing the code terms."""

    kind: Literal["text"] = "text"
    name: str = Field(pattern=f"^{_NAME}$", description="the term's name (shown in results, used by `Order`)")
    pattern: PythonRegex = Field(min_length=1, description="Python regular expression searched in the text")
    codes: list[str] = Field(default_factory=list, description="only nodes with these codes or prefixes "
                             "(NOTE//PATHOLOGY, NOTE//*); default any")

    _codes = field_validator("codes")(_check_patterns)


Term = Annotated[CodeTerm | TextTerm, Field(discriminator="kind")]


class Order(_Model):
    """Evidence of term ``first`` dated strictly before evidence of term ``then`` (at most ``within_days`` before)."""

    first: str
    then: str
    within_days: float | None = Field(None, gt=0)


class CohortQuery(_Model):
    """All ``terms`` hold for the patient, and every ``order`` holds between their evidence."""

    terms: list[Term] = Field(min_length=1)
    order: list[Order] = Field(default_factory=list)

    @model_validator(mode="after")
    def _names(self) -> CohortQuery:
        names = [t.name for t in self.terms]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"term names must be unique: {', '.join(repeated)}")
        for order in self.order:
            for name in (order.first, order.then):
                if name not in names:
                    raise ValueError(f"order {order.first}:{order.then} names no term {name!r} (terms: "
                                     f"{', '.join(names)})")
        return self


def load_query(text: str, source: str = "query") -> CohortQuery:
    """A `CohortQuery` from JSON (PatientSearchError naming ``source`` and the problem)."""
    try:
        return CohortQuery.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PatientSearchError(f"{source}: {where}: {first['msg']}") from None


def _invalid(spec: str, what: str, exc: ValidationError | str) -> PatientSearchError:
    detail = exc if isinstance(exc, str) else exc.errors()[0]["msg"].removeprefix("Value error, ")
    return PatientSearchError(f"{what} {spec!r}: {detail}")


_CODE_SPEC = re.compile(rf"^(?P<name>{_NAME})=(?P<codes>[^<>=!]+?)\s*(?:(?P<op><=|>=|==|!=|<|>)\s*(?P<num>\S+))?$")


def parse_code_term(spec: str) -> CodeTerm:
    """``NAME=CODE[,CODE...][OP NUMBER]``, e.g. ``lung=ICD10CM//C34*`` or ``anemia=LOINC//718-7<10``."""
    match = _CODE_SPEC.match(spec.strip())
    if not match:
        raise _invalid(spec, "--code", "expected NAME=CODE[,CODE...][<|<=|>|>=|==|!= NUMBER]")
    value = None
    if match["op"]:
        try:
            value = ValueTest(op=match["op"], number=float(match["num"]))
        except ValueError:
            raise _invalid(spec, "--code", f"{match['num']!r} is not a number") from None
    try:
        return CodeTerm(name=match["name"], codes=[c.strip() for c in match["codes"].split(",") if c.strip()],
                        value=value)
    except ValidationError as exc:
        raise _invalid(spec, "--code", exc) from None


_TEXT_SPEC = re.compile(rf"^(?P<name>{_NAME})(?:@(?P<codes>[^=]+))?=(?P<pattern>.+)$", re.S)


def parse_text_term(spec: str) -> TextTerm:
    """``NAME[@CODE,...]=REGEX``, e.g. ``egfr@NOTE//PATHOLOGY=EGFR: (?!no )[^.]*detected``."""
    match = _TEXT_SPEC.match(spec)
    if not match:
        raise _invalid(spec, "--text", "expected NAME[@CODE,...]=REGEX")
    codes = [c.strip() for c in (match["codes"] or "").split(",") if c.strip()]
    try:
        return TextTerm(name=match["name"], pattern=match["pattern"], codes=codes)
    except ValidationError as exc:
        raise _invalid(spec, "--text", exc) from None


def parse_order(spec: str) -> Order:
    """``FIRST:THEN[:DAYS]``: evidence of FIRST before evidence of THEN (within DAYS days)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise _invalid(spec, "--before", "expected FIRST:THEN[:DAYS]")
    try:
        days = float(parts[2]) if len(parts) == 3 else None
        return Order(first=parts[0], then=parts[1], within_days=days)
    except ValueError as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else f"{parts[2]!r} is not a number"
        raise _invalid(spec, "--before", detail) from None


def make_query(terms: list[CodeTerm | TextTerm], order: list[Order] | None = None) -> CohortQuery:
    """`CohortQuery` from parsed terms (PatientSearchError, not a pydantic traceback, when they do not fit together)."""
    try:
        return CohortQuery(terms=terms, order=order or [])
    except ValidationError as exc:
        raise PatientSearchError(f"query: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
