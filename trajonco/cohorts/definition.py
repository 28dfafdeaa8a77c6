"""Declarative case–control cohort definitions: one pydantic model, loaded from small TOML files.

A built-in definition exists for each of the 15 cancers and for ``any_cancer`` (``definitions/*.toml``). A cancer
lists code sets per vocabulary, all matched against the *canonical* codes the dataset's coding profile produces
(`vista.shared.coding`), so ``DIAGNOSIS//ICD//10//C3411`` (MIMIC-IV), ``ICD10CM/C34.1`` (OMOP) and ``ICD10CM//C34.11``
(ours) are one code:

- ``icd10cm_prefixes`` / ``icd9cm_prefixes``: ICD-10-CM / ICD-9-CM code prefixes (dots ignored);
- ``snomed_codes``: SNOMED CT concept ids, matched exactly and, when the dataset ships ``metadata/codes.parquet``
  with ``parent_codes``, together with every code below them in that hierarchy; ``snomed_exclude``: concepts whose
  descendants never count (e.g. 128462008 |Secondary malignant neoplastic disease|);
- ``patterns``: regular expressions matched against the whole canonical code (``LOCAL//ONC-LUNG-.*``), for any
  other vocabulary.

A TOML file may use three shorthands that the loader expands before validation:

- the code-set keys above and ``sex`` at the top level define one cancer named like the cohort;
- ``include = ["lung", "breast", ...]`` takes the cancers of other definitions (the any-cancer composite);
- ``extends = "lung"`` starts from another definition and overrides only the keys given (a new gap, a new seed...).

Names resolve to built-ins; anything ending in ``.toml`` or containing a path separator is a file, and relative
``include``/``extends`` paths resolve against the including file's folder.

>>> d = load_definition("lung")
>>> d.name, d.cancers[0].icd10cm_prefixes, d.gap_days, d.washout_days, d.exclude_prior_target_codes
('lung', ('C34',), 365, 180, True)
>>> "254637007" in d.cancers[0].snomed_codes
True
>>> d.with_overrides(gap_days=730).gap_days
730
>>> len(load_definition("any_cancer").cancers)
15
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import polars as pl
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from trajonco.cohorts.errors import CohortDefinitionError

Sex = Literal["F", "M"]
MatchingKey = Literal["sex", "age_band"]
Prefix = Annotated[str, Field(pattern=r"^[A-Z0-9][A-Z0-9.]*$", description="code prefix, e.g. 'C34' or '162.2'")]
SnomedId = Annotated[
    str,
    BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v),
    Field(pattern=r"^[1-9][0-9]{5,17}$", description="SNOMED CT concept id (digits only), e.g. '254637007'"),
]
CODE_SET_KEYS = ("icd10cm_prefixes", "icd9cm_prefixes", "snomed_codes", "snomed_exclude", "patterns")
"""The keys of a cancer's code sets (also accepted at the top level of a single-cancer TOML)."""

BUILTIN_PACKAGE = "trajonco.cohorts.definitions"


def normalize_prefix(prefix: str) -> str:
    """Diagnosis codes are compared without dots, so 'C34.1' matches both 'C34.11' and 'C3411'.

    >>> normalize_prefix("162.2")
    '1622'
    """
    return prefix.replace(".", "").upper()


def _valid_regex(pattern: str) -> str:
    """The pattern if polars (Rust regex, the engine that applies it) compiles it; a one-line error otherwise."""
    try:
        pl.Series([""], dtype=pl.String).str.contains(pattern)
    except pl.exceptions.PolarsError as exc:
        detail = str(exc).split("\n\nThis error occurred")[0].replace("\n", " ")
        problem = " ".join(detail.split())
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression ({problem})") from None
    if re.fullmatch(r"[\^$.*]*", pattern):
        raise ValueError(f"pattern {pattern!r} matches every code")
    return pattern


