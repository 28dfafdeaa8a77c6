"""Which canonical codes belong to which target cancer: a definition's code sets, with SNOMED CT concepts expanded
through the dataset's own hierarchy, applied as one polars expression.

Codes are compared in the canonical spelling a `vista.shared.coding.CodingProfile` gives them (``ICD10CM//C34.11``,
``ICD9CM//162.5``, ``SNOMED//254637007``), so one definition serves every dataset:

- ICD-10-CM / ICD-9-CM prefixes match with dots ignored (``C34.1`` matches ``ICD10CM//C34.11``);
- SNOMED CT concept ids match exactly, plus — when ``metadata/codes.parquet`` has ``parent_codes`` — every code
  whose chain of parents (canonicalised by the same profile) reaches one of them, minus everything at or below a
  concept of ``snomed_exclude``. No terminology ships with the project: descendants come only from the dataset;
- ``patterns`` match the whole canonical code.

>>> from trajonco.cohorts.definition import load_definition
>>> tree = CodeHierarchy.from_parents({"SNOMED//723301009": ["SNOMED//254637007"],
...                                    "SNOMED//94391008": ["SNOMED//363358000", "SNOMED//128462008"]})
>>> sets = CodeSets.build(load_definition("lung"), tree)
>>> frame = pl.DataFrame({"code": ["ICD10CM//C34.11", "ICD9CM//162.3", "SNOMED//723301009", "SNOMED//94391008",
...                                "SNOMED//162573006", "LOINC//C34"]})
>>> frame.select(sets.cancer_expr())["cancer"].to_list()
['lung', 'lung', 'lung', None, None, None]
>>> sets.rule("lung", "SNOMED//723301009"), sets.rule("lung", "ICD10CM//C34.11")
(('SNOMED', '254637007', 'below it in codes.parquet'), ('ICD10CM', 'C34', 'prefix'))
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from trajonco.cohorts.definition import CancerCodes, CohortDefinition, normalize_prefix
from trajonco.cohorts.errors import CohortDataError
from vista.shared.coding import CodingProfile
from vista.shared.meds import schema
from vista.shared.meds.errors import MedsMetadataError
from vista.shared.meds.metadata import read_code_catalog

SEP = schema.SEP
ICD10CM, ICD9CM, SNOMED = schema.ICD10CM, schema.ICD9CM, schema.SNOMED
PATTERN_VOCABULARY = "patterns"
"""How the explanation names the free patterns' 'vocabulary' (they may match any)."""


def vocabulary_of(code: str) -> str:
    """The vocabulary part of a canonical code (``SNOMED//254637007`` → ``SNOMED``; a bare code is its own)."""
    return code.split(SEP, 1)[0]


def vocabulary_expr(column: str = schema.CODE) -> pl.Expr:
    """`vocabulary_of` as a polars expression."""
    return pl.col(column).str.split(SEP).list.first()


@dataclass(frozen=True)
class CodeHierarchy:
    """Parent → children links between canonical codes (from ``parent_codes`` of ``metadata/codes.parquet``)."""

    children: Mapping[str, frozenset[str]] = field(default_factory=dict)
    codes_with_parents: int = 0

    @classmethod
    def from_parents(cls, parents: Mapping[str, Iterable[str]]) -> CodeHierarchy:
        """From child → parents (both canonical)."""
        children: dict[str, set[str]] = defaultdict(set)
        with_parents = 0
        for child, ps in parents.items():
            ps = [p for p in ps if p and p != child]
            with_parents += bool(ps)
            for parent in ps:
                children[parent].add(child)
        return cls({k: frozenset(v) for k, v in children.items()}, with_parents)

    def below(self, roots: Iterable[str]) -> set[str]:
        """Every code strictly below any of ``roots`` (cycles in bad metadata are walked once)."""
        start = list(roots)
        seen: set[str] = set()
        queue = deque(start)
        while queue:
            for child in self.children.get(queue.popleft(), ()):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        return seen


def read_hierarchy(dataset_root: Path, profile: CodingProfile) -> CodeHierarchy:
    """The hierarchy of ``metadata/codes.parquet`` in canonical spelling (empty without the file or its parents)."""
    try:
        catalog = read_code_catalog(dataset_root)
    except MedsMetadataError as exc:
        raise CohortDataError(f"{dataset_root}: {exc}") from None
    if catalog is None:
        return CodeHierarchy()
    parents: dict[str, list[str]] = defaultdict(list)
    for code in catalog:
        info = catalog[code]
        if info.parent_codes:
            parents[profile.canonical_code(code)].extend(profile.canonical_code(p) for p in info.parent_codes)
    return CodeHierarchy.from_parents(parents)


