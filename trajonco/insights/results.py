"""The numbers of the population insights, as pydantic models serialisable into ``results.json``.

Each analysis says whether it ran (``status="ok"``) or why not (``status="too_few"`` with a ``reason``): a run of
four patients gets a sentence, not a meaningless topic table or map. Every part carries the n it was computed on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "too_few"]
METHOD_NAMES = {"tfidf": "TF-IDF"}
"""How an embedding method is written in figures and text."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupCounts(_Model):
    """Patients per label."""

    cases: int
    controls: int

    def text(self) -> str:
        """``n = 3 cases / 4 controls`` (every figure and caption says it)."""
        return f"n = {self.cases} cases / {self.controls} controls"


class InsightsSettings(_Model):
    """How the insights are computed (seeded: the same run and settings give the same numbers and figures)."""

    seed: int = Field(0, description="seed of NMF, UMAP/PCA and nothing else")
    n_topics: int = Field(6, ge=2, le=30, description="topics asked of NMF (fewer when the run has few events)")
    top_terms: int = Field(8, ge=3, le=20, description="terms listed per topic")
    map_method: Literal["umap", "pca"] = Field("umap", description="2-D map of the patients; PCA (with a notice) "
                                               "when umap-learn is not installed")
    flow_window: int = Field(4, ge=1, le=12, description="chunk columns of the risk-flow figure, aligned on each "
                             "patient's last chunk (earlier chunks are counted in the transition table only)")
    min_events_for_topics: int = Field(20, ge=2, description="fewer extracted events: no topic model")
    min_patients_for_map: int = Field(10, ge=3, description="fewer patients with events: no 2-D map")
    min_patients_for_similarity: int = Field(6, ge=2, description="fewer patients with events: no heatmap")


class Topic(_Model):
    """One NMF topic of the extracted events and how common it is among cases and controls."""

    index: int = Field(description="1-based, in order of the events it dominates (most first)")
    top_terms: list[str]
    n_events: int = Field(description="events whose dominant topic this is")
    cases_with: int = Field(description="cases with at least one such event")
    controls_with: int = Field(description="controls with at least one such event")
    prevalence_cases: float | None = Field(description="cases_with / cases of the run (None without cases)")
    prevalence_controls: float | None = Field(description="controls_with / controls of the run")

    @property
    def name(self) -> str:
        return " · ".join(self.top_terms[:3])


class TopicsResult(_Model):
    """Topic model of the final events the agents extracted (one document per event, TF-IDF + NMF)."""

    status: Status
    reason: str | None = None
    method: str = "tfidf+nmf"
    n_events: int = Field(description="extracted events of the scored, labelled patients")
    n_events_assigned: int = Field(0, description="events with a dominant topic (an event of stop words only has none)")
    n_topics: int = 0
    topics: list[Topic] = Field(default_factory=list)


class PatientPoint(_Model):
    """A patient on the 2-D map, with its similarity cluster."""

    subject_id: int
    prediction_time: datetime | None
    case: bool
    x: float
    y: float
    cluster: int = Field(description="cluster of the similarity heatmap (1-based)")


class EmbeddingResult(_Model):
    """Patient embeddings (TF-IDF of each patient's extracted events) and their 2-D map."""

    method: str = Field("tfidf", description="how a patient's events become a vector")
    n_patients: int = Field(description="patients with at least one extracted event (embedded)")
    n_without_events: GroupCounts = Field(description="scored patients left out: the agents reported no event, or "
                                          "none with a word to embed (e.g. only dates)")
    dimensions: int = Field(description="length of a patient vector (the TF-IDF vocabulary)")
    map_status: Status
    map_reason: str | None = None
    map_method: Literal["umap", "pca"] | None = None
    notice: str | None = Field(None, description="e.g. umap-learn missing, PCA used instead")
    points: list[PatientPoint] = Field(default_factory=list)


class SimilarityResult(_Model):
    """Cosine similarity between patients' embeddings, ordered by label then cluster."""

    status: Status
    reason: str | None = None
    n: GroupCounts
    n_clusters: int = 0
    order: list[int] = Field(default_factory=list, description="subject ids in heatmap order (cases first)")
    median_case_case: float | None = Field(None, description="median similarity of distinct case pairs (None with "
                                           "fewer than 3 cases; likewise below)")
    median_control_control: float | None = None
    median_case_control: float | None = None


class Transition(_Model):
    """Patients (per label) whose risk went from ``source`` to ``target`` at one kind of step."""

    step: Literal["chunk", "final"] = Field(description="chunk: one chunk to the next; final: the last chunk to the "
                                            "final score band")
    source: str
    target: str
    cases: int
    controls: int


class FlowLink(_Model):
    """One band of the flow figure: patients from ``source`` in column ``column`` to ``target`` in the next."""

    column: int
    source: str
    target: str
    cases: int
    controls: int


class TrajectoryPatterns(_Model):
    """Per label: first vs last chunk risk (patients with at least one scored chunk)."""

    escalated: GroupCounts
    stable: GroupCounts
    de_escalated: GroupCounts


class TransitionsResult(_Model):
    """Low/Moderate/High risk across chunks, then the final score band, by case/control."""

    n: GroupCounts
    final_bands: str = Field(description="how the 1-10 final score maps to Low/Moderate/High")
    chunks: GroupCounts = Field(description="chunks assessed, summed over patients")
    columns: list[str] = Field(description="column names of the flow figure")
    flows: list[FlowLink]
    transitions: list[Transition] = Field(description="every step of every trajectory, counted")
    patterns: TrajectoryPatterns
    final_score_mean: dict[str, float | None] = Field(description="mean final score of cases and controls")


class InsightsResult(_Model):
    """Population insights of one prediction run."""

    source: str = Field(description="the prediction file")
    run: str = Field(description="cancer · variant · model of the run")
    n: GroupCounts = Field(description="scored, labelled patients")
    excluded: dict[str, int] = Field(description="rows left out, per reason")
    settings: InsightsSettings
    topics: TopicsResult
    embedding: EmbeddingResult
    similarity: SimilarityResult
    transitions: TransitionsResult
