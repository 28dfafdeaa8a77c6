"""Run a `CohortQuery` over a store: code terms with polars over the node index (no graph is opened), text terms
only on the graphs of the patients every code term already holds for, then the time orders.

Each term yields evidence rows (``term, subject_id, node_id, code, time``); a patient matches when every term has
evidence and every `Order` has a pair of evidence rows in that order (each order is checked on its own: ``a:b`` and
``b:c`` may be met by different evidence of ``b``). The result keeps, per patient and term, the
evidence shown (for ordered terms the earliest pair that satisfies the order; otherwise the earliest row) and how
many rows matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from vista.patient_search.features import SOURCE_TYPES
from vista.patient_search.query import CodeTerm, CohortQuery, Order, TextTerm, ValueTest
from vista.patient_search.source import CohortSource

EVIDENCE_SCHEMA = {"term": pl.String, "subject_id": pl.Int64, "node_id": pl.String, "code": pl.String,
                   "time": pl.Datetime("us")}


@dataclass(frozen=True, slots=True)
class Evidence:
    """The node shown for one term of one matching patient, and how many nodes matched the term."""

    term: str
    node_id: str
    code: str | None
    time: datetime | None
    matches: int


@dataclass(frozen=True, slots=True)
class SubjectMatch:
    subject_id: int
    evidence: tuple[Evidence, ...]  # in the query's term order


@dataclass(frozen=True, slots=True)
class QueryResult:
    query: CohortQuery
    patients: int  # patients in the store
    text_checked: int  # patients whose graphs were opened for text terms
    matches: tuple[SubjectMatch, ...]

    def subject_ids(self) -> list[int]:
        return [m.subject_id for m in self.matches]


def code_filter(codes: list[str]) -> pl.Expr:
    """True for a ``code`` equal to one of ``codes`` or starting with a prefix written ``PREFIX*``."""
    exact = [c for c in codes if not c.endswith("*")]
    expr = pl.col("code").is_in(exact) if exact else pl.lit(False)
    for prefix in (c[:-1] for c in codes if c.endswith("*")):
        expr = expr | pl.col("code").str.starts_with(prefix)
    return expr


def value_filter(test: ValueTest) -> pl.Expr:
    value = pl.col("value")
    return {"<": value < test.number, "<=": value <= test.number, ">": value > test.number,
            ">=": value >= test.number, "==": value == test.number, "!=": value != test.number}[test.op]


def code_evidence(index: pl.LazyFrame, term: CodeTerm) -> pl.LazyFrame:
    """Evidence rows of a code term: source events with a matching code (and value)."""
    found = index.filter(pl.col("type").is_in(SOURCE_TYPES) & code_filter(term.codes))
    if term.value is not None:
        found = found.filter(value_filter(term.value))
    return found.select(pl.lit(term.name).alias("term"), "subject_id", "node_id", "code", "time")


def _code_test(codes: list[str]):
    """A Python predicate equal to `code_filter` (any code when ``codes`` is empty)."""
    exact = {c for c in codes if not c.endswith("*")}
    prefixes = tuple(c[:-1] for c in codes if c.endswith("*"))
    if not codes:
        return lambda code: True
    return lambda code: code is not None and (code in exact or code.startswith(prefixes))


def text_evidence(source: CohortSource, subject_ids: list[int], terms: list[TextTerm]) -> pl.DataFrame:
    """Evidence rows of the text terms, reading the graphs of ``subject_ids`` only."""
    tests = [(t.name, re.compile(t.pattern, re.IGNORECASE), _code_test(t.codes)) for t in terms]
    rows: dict[str, list] = {name: [] for name in EVIDENCE_SCHEMA}
    for sid in subject_ids:
        for item in source.texts(sid):
            for name, pattern, wanted in tests:
                if wanted(item.code) and pattern.search(item.text):
                    for column, value in zip(EVIDENCE_SCHEMA, (name, sid, item.node_id, item.code, item.time)):
                        rows[column].append(value)
    return pl.DataFrame(rows, schema=EVIDENCE_SCHEMA)


def _ordered(evidence: pl.DataFrame, order: Order) -> pl.DataFrame:
    """Per subject, the earliest (first, then) evidence pair in that order: subject_id, first_*, then_* columns."""
    def side(term: str, prefix: str) -> pl.DataFrame:
        chosen = evidence.filter(pl.col("term") == term).drop("term")
        return chosen.rename(lambda c: c if c == "subject_id" else f"{prefix}_{c}")

    first, then = side(order.first, "first"), side(order.then, "then")
    pairs = first.join(then, on="subject_id").filter(pl.col("first_time") < pl.col("then_time"))
    if order.within_days is not None:
        pairs = pairs.filter(pl.col("then_time") - pl.col("first_time") <= pl.duration(days=order.within_days))
    return pairs.sort("subject_id", "first_time", "then_time", "first_node_id", "then_node_id").group_by(
        "subject_id", maintain_order=True).first()


def run_query(source: CohortSource, query: CohortQuery) -> QueryResult:
    """The patients of ``source`` matching ``query``, with their evidence, by subject id."""
    subjects = source.subject_ids()
    index = source.scan_index()
    code_terms = [t for t in query.terms if isinstance(t, CodeTerm)]
    text_terms = [t for t in query.terms if isinstance(t, TextTerm)]
    parts = [code_evidence(index, t) for t in code_terms]
    evidence = (pl.concat(parts).collect() if parts else pl.DataFrame(schema=EVIDENCE_SCHEMA)).cast(EVIDENCE_SCHEMA)
    candidates = set(subjects)
    for term in code_terms:
        candidates &= set(evidence.filter(pl.col("term") == term.name)["subject_id"].to_list())
    checked = 0
    if text_terms:
        todo = sorted(candidates)
        checked = len(todo)
        found = text_evidence(source, todo, text_terms)
        evidence = pl.concat([evidence, found])
        for term in text_terms:
            candidates &= set(found.filter(pl.col("term") == term.name)["subject_id"].to_list())
    chosen: dict[tuple[int, str], tuple[str, str | None, datetime | None]] = {}
    for order in query.order:
        pairs = _ordered(evidence.filter(pl.col("subject_id").is_in(sorted(candidates))), order)
        candidates &= set(pairs["subject_id"].to_list())
        for row in pairs.iter_rows(named=True):
            for side in ("first", "then"):
                chosen.setdefault((row["subject_id"], getattr(order, side)),
                                  (row[f"{side}_node_id"], row[f"{side}_code"], row[f"{side}_time"]))
    kept = evidence.filter(pl.col("subject_id").is_in(sorted(candidates)))
    counts = {(s, t): n for s, t, n in kept.group_by("subject_id", "term").len().iter_rows()}
    earliest = {(r["subject_id"], r["term"]): (r["node_id"], r["code"], r["time"]) for r in
                kept.sort("subject_id", "term", "time", "node_id", nulls_last=True).group_by(
                    "subject_id", "term", maintain_order=True).first().iter_rows(named=True)}
    matches = []
    for sid in sorted(candidates):
        items = []
        for term in query.terms:
            node_id, code, time = chosen.get((sid, term.name)) or earliest[(sid, term.name)]
            items.append(Evidence(term.name, node_id, code, time, counts[(sid, term.name)]))
        matches.append(SubjectMatch(sid, tuple(items)))
    return QueryResult(query, len(subjects), checked, tuple(matches))
