"""Topic modelling of the events the agents extracted: TF-IDF + NMF, one document per event.

The paper asks an LLM to name themes (TopicGPT-like); NMF is the deterministic, offline stand-in: each topic is
its top terms, each event goes to its dominant topic, and a topic's prevalence is the share of cases (controls)
with at least one event on it. Runs with fewer than ``min_events_for_topics`` events get a reason, not topics.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.decomposition import NMF
from sklearn.exceptions import ConvergenceWarning

from trajonco.insights.inputs import PatientInsightInput
from trajonco.insights.results import InsightsSettings, Topic, TopicsResult
from trajonco.insights.text import tfidf

TERM_FLOOR = 0.1
"""A topic lists only terms weighing at least this share of its heaviest term."""


def fit_topics(patients: tuple[PatientInsightInput, ...], settings: InsightsSettings) -> TopicsResult:
    """The topics of the patients' events, with their prevalence among cases and controls."""
    owners = [i for i, p in enumerate(patients) for _ in p.events]
    events = [e for p in patients for e in p.events]
    if len(events) < settings.min_events_for_topics:
        return TopicsResult(status="too_few", n_events=len(events), reason=(
            f"too few extracted events for a topic model ({len(events)} < {settings.min_events_for_topics})"))
    matrix, terms = tfidf(events, min_df=2 if len(events) >= 200 else 1)
    k = min(settings.n_topics, len(terms) // 2, len(events) // 5)
    if k < 2:
        return TopicsResult(status="too_few", n_events=len(events), reason=(
            f"too little distinct text for two topics ({len(terms)} distinct words in {len(events)} events)"))
    model = NMF(n_components=k, init="nndsvda", random_state=settings.seed, max_iter=600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weights = model.fit_transform(matrix)
    assigned = np.where(weights.sum(axis=1) > 0, weights.argmax(axis=1), -1)
    n_cases = sum(p.case for p in patients)
    n_controls = len(patients) - n_cases
    topics: list[Topic] = []
    for t in range(k):
        holders = {owners[i] for i in np.flatnonzero(assigned == t)}
        cases_with = sum(patients[i].case for i in holders)
        controls_with = len(holders) - cases_with
        weights_t = model.components_[t]
        top = np.argsort(-weights_t, kind="stable")[: settings.top_terms]
        floor = TERM_FLOOR * weights_t.max()  # drop the near-zero tail NMF leaves on every topic
        topics.append(Topic(index=0, top_terms=[str(terms[j]) for j in top if weights_t[j] > floor],
                            n_events=int((assigned == t).sum()), cases_with=cases_with, controls_with=controls_with,
                            prevalence_cases=cases_with / n_cases if n_cases else None,
                            prevalence_controls=controls_with / n_controls if n_controls else None))
    topics.sort(key=lambda topic: (-topic.n_events, topic.top_terms))
    topics = [topic.model_copy(update={"index": i + 1}) for i, topic in enumerate(topics)]
    return TopicsResult(status="ok", n_events=len(events), n_events_assigned=int((assigned >= 0).sum()), n_topics=k,
                        topics=topics)
