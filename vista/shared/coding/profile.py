"""`CodingProfile`: the one place that knows how a dataset spells codes, and turns them into the project's spelling.

A profile is a small TOML file (built-ins in ``vista/shared/coding/profiles/``): vocabulary aliases, regular-expression
rules for prefixed forms (MIMIC-IV's ``DIAGNOSIS//ICD//10//C3411``), exact code overrides, which extension columns
hold a row's visit id, unit and source table, and how that table's values map to categories. Everything not covered
by a rule goes through the common path: split at the first ``//`` (or ``/``), map the head through the aliases,
write the value the way its vocabulary does (ICD codes dotted, sex as F/M, notes by kind).

>>> omop = load_profile("omop")
>>> omop.canonical("ICD10CM/C34.1").code, omop.canonical("Gender/F").code, omop.canonical("Visit/IP").category
('ICD10CM//C34.1', 'GENDER//F', <Category.VISIT: 'visit'>)
>>> mimic = load_profile("mimic_iv")
>>> c = mimic.canonical("LAB//50912//mg/dL")
>>> c.code, c.unit, c.category
('LAB//50912', 'mg/dL', <Category.LAB: 'lab'>)
>>> mimic.canonical("DIAGNOSIS//ICD//10//C3411").code, mimic.canonical("DIAGNOSIS//ICD//9//1625").code
('ICD10CM//C34.11', 'ICD9CM//162.5')
>>> load_profile("meds_synth").canonical("ICD10CM//C34.90").code  # our own spelling is already canonical
'ICD10CM//C34.90'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vista.shared.coding.errors import CodingProfileError
from vista.shared.coding.model import Canonical, Category
from vista.shared.coding.terminology import COMMON_CATEGORIES, COMMON_TABLES, LOINC_NOTE_KINDS, is_imaging
from vista.shared.coding.vocabularies import VOCABULARY_CATEGORY, alias_key, canonical_vocabulary, normalise_value, note_kind
from vista.shared.meds import schema
from vista.shared.records import Event
from vista.shared.regex_field import PythonRegex
from vista.shared.tomlmodel import parse_toml_model

BUILTIN_PACKAGE = "vista.shared.coding.profiles"
_BARE: Mapping[str, Category] = {schema.BIRTH_CODE: Category.BIRTH, schema.DEATH_CODE: Category.DEATH}


class PatternRule(BaseModel):
    """A regular expression over the whole source code; named groups ``value`` (required) and ``unit`` (optional).

    The canonical code is ``vocabulary//value`` (value normalised as that vocabulary writes it); ``category``
    overrides the vocabulary's category (e.g. SNOMED codes that are procedures).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    match: PythonRegex = Field(description="regex matched against the whole source code (re.fullmatch)")
    vocabulary: str = Field(min_length=1, description="canonical vocabulary of the matched codes, e.g. 'ICD10CM'")
    category: Category | None = Field(None, description="category of the matched codes (default: the vocabulary's)")
    value: str | None = Field(None, description="fixed value instead of the 'value' group (e.g. 'ED')")

    @model_validator(mode="after")
    def _has_value(self) -> PatternRule:
        if self.value is None and "value" not in re.compile(self.match).groupindex:
            raise ValueError(f"rule {self.match!r}: needs a named group (?P<value>…) or a fixed 'value'")
        return self

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.match)


CategoryName = Annotated[Category, Field(description="a category: " + ", ".join(c.value for c in Category))]