class CancerCodes(BaseModel):
    """The codes that identify one cancer: a code set per vocabulary, matched against canonical codes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        min_length=1, description="cancer name recorded in the `cancer` column of the labels, e.g. 'lung'"
    )
    icd10cm_prefixes: tuple[Prefix, ...] = Field(
        default=(), description="ICD-10-CM prefixes; a code matches when its value (dots ignored) starts with one"
    )
    icd9cm_prefixes: tuple[Prefix, ...] = Field(
        default=(), description="ICD-9-CM prefixes, matched the same way (for data coded before October 2015)"
    )
    snomed_codes: tuple[SnomedId, ...] = Field(
        default=(),
        description="SNOMED CT concept ids: matched exactly, plus their descendants when the dataset's"
        " metadata/codes.parquet has parent_codes",
    )
    snomed_exclude: tuple[SnomedId, ...] = Field(
        default=(),
        description="SNOMED CT concepts whose descendants never count, even below a listed concept (e.g. secondary"
        " malignant neoplasms under 'malignant tumor of lung')",
    )
    patterns: tuple[str, ...] = Field(
        default=(),
        description="regular expressions matched against the whole canonical code, e.g. 'LOCAL//ONC-LUNG-.*'",
    )
    sex: Sex | None = Field(
        default=None, description="restrict cases (and hence matched controls) to this sex; None means both"
    )

    @field_validator("patterns")
    @classmethod
    def _patterns_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_valid_regex(p) for p in patterns)

    @model_validator(mode="after")
    def _has_codes(self) -> CancerCodes:
        if not (self.icd10cm_prefixes or self.icd9cm_prefixes or self.snomed_codes or self.patterns):
            raise ValueError(
                f"cancer {self.name!r} has no code set: give icd10cm_prefixes, icd9cm_prefixes, snomed_codes or"
                " patterns"
            )
        both = sorted(set(self.snomed_codes) & set(self.snomed_exclude))
        if both:
            raise ValueError(f"cancer {self.name!r}: SNOMED CT concept(s) {both} are both listed and excluded")
        return self

    @property
    def vocabularies(self) -> tuple[str, ...]:
        """The canonical vocabularies this cancer's code sets look in ('patterns' for free patterns)."""
        found = [v for v, codes in (("ICD10CM", self.icd10cm_prefixes), ("ICD9CM", self.icd9cm_prefixes),
                                    ("SNOMED", self.snomed_codes), ("patterns", self.patterns)) if codes]
        return tuple(found)


class CohortDefinition(BaseModel):
    """Everything that decides who is a case, who is a control, when each is predicted, and how many are drawn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="cohort name, e.g. 'lung' or 'any_cancer'")
    description: str = Field(default="", description="one line for people reading the manifest")
    cancers: tuple[CancerCodes, ...] = Field(
        min_length=1,
        description="target cancers; a composite (any-cancer) cohort lists several and the first qualifying one wins",
    )
    min_codes: int = Field(
        default=2, ge=1, description="diagnosis codes of the cancer, on distinct days, needed to call a case"
    )
    max_days_between_codes: int = Field(
        default=60, ge=0, description="the min_codes codes must fall within this many days of the first (60 ≈ 2 months)"
    )
    washout_days: int = Field(
        default=180,
        ge=0,
        description="cancer-free observed history required before the index (from the first visit or the previous"
        " target code); patients whose first target code comes earlier are prevalent and excluded",
    )
    exclude_prior_target_codes: bool = Field(
        default=True,
        description="exclude a case whose record holds a code of a target cancer before the prediction time (an"
        " isolated earlier code outside the washout): no control can carry one, so keeping it hands a model the"
        " answer; false keeps such cases (counted either way in the manifest)",
    )
    gap_days: int = Field(
        default=365,
        ge=0,
        le=1826,
        description="prediction time = index - gap; intended range 0.5–5 years, 0 only for leakage checks",
    )
    controls_per_case: int = Field(default=1, ge=1, description="matched controls drawn for each case (1 for 1:1)")
    matching_keys: tuple[MatchingKey, ...] = Field(
        default=("sex", "age_band"), description="attributes a control must share with its case, at the index dates"
    )
    age_band_years: int = Field(default=10, ge=1, description="width of the age bands used for matching (years)")
    min_visits: int = Field(
        default=2, ge=1, description="visits (distinct encounter dates) required strictly before the prediction time"
    )
    test_splits: tuple[str, ...] = Field(
        default=("held_out",), min_length=1, description="MEDS splits that feed the test cohort"
    )
    train_splits: tuple[str, ...] = Field(
        default=("train", "tuning"), description="MEDS splits that feed the training cohort (empty: no training cohort)"
    )
    test_target_cases: int | None = Field(
        default=500, ge=1, description="cases sampled for the test cohort (None: every eligible matched case)"
    )
    train_target_cases: int | None = Field(
        default=None, ge=1, description="cases sampled for the training cohort (None: every eligible matched case)"
    )
    seed: int = Field(default=0, ge=0, description="seed for sampling cases, controls and control index dates")

    @field_validator("matching_keys")
    @classmethod
    def _unique_keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(keys)) != len(keys):
            raise ValueError(f"matching keys repeat: {list(keys)}")
        return keys

    @model_validator(mode="after")
    def _consistent(self) -> CohortDefinition:
        names = [c.name for c in self.cancers]
        if len(set(names)) != len(names):
            raise ValueError(f"cancer names repeat: {names}")
        overlap = set(self.test_splits) & set(self.train_splits)
        if overlap:
            raise ValueError(f"splits {sorted(overlap)} feed both the test and the training cohort")
        for vocab in ("icd10cm_prefixes", "icd9cm_prefixes"):
            owners = [(normalize_prefix(p), c.name) for c in self.cancers for p in getattr(c, vocab)]
            for p1, c1 in owners:
                for p2, c2 in owners:
                    if c1 != c2 and p1.startswith(p2):
                        raise ValueError(f"{vocab}: prefix {p1!r} of {c1!r} is also covered by {p2!r} of {c2!r}")
        for vocab in ("snomed_codes", "patterns"):  # exact repeats; overlaps through the data are checked at build
            seen: dict[str, str] = {}
            for c in self.cancers:
                for code in getattr(c, vocab):
                    if seen.setdefault(code, c.name) != c.name:
                        raise ValueError(f"{vocab}: {code!r} is listed for both {seen[code]!r} and {c.name!r}")
        return self

    @property
    def allowed_sexes(self) -> frozenset[str] | None:
        """Sexes a case (and so a control) may have; None when some target cancer has no restriction."""
        if any(c.sex is None for c in self.cancers):
            return None
        return frozenset(c.sex for c in self.cancers if c.sex is not None)

    def with_overrides(self, **changes: Any) -> CohortDefinition:
        """A validated copy with some fields changed (pydantic's ``model_copy`` would skip validation)."""
        data = self.model_dump()
        data.update(changes)
        return _validate(data, f"definition {self.name!r} with overrides {sorted(changes)}")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> CohortDefinition:
        """Like pydantic's, but a copy with updates is validated (so ``gap_days=5000`` fails loudly)."""
        if update:
            return self.with_overrides(**update)
        return super().model_copy(deep=deep)

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the definition: two builds with the same digest used the same rules."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def builtin_names() -> list[str]:
    """Names of the definitions shipped in ``trajonco/cohorts/definitions``."""
    folder = resources.files(BUILTIN_PACKAGE)
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


BUILTIN_ALIASES = {"myeloma": "multiple_myeloma"}
"""Other spellings of built-in names (the synthetic generator's summary says ``myeloma``)."""


def load_definition(name_or_path: str | Path) -> CohortDefinition:
    """Load a built-in definition by name ('lung', 'any_cancer') or a TOML file by path."""
    raw, source = _load_raw(name_or_path, base=Path.cwd(), chain=())
    return _validate(raw, source)


def _validate(data: dict[str, Any], source: str) -> CohortDefinition:
    try:
        return CohortDefinition.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"field {'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()
        )
        raise CohortDefinitionError(f"{source}: {problems}") from None


