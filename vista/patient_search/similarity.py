"""Patient similarity over a store: rank the other patients by how much of their graph they share with one patient.

Methods (`Method`), measured on generated patients by ``benchmarks/bench_similarity.py``:

* ``jaccard`` — the plain baseline: |A ∩ B| / |A ∪ B| over the sets of event codes. Every code counts the same, so
  the labs and vitals everyone has dominate.
* ``idf`` — specificity: each event code the patient has weighs log(N / df) (df: patients of the store with it),
  cosine of the vectors. A code every patient has weighs nothing; a cancer's diagnosis code or a regimen's drugs
  weigh most. Presence, not counts: weighting by 1 + log(count) was measured worse (a chronic comorbidity coded at
  every visit outweighs the cancer).
* ``hierarchy`` — ``idf`` plus the catalog ancestors the graph links with ``is_a`` edges (``ICD10CM//C34`` above
  ``ICD10CM//C34.1``): helps when patients are coded at different depths; on the generator's data (coded at one
  depth) it was measured slightly worse, so it is not the default.
* ``timeline`` (default) — ``idf`` plus the timeline's course: transitions between the specific codes in the order
  the patient first met them (`vista.patient_search.features.transition_tokens`), a TF-IDF "timeline embedding" with no model.
* ``values`` — ``timeline`` plus short categorical event values (``stage group = IIIB``); reads every graph of the
  store (the index holds no text), so it costs a graph load per patient — best on stage, slowest.
* ``episodes`` — ``timeline`` plus the episode structure of the patients' TOA timelines where the store holds
  current ones (codes and event types per episode: baseline, diagnosis, line 1, line 2 …). Not measured on the
  generator: its timelines need an LLM (the embedded test model is too slow and too weak for a cohort).

Tokens seen in a single patient are dropped (they cannot be shared; they would only dilute the cosine).

>>> tokens = pl.DataFrame({"subject_id": [1, 1, 2, 2, 3, 3], "token": ["a", "rare", "a", "rare", "a", "b"],
...                        "count": [1, 1, 1, 1, 1, 1]}, schema={"subject_id": pl.Int64, "token": pl.String,
...                        "count": pl.UInt32})
>>> matrix = TokenMatrix.from_tokens(tokens, weighting="idf")
>>> [(n.subject_id, round(n.score, 3), n.shared) for n in matrix.neighbours(1, 2)]
[(2, 1.0, ('rare',)), (3, 0.0, ())]
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np
import polars as pl
import scipy.sparse as sp

from vista.patient_search.errors import PatientSearchError
from vista.patient_search.features import Family, patient_tokens
from vista.patient_search.source import CohortSource


class Method(StrEnum):
    JACCARD = "jaccard"
    IDF = "idf"
    HIERARCHY = "hierarchy"
    TIMELINE = "timeline"
    VALUES = "values"
    EPISODES = "episodes"


FAMILIES: dict[Method, tuple[Family, ...]] = {
    Method.JACCARD: (Family.CODES,),
    Method.IDF: (Family.CODES,),
    Method.HIERARCHY: (Family.CODES, Family.ANCESTORS),
    Method.TIMELINE: (Family.CODES, Family.TRANSITIONS),
    Method.VALUES: (Family.CODES, Family.TRANSITIONS, Family.VALUES),
    Method.EPISODES: (Family.CODES, Family.TRANSITIONS, Family.EPISODES),
}
DEFAULT_METHOD = Method.TIMELINE


@dataclass(frozen=True, slots=True)
class Neighbour:
    """One similar patient: its score (cosine, or Jaccard for the baseline) and the tokens that weigh most in it."""

    subject_id: int
    score: float
    shared: tuple[str, ...]


@dataclass(frozen=True)
class TokenMatrix:
    """Patients × tokens, weighted and row-normalised for the chosen weighting."""

    subject_ids: np.ndarray  # int64, row order
    tokens: np.ndarray  # str, column order
    matrix: sp.csr_matrix
    weighting: Literal["jaccard", "idf"]

    @classmethod
    def from_tokens(cls, tokens: pl.DataFrame, *, weighting: Literal["jaccard", "idf"],
                    subject_ids: list[int] | None = None) -> TokenMatrix:
        """Build from a long ``subject_id, token, count`` frame (``subject_ids``: a row for each, even without
        tokens). Counts are not used: presence is what is weighed."""
        subjects = np.array(sorted(set(subject_ids or []) | set(tokens["subject_id"].unique().to_list())), np.int64)
        df = tokens.group_by("token").agg(pl.col("subject_id").n_unique().alias("df")).filter(pl.col("df") >= 2)
        kept = tokens.join(df, on="token")
        vocabulary = np.array(sorted(df["token"].to_list()), dtype=object)
        column = {t: j for j, t in enumerate(vocabulary)}
        row = {int(s): i for i, s in enumerate(subjects)}
        rows = np.array([row[s] for s in kept["subject_id"].to_list()], np.int64)
        cols = np.array([column[t] for t in kept["token"].to_list()], np.int64)
        if weighting == "jaccard":
            values = np.ones(len(rows))
        else:  # presence × specificity
            values = np.log(max(len(subjects), 1) / kept["df"].to_numpy().astype(float))
        matrix = sp.csr_matrix((values, (rows, cols)), shape=(len(subjects), len(vocabulary)))
        if weighting == "idf":
            norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
            norms[norms == 0] = 1.0
            matrix = sp.csr_matrix(sp.diags(1.0 / norms) @ matrix)
        return cls(subjects, vocabulary, matrix, weighting)

    def scores(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Similarities of ``rows`` (default: every patient) to every patient, dense (rows × patients)."""
        query = self.matrix if rows is None else self.matrix[rows]
        inter = (query @ self.matrix.T).toarray()
        if self.weighting == "idf":
            return inter
        sizes = np.asarray(self.matrix.sum(axis=1)).ravel()
        mine = sizes if rows is None else sizes[rows]
        union = mine[:, None] + sizes[None, :] - inter
        return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)

    def row_of(self, subject_id: int) -> int:
        found = np.searchsorted(self.subject_ids, subject_id)
        if found >= len(self.subject_ids) or self.subject_ids[found] != subject_id:
            raise PatientSearchError(f"subject {subject_id} has no graph in this store")
        return int(found)

    def neighbours(self, subject_id: int, k: int, *, explain: int = 5) -> list[Neighbour]:
        """The ``k`` most similar other patients, best first (ties by subject id), with their top shared tokens."""
        i = self.row_of(subject_id)
        scores = self.scores(np.array([i]))[0]
        scores[i] = -np.inf
        order = np.lexsort((self.subject_ids, -scores))[:min(k, len(scores) - 1)]
        mine = self.matrix[i]
        out = []
        for j in order:
            contribution = mine.multiply(self.matrix[j]).tocoo()
            top = [t for t in np.argsort(-contribution.data, kind="stable")[:explain] if contribution.data[t] > 0]
            out.append(Neighbour(int(self.subject_ids[j]), float(scores[j]),
                                 tuple(str(self.tokens[contribution.col[t]]) for t in top)))
        return out


def similarity_matrix(source: CohortSource, method: Method = DEFAULT_METHOD) -> TokenMatrix:
    """The token matrix of every patient of ``source`` for ``method``."""
    tokens = patient_tokens(source, FAMILIES[method])
    return TokenMatrix.from_tokens(tokens, weighting="jaccard" if method is Method.JACCARD else "idf",
                                   subject_ids=source.subject_ids())


def similar_patients(source: CohortSource, subject_id: int, k: int = 10,
                     method: Method = DEFAULT_METHOD) -> list[Neighbour]:
    """The ``k`` patients of ``source`` most similar to ``subject_id`` by ``method``, best first."""
    if k < 1:
        raise PatientSearchError(f"k must be at least 1, not {k}")
    source.check_subject(subject_id)
    return similarity_matrix(source, method).neighbours(subject_id, k)