class CodingProfile(BaseModel):
    """How one family of datasets spells codes (see the module docstring); load with `load_profile`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="profile name, e.g. 'omop'")
    description: str = Field("", description="one line: which datasets write this spelling")
    aliases: dict[str, str] = Field(default_factory=dict,
                                    description="extra vocabulary spellings → canonical vocabulary (e.g. SCT = 'SNOMED')")
    patterns: tuple[PatternRule, ...] = Field((), description="rules tried in order before the common path")
    codes: dict[str, str] = Field(default_factory=dict, description="exact source code → canonical code")
    categories: dict[str, CategoryName] = Field(default_factory=dict,
                                                description="exact canonical code → category (e.g. vital-sign LOINCs)")
    visit_id_columns: tuple[str, ...] = Field(("visit_id",), description="extension columns holding a row's visit id")
    unit_columns: tuple[str, ...] = Field(("unit",), description="extension columns holding a row's unit")
    table_columns: tuple[str, ...] = Field(("table",), description="extension columns naming the row's source table")
    tables: dict[str, CategoryName] = Field(default_factory=dict,
                                            description="source table value → category (e.g. procedure_occurrence = 'procedure')")
    latest_time: datetime | None = Field(None, description="latest plausible event time when the dataset shifts dates "
                                         "into the future to de-identify them (MIMIC-IV: 2110–2210); None: now")
    signature_columns: tuple[str, ...] = Field((), description="extension columns typical of this spelling (detection)")
    signature_patterns: tuple[PythonRegex, ...] = Field((), description="regexes typical of this spelling's codes "
                                                        "(detection)")

    @field_validator("aliases")
    @classmethod
    def _known_targets(cls, aliases: dict[str, str]) -> dict[str, str]:
        return {alias_key(k): v for k, v in aliases.items()}

    @cached_property
    def _signatures(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p) for p in self.signature_patterns)

    @cached_property
    def _cache(self) -> dict[str, Canonical]:
        return {}

    @cached_property
    def _table_cache(self) -> dict[str, Category | None]:
        return {}

    @cached_property
    def _table_keys(self) -> dict[str, Category]:
        return {alias_key(k): v for k, v in {**COMMON_TABLES, **self.tables}.items()}

    # ------------------------------------------------------------------------------------------------- codes
    def canonical(self, code: str) -> Canonical:
        """The canonical form of one source code (cached: each distinct code is parsed once)."""
        found = self._cache.get(code)
        if found is None:
            found = self._cache[code] = self._parse(code)
        return found

    def canonical_code(self, code: str) -> str:
        return self.canonical(code).code

    def respellings(self, codes: Iterable[str | None]) -> dict[str, str]:
        """Source code → canonical code for the distinct ``codes`` whose spelling changes (empty: already canonical).

        >>> load_profile("mimic_iv").respellings(["DIAGNOSIS//ICD//10//C3411", "GENDER//F", None])
        {'DIAGNOSIS//ICD//10//C3411': 'ICD10CM//C34.11'}
        """
        found = {code: self.canonical_code(code) for code in codes if code is not None}
        return {code: canonical for code, canonical in found.items() if canonical != code}

    def _parse(self, code: str) -> Canonical:
        override = self.codes.get(code)
        if override is not None and override != code:
            return replace(self.canonical(override), code=override)
        if code in _BARE:
            return Canonical(code, code, "", _BARE[code])
        for rule in self.patterns:
            m = rule.regex.fullmatch(code)
            if m is None:
                continue
            groups = m.groupdict()
            value = rule.value if rule.value is not None else (groups.get("value") or "")
            return self._make(rule.vocabulary, value, rule.category, unit=groups.get("unit"))
        head, value = _split(code)
        vocabulary = canonical_vocabulary(head, self.aliases) if value is not None else None
        if vocabulary is None:
            return Canonical(code, head, value or "", self.categories.get(code, Category.OTHER))
        return self._make(vocabulary, value or "", None)

    def _make(self, vocabulary: str, value: str, category: Category | None, *, unit: str | None = None) -> Canonical:
        value = normalise_value(vocabulary, value)
        code = f"{vocabulary}{schema.SEP}{value}" if value else vocabulary
        found = (category or self.categories.get(code) or COMMON_CATEGORIES.get(code)
                 or (Category.IMAGING if is_imaging(vocabulary, value) else None)
                 or VOCABULARY_CATEGORY.get(vocabulary, Category.OTHER))
        kind = value if vocabulary == schema.NOTE_PREFIX else None
        return Canonical(code, vocabulary, value, found, unit=unit or None, note_kind=kind)

    def table_category(self, table: str | None) -> Category | None:
        """The category a source-table value names (``procedure_occurrence`` → procedure), or None."""
        if not table:
            return None
        cache = self._table_cache
        if table not in cache:
            cache[table] = self._table_keys.get(alias_key(table))
        return cache[table]

    def category_of(self, code: str, table: str | None = None) -> Category:
        """The category of a source code, refined by its row's source table when that is more specific."""
        found = self.canonical(code).category
        from_table = self.table_category(table)
        if from_table is Category.NOTE or (from_table is Category.IMAGING and found is Category.PROCEDURE):
            return from_table  # a row of the note (imaging) table is a note (an imaging study) whatever its code
        if from_table is not None and found in (Category.DIAGNOSIS, Category.OTHER, Category.OBSERVATION):
            return from_table
        return found

    def in_table(self, code: str, table: str | None) -> Canonical:
        """The canonical form of a code read from a row whose source table is ``table``.

        Only notes change: a note row's code is its note class (OMOP writes ``LOINC/11526-1``), so it becomes
        ``NOTE//<kind>`` (``NOTE//PATHOLOGY``) and every layer treats it as the note it is.
        """
        found = self.canonical(code)
        if found.category is Category.NOTE or self.table_category(table) is not Category.NOTE:
            return found
        kind = LOINC_NOTE_KINDS.get(found.value) if found.vocabulary == schema.LOINC else None
        kind = kind or note_kind(found.value or found.code)
        return Canonical(f"{schema.NOTE_PREFIX}{schema.SEP}{kind}", schema.NOTE_PREFIX, kind, Category.NOTE,
                         note_kind=kind)

    def normalise_event(self, event: Event) -> Event:
        """The event with its code in canonical spelling (``source_code`` keeps the original) and any embedded unit."""
        c = self.canonical(event.code)
        if c.code == event.code and (c.unit is None or event.unit):
            return event
        return replace(event, code=c.code, source_code=event.source_code or event.code,
                       unit=event.unit or c.unit)

    def signature_score(self, codes: Iterable[str], columns: Iterable[str]) -> float:
        """Share of this profile's signature columns and patterns found in a sample (0–1; 0 when it declares none)."""
        wanted = len(self.signature_columns) + len(self._signatures)
        if not wanted:
            return 0.0
        present = set(columns)
        hits = sum(1 for c in self.signature_columns if c in present)
        sample = list(codes)
        hits += sum(1 for rx in self._signatures if any(rx.search(c) for c in sample))
        return hits / wanted

    def first_column(self, candidates: tuple[str, ...], columns: Iterable[str]) -> str | None:
        present = set(columns)
        return next((c for c in candidates if c in present), None)


