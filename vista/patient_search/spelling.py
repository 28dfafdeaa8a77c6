"""Cohort-query codes in the data's own spelling: respelled to the canonical codes a graph store holds.

A store's nodes carry canonical codes (``SNOMED//254837009``, ``ICD10CM//C34.11``); users copy codes from their
dataset (``SNOMED/254837009``, ``DIAGNOSIS//ICD//10//C3411``). `respell_term` reads each code (not prefixes) through
the given coding profile, or, when none is given, through every built-in profile, keeping each distinct canonical
form as an alternative; `unmatched_hint` is the one line said when a term matches nothing.

>>> term, notes = respell_term(CodeTerm(name="x", codes=["SNOMED/254837009"]), None)
>>> term.codes, notes
(['SNOMED//254837009'], ["--code x: 'SNOMED/254837009' read as 'SNOMED//254837009' (the canonical spelling)"])
"""

from __future__ import annotations

import polars as pl

from vista.shared.coding import CodingProfile, load_profile
from vista.shared.coding.profile import builtin_profiles
from vista.patient_search.query import CodeTerm


def _spellings(code: str, profile: CodingProfile | str | None) -> list[str]:
    """The canonical forms of ``code``: through ``profile``, or the distinct ones of the built-in profiles (a code
    written with ``//`` is also kept as written)."""
    if code.endswith("*"):
        return [code]
    if profile is not None:
        return [load_profile(profile).canonical_code(code)]
    changed = [c for c in dict.fromkeys(load_profile(name).canonical_code(code) for name in builtin_profiles())
               if c != code]
    return [code, *changed] if "//" in code else changed or [code]


def respell_term(term: CodeTerm, profile: CodingProfile | str | None) -> tuple[CodeTerm, list[str]]:
    """The term with its codes in canonical spelling, and one note per code that changed."""
    codes: list[str] = []
    notes: list[str] = []
    for code in term.codes:
        spelled = _spellings(code, profile)
        if spelled != [code]:
            shown = " or ".join(repr(c) for c in spelled if c != code)
            also = "also " if code in spelled else ""
            notes.append(f"--code {term.name}: {code!r} {also}read as {shown} (the canonical spelling)")
        codes.extend(c for c in spelled if c not in codes)
    return term.model_copy(update={"codes": codes}), notes


def _value_key(code: str) -> str:
    """The part after the vocabulary, without dots or case: how near spellings of one code compare."""
    return code.rstrip("*").rsplit("/", 1)[-1].replace(".", "").upper()


def unmatched_hint(term: CodeTerm, index: pl.LazyFrame) -> str:
    """The line for a code term no event matches, naming store codes spelled like it when there are some."""
    keys = {_value_key(c) for c in term.codes if _value_key(c)}
    near: list[str] = []
    if keys:
        codes = index.select(pl.col("code").drop_nulls().unique()).collect()["code"].to_list()
        near = sorted(c for c in codes if "//" in c and _value_key(c) in keys)[:3]
    said = ", ".join(term.codes)
    if near:
        return f"--code {term.name}: no event has code {said}; the store spells it {', '.join(near)}"
    return (f"--code {term.name}: no event has code {said} (store codes are canonical, VOCABULARY//VALUE, e.g. "
            "ICD10CM//C34.11 or SNOMED//254837009; a prefix ends in '*')")
