"""Patient embeddings: the TF-IDF vector of all the events the agents extracted for a patient.

The paper embeds each patient's event list with a hosted embedding model; offline, TF-IDF is the always-available
choice (no weights to ship). Patients without any extracted event have no text to embed: they are left out and
counted (`EmbeddingResult.n_without_events`), never placed at the origin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trajonco.insights.inputs import PatientInsightInput
from trajonco.insights.text import tfidf


@dataclass(frozen=True)
class PatientEmbeddings:
    """Unit-length rows, one per embedded patient (``patients[i]`` for i in ``indices``)."""

    indices: tuple[int, ...]
    vectors: np.ndarray
    method: str = "tfidf"

    @property
    def dimensions(self) -> int:
        return int(self.vectors.shape[1])


def embed_patients(patients: tuple[PatientInsightInput, ...]) -> PatientEmbeddings:
    """TF-IDF vectors of the patients' concatenated events (patients whose events have no usable word are left out).

    >>> from trajonco.insights.inputs import PatientInsightInput as P
    >>> people = (P(subject_id=1, prediction_time=None, case=True, risk_score=8, trajectory=(), events=("cough",)),
    ...           P(subject_id=2, prediction_time=None, case=False, risk_score=2, trajectory=(), events=()))
    >>> found = embed_patients(people)
    >>> found.indices, found.vectors.shape
    ((0,), (1, 1))
    """
    documents = [" ".join(p.events) for p in patients]
    with_text = [i for i, d in enumerate(documents) if d.strip()]
    if not with_text:
        return PatientEmbeddings((), np.zeros((0, 0)))
    matrix, _ = tfidf([documents[i] for i in with_text])
    dense = matrix.toarray()
    keep = np.flatnonzero(np.linalg.norm(dense, axis=1) > 0)
    return PatientEmbeddings(tuple(with_text[i] for i in keep), dense[keep])