def _split(code: str) -> tuple[str, str | None]:
    """``("ICD10CM", "C34.1")`` for ``ICD10CM//C34.1`` or ``ICD10CM/C34.1``; ``(code, None)`` with no separator."""
    head, sep, tail = code.partition(schema.SEP)
    if sep:
        return head, tail
    head, sep, tail = code.partition("/")
    return (head, tail) if sep else (code, None)


# ----------------------------------------------------------------------------------------------------- loading
def builtin_profiles() -> list[str]:
    """Names of the profiles shipped in ``vista/shared/coding/profiles``."""
    folder = resources.files(BUILTIN_PACKAGE)
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


_LOADED: dict[str, CodingProfile] = {}


def load_profile(name_or_path: str | Path | CodingProfile) -> CodingProfile:
    """A built-in profile by name ('omop', 'mimic_iv'…) or a TOML file by path (`CodingProfileError` if wrong)."""
    if isinstance(name_or_path, CodingProfile):
        return name_or_path
    text = str(name_or_path)
    is_path = isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text
    if not is_path:
        if text not in _LOADED:
            if text not in builtin_profiles():
                raise CodingProfileError(f"unknown coding profile {text!r}; built-ins: {', '.join(builtin_profiles())}"
                                         " (or pass the path of a profile TOML file)")
            raw = resources.files(BUILTIN_PACKAGE).joinpath(f"{text}.toml").read_text(encoding="utf-8")
            _LOADED[text] = _parse(raw, f"built-in profile {text!r}")
        return _LOADED[text]
    path = Path(text)
    if not path.is_file():
        raise CodingProfileError(f"{path}: coding profile file not found")
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CodingProfileError(f"{path}: cannot read ({exc})") from None
    return _parse(raw, str(path))


def _parse(text: str, source: str) -> CodingProfile:
    return parse_toml_model(text, source, CodingProfile, CodingProfileError)
