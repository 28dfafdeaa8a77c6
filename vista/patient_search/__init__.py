"""Patient search over a graph store: the patients most similar to one (`similar_patients`, ``vista similar``) and
the patients matching a typed cohort query (`CohortQuery`, `run_query`, ``vista cohort-query``), read from the
store's columnar node index. (Case-control cohorts for prediction are `trajonco.cohorts`, a different thing.)

Names are imported on first use, so ``vista.patient_search.cli`` (the parsers) loads without numpy, polars or scipy.

>>> from vista.patient_search import CohortQuery, parse_code_term
>>> CohortQuery(terms=[parse_code_term("lung=ICD10CM//C34*")]).terms[0].codes
['ICD10CM//C34*']
"""

from __future__ import annotations

from vista.shared.lazy import lazy_attributes

_EXPORTS = {
    "PatientSearchError": "errors",
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