def _is_path(ref: str | Path) -> bool:
    text = str(ref)
    return isinstance(ref, Path) or text.endswith(".toml") or "/" in text or "\\" in text


def _read_toml(ref: str | Path, base: Path) -> tuple[dict[str, Any], str, Path]:
    """The parsed TOML, a label naming its source, and the folder its relative references resolve against."""
    if _is_path(ref):
        path = Path(ref) if Path(ref).is_absolute() else base / ref
        if not path.is_file():
            raise CohortDefinitionError(f"{path}: cohort definition file not found")
        try:
            return tomllib.loads(path.read_text(encoding="utf-8")), str(path), path.parent
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise CohortDefinitionError(f"{path}: not valid TOML ({exc})") from None
    names = builtin_names()
    ref = BUILTIN_ALIASES.get(str(ref), str(ref))
    if ref not in names:
        raise CohortDefinitionError(f"unknown cohort definition {str(ref)!r}; built-ins: {', '.join(names)}")
    text = resources.files(BUILTIN_PACKAGE).joinpath(f"{ref}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text), f"built-in definition {ref!r}", base


def _load_raw(ref: str | Path, base: Path, chain: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """Read one TOML and expand its shorthands (extends, include, top-level codes) into model fields."""
    raw, source, folder = _read_toml(ref, base)
    if source in chain:
        raise CohortDefinitionError(
            f"{source}: definitions include or extend each other in a loop ({' -> '.join(chain)})"
        )
    chain = (*chain, source)
    data: dict[str, Any] = {}
    extends = raw.pop("extends", None)
    if extends is not None:
        if not isinstance(extends, str):
            raise CohortDefinitionError(f"{source}: field extends: expected a definition name or path")
        data = _validate(_load_raw(extends, folder, chain)[0], source).model_dump()
    include = raw.pop("include", None)
    single = {k: raw.pop(k) for k in (*CODE_SET_KEYS, "sex") if k in raw}
    if include is not None and (single or "cancers" in raw):
        raise CohortDefinitionError(f"{source}: use either include, cancers or top-level codes, not several")
    if single and "cancers" in raw:
        raise CohortDefinitionError(f"{source}: use either cancers or top-level codes, not both")
    data.update(raw)
    if include is not None:
        if not isinstance(include, list) or not all(isinstance(i, str) for i in include):
            raise CohortDefinitionError(f"{source}: field include: expected a list of definition names or paths")
        cancers: list[dict[str, Any]] = []
        for item in include:
            cancers.extend(_validate(*_load_raw(item, folder, chain)).model_dump()["cancers"])
        data["cancers"] = cancers
    elif single:
        data["cancers"] = [{"name": data.get("name", ""), **single}]
    return data, source
