"""Cohort questions over a graph store: patient similarity (`similar_patients`) and typed cohort queries
(`CohortQuery`, `run_query`) over the store's columnar node index.

Names are imported on first use, so ``vista.cohort.cli`` (the parsers) loads without numpy, polars or scipy.

>>> from vista.cohort import CohortQuery, parse_code_term
>>> CohortQuery(terms=[parse_code_term("lung=ICD10CM//C34*")]).terms[0].codes
['ICD10CM//C34*']
"""

from __future__ import annotations

from vista.lazy import lazy_attributes

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

__getattr__ = lazy_attributes(__name__, _EXPORTS)
