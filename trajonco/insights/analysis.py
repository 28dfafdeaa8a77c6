"""All the population insights of one run: topics, embeddings and map, similarity, risk transitions.

`compute_insights` returns the numbers (`InsightsResult`, for ``results.json``) together with the similarity
matrix the heatmap draws (too large for the JSON on big runs: the JSON keeps its order and medians).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trajonco.insights.embeddings import embed_patients
from trajonco.insights.inputs import RunInputs
from trajonco.insights.projection import project_2d
from trajonco.insights.results import (EmbeddingResult, GroupCounts, InsightsResult, InsightsSettings,
                                       PatientPoint, SimilarityResult)
from trajonco.insights.similarity import SimilarityMatrix, similarity, summarise
from trajonco.insights.topics import fit_topics
from trajonco.insights.transitions import risk_transitions


@dataclass(frozen=True)
class Insights:
    """The result and the matrix behind the heatmap (None when there were too few patients)."""

    result: InsightsResult
    similarity: SimilarityMatrix | None


def compute_insights(run: RunInputs, settings: InsightsSettings | None = None) -> Insights:
    """The insights of ``run`` (deterministic for a given ``settings.seed``)."""
    settings = settings or InsightsSettings()
    patients = run.patients
    embedded = embed_patients(patients)
    members = [patients[i] for i in embedded.indices]
    cases = np.array([p.case for p in members], dtype=bool)
    kept = set(embedded.indices)
    left_out = [p for i, p in enumerate(patients) if i not in kept]
    without = GroupCounts(cases=sum(p.case for p in left_out), controls=sum(not p.case for p in left_out))
    n_embedded = GroupCounts(cases=int(cases.sum()), controls=int((~cases).sum()))

    matrix: SimilarityMatrix | None = None
    clusters = np.ones(len(members), dtype=int)
    if len(members) >= settings.min_patients_for_similarity:
        matrix = similarity(embedded.vectors, cases)
        clusters = matrix.clusters
        similarity_result = summarise(matrix, [p.subject_id for p in members])
    else:
        similarity_result = SimilarityResult(status="too_few", n=n_embedded, reason=(
            f"too few patients with extracted events for a similarity heatmap ({len(members)} < "
            f"{settings.min_patients_for_similarity})"))

    distinct = len(np.unique(np.round(embedded.vectors, 9), axis=0)) if len(members) else 0
    if len(members) >= settings.min_patients_for_map and (embedded.dimensions < 2 or distinct < 3):
        embedding = EmbeddingResult(method=embedded.method, n_patients=len(members), n_without_events=without,
                                    dimensions=embedded.dimensions, map_status="too_few", map_reason=(
                                        f"too little signal for a 2-D map: the {len(members)} patients' extracted "
                                        f"events give {embedded.dimensions} distinct word(s) and {distinct} distinct "
                                        "vector(s) (a map needs 2 and 3)"))
    elif len(members) >= settings.min_patients_for_map:
        coords, used, notice = project_2d(embedded.vectors, settings.map_method, settings.seed)
        points = [PatientPoint(subject_id=p.subject_id, prediction_time=p.prediction_time, case=p.case,
                               x=round(float(x), 6), y=round(float(y), 6), cluster=int(c))
                  for p, (x, y), c in zip(members, coords, clusters)]
        embedding = EmbeddingResult(method=embedded.method, n_patients=len(members), n_without_events=without,
                                    dimensions=embedded.dimensions, map_status="ok", map_method=used, notice=notice,
                                    points=points)
    else:
        embedding = EmbeddingResult(method=embedded.method, n_patients=len(members), n_without_events=without,
                                    dimensions=embedded.dimensions, map_status="too_few", map_reason=(
                                        f"too few patients with extracted events for a 2-D map ({len(members)} < "
                                        f"{settings.min_patients_for_map})"))

    result = InsightsResult(
        source=run.source, run=run.run_label, n=GroupCounts(cases=run.n_cases, controls=run.n_controls),
        excluded=run.excluded, settings=settings, topics=fit_topics(patients, settings), embedding=embedding,
        similarity=similarity_result, transitions=risk_transitions(patients, settings.flow_window))
    return Insights(result=result, similarity=matrix)