@dataclass(frozen=True)
class CancerCodeSet:
    """One cancer's code sets, ready to match canonical codes."""

    name: str
    icd10_prefixes: tuple[str, ...]
    icd9_prefixes: tuple[str, ...]
    snomed_exact: frozenset[str]
    snomed_below: Mapping[str, str]
    """canonical code found below a listed concept → that concept's id (exclusions already removed)"""
    patterns: tuple[str, ...]

    @classmethod
    def of(cls, cancer: CancerCodes, hierarchy: CodeHierarchy) -> CancerCodeSet:
        exact = frozenset(f"{SNOMED}{SEP}{c}" for c in cancer.snomed_codes)
        excluded_roots = [f"{SNOMED}{SEP}{c}" for c in cancer.snomed_exclude]
        excluded = hierarchy.below(excluded_roots) | set(excluded_roots)
        below: dict[str, str] = {}
        for concept in cancer.snomed_codes:
            for code in sorted(hierarchy.below([f"{SNOMED}{SEP}{concept}"])):
                if code not in exact and code not in excluded:
                    below.setdefault(code, concept)
        return cls(
            name=cancer.name,
            icd10_prefixes=cancer.icd10cm_prefixes,
            icd9_prefixes=cancer.icd9cm_prefixes,
            snomed_exact=exact,
            snomed_below=below,
            patterns=cancer.patterns,
        )

    @property
    def _leads(self) -> tuple[tuple[str, str, str], ...]:
        """(vocabulary, canonical lead without dots, prefix as written) of every ICD prefix."""
        return tuple((vocab, f"{vocab}{SEP}{normalize_prefix(p)}", p)
                     for vocab, prefixes in ((ICD10CM, self.icd10_prefixes), (ICD9CM, self.icd9_prefixes))
                     for p in prefixes)

    def explicit_expr(self, column: str = schema.CODE) -> pl.Expr:
        """True where the code is named by the definition itself: an ICD prefix or an exact SNOMED CT id."""
        code = pl.col(column)
        undotted = code.str.replace_all(".", "", literal=True)
        parts = [undotted.str.starts_with(lead) for _, lead, _ in self._leads]
        if self.snomed_exact:
            parts.append(code.is_in(sorted(self.snomed_exact)))
        return pl.any_horizontal(parts) if parts else pl.lit(False)

    def implicit_expr(self, column: str = schema.CODE) -> pl.Expr:
        """True where the code is reached indirectly: below a listed concept in codes.parquet, or by a pattern."""
        code = pl.col(column)
        parts = [code.is_in(sorted(self.snomed_below))] if self.snomed_below else []
        parts += [code.str.contains(f"^(?:{p})$") for p in self.patterns]
        return pl.any_horizontal(parts) if parts else pl.lit(False)

    def expr(self, column: str = schema.CODE) -> pl.Expr:
        """True where the canonical code in ``column`` belongs to this cancer."""
        return self.explicit_expr(column) | self.implicit_expr(column)

    def rule(self, code: str) -> tuple[str, str, str] | None:
        """(vocabulary, definition entry, how) that makes ``code`` one of this cancer's, or None."""
        undotted = code.replace(".", "")
        for vocabulary, lead, prefix in self._leads:
            if undotted.startswith(lead):
                return vocabulary, prefix, "prefix"
        if code in self.snomed_exact:
            return SNOMED, code.split(SEP, 1)[1], "exact id"
        if code in self.snomed_below:
            return SNOMED, self.snomed_below[code], "below it in codes.parquet"
        for pattern in self.patterns:
            if pl.Series([code]).str.contains(f"^(?:{pattern})$")[0]:
                return PATTERN_VOCABULARY, pattern, "pattern"
        return None


@dataclass(frozen=True)
class CodeOverlap:
    """A code of the data that two or more target cancers claim (through descendants or patterns)."""

    code: str
    cancers: tuple[str, ...]
    counted_as: str


@dataclass(frozen=True)
class CodeSets:
    """Every target cancer's code sets, in the definition's order.

    A code claimed by several cancers goes to the one that names it explicitly (ICD prefix, exact SNOMED CT id — two
    cancers never share those, the definition checks that), else to the first in the definition's order; `overlaps`
    lists such codes for the manifest.
    """

    cancers: tuple[CancerCodeSet, ...]
    hierarchy_codes: int = 0
    """codes with parents in the dataset's codes.parquet (0: SNOMED concepts match exactly only)"""

    @classmethod
    def build(cls, definition: CohortDefinition, hierarchy: CodeHierarchy | None = None) -> CodeSets:
        tree = hierarchy or CodeHierarchy()
        return cls(tuple(CancerCodeSet.of(c, tree) for c in definition.cancers), tree.codes_with_parents)

    def cancer_expr(self, column: str = schema.CODE) -> pl.Expr:
        """The target cancer of the canonical code in ``column`` (null when it belongs to none), as ``cancer``."""
        rules = [(c.name, c.explicit_expr(column)) for c in self.cancers]
        rules += [(c.name, c.implicit_expr(column)) for c in self.cancers if c.snomed_below or c.patterns]
        chain = pl.when(rules[0][1]).then(pl.lit(rules[0][0]))
        for name, matches in rules[1:]:
            chain = chain.when(matches).then(pl.lit(name))
        return chain.otherwise(pl.lit(None, dtype=pl.String)).alias("cancer")

    def rule(self, cancer: str, code: str) -> tuple[str, str, str]:
        """(vocabulary, definition entry, how) by which ``code`` belongs to ``cancer``."""
        found = next(c for c in self.cancers if c.name == cancer).rule(code)
        if found is None:  # the expression and this rule disagree: a bug, not bad input
            raise AssertionError(f"{code!r} matched {cancer!r} by no rule")
        return found

    def overlaps(self, codes: pl.Series) -> list[CodeOverlap]:
        """The codes among ``codes`` (canonical, e.g. the data's distinct codes) that several cancers claim."""
        if len(self.cancers) < 2 or codes.is_empty():
            return []
        frame = pl.DataFrame({schema.CODE: codes.unique()})
        flags = frame.with_columns(*[c.expr().alias(f"_{i}") for i, c in enumerate(self.cancers)], self.cancer_expr())
        n = pl.sum_horizontal([pl.col(f"_{i}").cast(pl.Int32) for i in range(len(self.cancers))])
        found = []
        for row in flags.filter(n > 1).sort(schema.CODE).iter_rows(named=True):
            owners = tuple(c.name for i, c in enumerate(self.cancers) if row[f"_{i}"])
            found.append(CodeOverlap(row[schema.CODE], owners, row["cancer"]))
        return found
