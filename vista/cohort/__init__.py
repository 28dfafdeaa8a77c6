"""Cohort questions over a graph store: patient similarity (`similar_patients`) and typed cohort queries
(`CohortQuery`, `run_query`) over the store's columnar node index.

Names are imported on first use, so ``vista.cohort.cli`` (the parsers) loads without numpy, polars or scipy.

>>> from vista.cohort import CohortQuery, parse_code_term
>>> CohortQuery(terms=[parse_code_term("lung=ICD10CM//C34*")]).terms[0].codes
['ICD10CM//C34*']
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CohortError": "errors",
    "Evidence": "evaluate", "QueryResult": "evaluate", "SubjectMatch": "evaluate", "run_query": "evaluate",
    "CodeTerm": "query", "CohortQuery": "query", "Order": "query", "TextTerm": "query", "ValueTest": "query",
    "load_query": "query", "make_query": "query", "parse_code_term": "query", "parse_order": "query",
    "parse_text_term": "query",
    "DEFAULT_METHOD": "similarity", "Method": "similarity", "Neighbour": "similarity",
    "similar_patients": "similarity", "similarity_matrix": "similarity",
    "CohortSource": "source", "open_source": "source",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vista.cohort' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"vista.cohort.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
