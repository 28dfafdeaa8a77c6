"""Cosine similarity between patients, clustered (average linkage) and ordered by label, then cluster.

The heatmap reads as blocks: cases first, controls second, each grouped by cluster in dendrogram order; the medians
of within-case, within-control and case-control similarity say whether the agents describe cases alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, leaves_list, linkage
from scipy.spatial.distance import squareform

from trajonco.insights.results import GroupCounts, SimilarityResult


@dataclass(frozen=True)
class SimilarityMatrix:
    """The similarity of the embedded patients in heatmap order (``order[i]`` indexes the embedding rows)."""

    matrix: np.ndarray
    order: np.ndarray
    cases: np.ndarray
    clusters: np.ndarray


def n_clusters_for(n: int) -> int:
    """A few clusters, growing slowly with n (2 for 6 patients, 8 at most).

    >>> [n_clusters_for(n) for n in (6, 30, 200, 5000)]
    [2, 4, 8, 8]
    """
    return int(np.clip(round(np.sqrt(n / 2)), 2, 8))


MIN_GROUP_FOR_MEDIAN = 3
"""A median of pair similarities needs at least this many patients in each group involved (else None)."""


def _median_pairs(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray, same: bool) -> float | None:
    if min(len(rows), len(cols)) < MIN_GROUP_FOR_MEDIAN:
        return None
    block = matrix[np.ix_(rows, cols)]
    values = block[np.triu_indices(len(rows), k=1)] if same else block.ravel()
    return float(np.median(values)) if values.size else None


def similarity(vectors: np.ndarray, cases: np.ndarray) -> SimilarityMatrix:
    """Cosine similarity (rows are unit length), clusters and the label-then-cluster order.

    >>> v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]])
    >>> s = similarity(v, np.array([False, True, True, False, True, False]))
    >>> s.order.tolist(), [bool(x) for x in s.cases[s.order]], s.clusters[s.order].tolist()
    ([1, 2, 4, 3, 0, 5], [True, True, True, False, False, False], [1, 2, 2, 1, 2, 2])
    """
    matrix = np.clip(vectors @ vectors.T, -1.0, 1.0)
    n = len(vectors)
    if n < 2:
        return SimilarityMatrix(matrix, np.arange(n), cases, np.ones(n, dtype=int))
    distance = 1.0 - matrix
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(np.clip((distance + distance.T) / 2, 0.0, None), checks=False), method="average")
    clusters = fcluster(tree, t=n_clusters_for(n), criterion="maxclust")
    leaf_rank = np.empty(n, dtype=int)
    leaf_rank[leaves_list(tree)] = np.arange(n)
    order = np.array(sorted(range(n), key=lambda i: (not cases[i], clusters[i], leaf_rank[i])))
    return SimilarityMatrix(matrix, order, cases, clusters)


def summarise(found: SimilarityMatrix, subject_ids: list[int]) -> SimilarityResult:
    """The numbers of a similarity matrix for ``results.json`` (``subject_ids`` in embedding-row order)."""
    case_rows, control_rows = np.flatnonzero(found.cases), np.flatnonzero(~found.cases)
    return SimilarityResult(
        status="ok", n=GroupCounts(cases=len(case_rows), controls=len(control_rows)),
        n_clusters=int(len(set(found.clusters.tolist()))), order=[subject_ids[i] for i in found.order],
        median_case_case=_median_pairs(found.matrix, case_rows, case_rows, True),
        median_control_control=_median_pairs(found.matrix, control_rows, control_rows, True),
        median_case_control=_median_pairs(found.matrix, case_rows, control_rows, False))
