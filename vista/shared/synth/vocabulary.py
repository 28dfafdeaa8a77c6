"""The generator's code dictionary: every MEDS code it can write, as integer ids, and the metadata of each code.

Rows carry integer code ids while they are generated (dictionary encoding); the id order is fixed by the catalog,
so it is the same in every worker. `code_metadata` builds the rows of ``metadata/codes.parquet``: ICD-10-CM
descriptions and parents come from `simple-icd-10-cm` (its ancestors down to the block level are described too),
the other vocabularies from the catalog.

>>> v = vocabulary()
>>> v.code(v.id("ICD10CM//C34.11"))
'ICD10CM//C34.11'
>>> v.code(int(v.icd9_of[v.id("ICD10CM//C34.11")]))
'ICD9CM//162.3'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from vista.shared.meds import schema
from vista.shared.records import CodeInfo
from vista.shared.synth import catalog
from vista.shared.synth.cancers import CANCER_KEYS, PROFILES, cancer_of_code
from vista.shared.synth.population import to_days
from vista.shared.synth.rows import days_to_us


@dataclass(frozen=True)
class Vocabulary:
    """All codes with their ids plus the lookup arrays the generator uses (ICD-9 twin, revisions, cancer family)."""

    codes: tuple[str, ...]
    index: dict[str, int]
    icd9_of: np.ndarray
    revisions: tuple[tuple[int, int, int], ...]
    cancer_of: np.ndarray
    icd9_descriptions: dict[str, str]
    revision_descriptions: dict[str, str]

    def id(self, code: str) -> int:
        try:
            return self.index[code]
        except KeyError:
            raise KeyError(f"code {code!r} is not in the synthetic vocabulary") from None

    def code(self, code_id: int) -> str:
        return self.codes[code_id]

    def __len__(self) -> int:
        return len(self.codes)


def static_codes() -> list[str]:
    sep = schema.SEP
    out = [f"{schema.GENDER_PREFIX}{sep}F", f"{schema.GENDER_PREFIX}{sep}M"]
    out += [f"{schema.RACE_PREFIX}{sep}{r}" for r in catalog.RACES]
    out += [f"{schema.ETHNICITY_PREFIX}{sep}{e}" for e in catalog.ETHNICITIES]
    return out


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """The process-wide vocabulary (built once; identical in every process)."""
    sep = schema.SEP
    codes: list[str] = []
    seen: set[str] = set()

    def add(code: str) -> None:
        if code not in seen:
            seen.add(code)
            codes.append(code)

    for c in static_codes():
        add(c)
    add(schema.BIRTH_CODE)
    add(schema.DEATH_CODE)
    for e in catalog.ENCOUNTER_TYPES:
        add(f"{schema.ENCOUNTER_PREFIX}{sep}{e}")
    for t in catalog.NOTE_TYPES:
        add(f"{schema.NOTE_PREFIX}{sep}{t}")

    diagnoses = list(catalog.DX.values())
    for profile in PROFILES:
        diagnoses.extend(profile.site_diagnoses())
    icd9_descriptions: dict[str, str] = {}
    for d in diagnoses:
        add(d.code)
        add(d.icd9_code)
        icd9_descriptions.setdefault(d.icd9_code, d.icd9_description)
    revision_descriptions: dict[str, str] = {}
    for r in catalog.REVISIONS:
        add(r.before)
        if r.before_description:
            revision_descriptions[r.before] = r.before_description
    for lab in catalog.LABS.values():
        add(lab.code)
    for obs in catalog.OBSERVATIONS.values():
        add(obs.code)
    for med in catalog.MEDS.values():
        add(med.code)
    for proc in catalog.PROCEDURES.values():
        add(proc.code)

    index = {c: i for i, c in enumerate(codes)}
    icd9_of = np.full(len(codes), -1, dtype=np.int32)
    for d in diagnoses:
        icd9_of[index[d.code]] = index[d.icd9_code]
    revisions = []
    for r in catalog.REVISIONS:
        revisions.append((index[r.code], index[r.before], int(days_to_us(np.array([to_days(r.since)]))[0])))
        if icd9_of[index[r.code]] >= 0:
            icd9_of[index[r.before]] = icd9_of[index[r.code]]
    cancer_of = np.full(len(codes), -1, dtype=np.int16)
    for i, c in enumerate(codes):
        key = cancer_of_code(c)
        if key is not None:
            cancer_of[i] = CANCER_KEYS.index(key)
    return Vocabulary(tuple(codes), index, icd9_of, tuple(revisions), cancer_of, icd9_descriptions, revision_descriptions)


def code_metadata() -> list[CodeInfo]:
    """One `CodeInfo` per code the generator can write, plus the ICD-10-CM ancestors they name as parents."""
    import simple_icd_10_cm as cm  # slow to import (loads the whole classification); only the parent needs it

    v = vocabulary()
    sep = schema.SEP
    units = {lab.code: lab.unit for lab in catalog.LABS.values()}
    units.update({o.code: o.unit for o in catalog.OBSERVATIONS.values() if o.unit})
    names = {lab.code: lab.name for lab in catalog.LABS.values()}
    names.update({o.code: o.name for o in catalog.OBSERVATIONS.values()})
    names.update({m.code: m.name for m in catalog.MEDS.values()})
    names.update({p.code: p.name for p in catalog.PROCEDURES.values()})
    names.update({f"{schema.ENCOUNTER_PREFIX}{sep}{k}": d for k, d in catalog.ENCOUNTER_DESCRIPTIONS.items()})
    names.update({f"{schema.NOTE_PREFIX}{sep}{k}": d for k, d in catalog.NOTE_DESCRIPTIONS.items()})
    names[f"{schema.GENDER_PREFIX}{sep}F"] = "Female"
    names[f"{schema.GENDER_PREFIX}{sep}M"] = "Male"
    for r in catalog.RACES:
        names[f"{schema.RACE_PREFIX}{sep}{r}"] = f"Race: {r}"
    for e in catalog.ETHNICITIES:
        names[f"{schema.ETHNICITY_PREFIX}{sep}{e}"] = f"Ethnicity: {e}"
    names[schema.BIRTH_CODE] = "Birth"
    names[schema.DEATH_CODE] = "Death"
    names.update(v.icd9_descriptions)
    names.update(v.revision_descriptions)

    infos: dict[str, CodeInfo] = {}
    pending_ancestors: list[str] = []
    for code in v.codes:
        vocab, _, value = code.partition(sep)
        if vocab == schema.ICD10CM:
            if not cm.is_valid_item(value):
                raise ValueError(f"{code} is not a valid ICD-10-CM code in simple-icd-10-cm")
            parent = cm.get_parent(value)
            parents = (f"{schema.ICD10CM}{sep}{parent}",) if parent and not cm.is_chapter(parent) else ()
            infos[code] = CodeInfo(code, cm.get_description(value), parents, None)
            pending_ancestors.extend(parents)
        else:
            if code not in names:
                raise ValueError(f"no description for code {code}")
            infos[code] = CodeInfo(code, names[code], (), units.get(code))
    while pending_ancestors:
        code = pending_ancestors.pop()
        if code in infos:
            continue
        value = code.partition(sep)[2]
        parent = cm.get_parent(value)
        parents = (f"{schema.ICD10CM}{sep}{parent}",) if parent and not cm.is_chapter(parent) else ()
        infos[code] = CodeInfo(code, cm.get_description(value), parents, None)
        pending_ancestors.extend(parents)
    return [infos[c] for c in sorted(infos)]


@dataclass(frozen=True)
class CodeIds:
    """Vocabulary ids by catalog key, for fast lookups while generating."""

    dx: dict[str, int]
    proc: dict[str, int]
    med: dict[str, int]
    lab: dict[str, int]
    obs: dict[str, int]
    site: dict[str, int]
    encounter: tuple[int, int, int]
    note: dict[str, int]
    birth: int
    death: int
    gender: tuple[int, int]
    race: tuple[int, ...]
    ethnicity: tuple[int, int]


@lru_cache(maxsize=1)
def code_ids() -> CodeIds:
    v = vocabulary()
    sep = schema.SEP
    sites = {}
    for profile in PROFILES:
        for d in profile.site_diagnoses():
            sites[d.icd10] = v.id(d.code)
    return CodeIds(
        dx={k: v.id(d.code) for k, d in catalog.DX.items()},
        proc={k: v.id(p.code) for k, p in catalog.PROCEDURES.items()},
        med={k: v.id(m.code) for k, m in catalog.MEDS.items()},
        lab={k: v.id(lab.code) for k, lab in catalog.LABS.items()},
        obs={k: v.id(o.code) for k, o in catalog.OBSERVATIONS.items()},
        site=sites,
        encounter=tuple(v.id(f"{schema.ENCOUNTER_PREFIX}{sep}{e}") for e in catalog.ENCOUNTER_TYPES),
        note={t: v.id(f"{schema.NOTE_PREFIX}{sep}{t}") for t in catalog.NOTE_TYPES},
        birth=v.id(schema.BIRTH_CODE),
        death=v.id(schema.DEATH_CODE),
        gender=(v.id(f"{schema.GENDER_PREFIX}{sep}F"), v.id(f"{schema.GENDER_PREFIX}{sep}M")),
        race=tuple(v.id(f"{schema.RACE_PREFIX}{sep}{r}") for r in catalog.RACES),
        ethnicity=tuple(v.id(f"{schema.ETHNICITY_PREFIX}{sep}{e}") for e in catalog.ETHNICITIES),
    )
