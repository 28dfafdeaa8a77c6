"""The report's data: what the agents are asked (`AgentRequest`), what they produced (`AgentRun`), every number of a
report (`ReportResults`, written to ``results.json``) and what the figures need beside it (`ReportData`).

Its own module so that the orchestration (`benchmarks.report.reproduce`), the sections and the agent analyses all
build on it without importing one another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from baselines import ModelScores
from benchmarks.report.dataset import DatasetSource
from benchmarks.report.predictions import LoadedPredictions
from benchmarks.report.profile import AgentRole, RunProfile, SelectionPoint
from benchmarks.report.results import (
    AgentSensitivityPoint,
    CohortCharacteristics,
    CohortInfo,
    CohortSkip,
    CohortStrata,
    GapPoint,
    ModelResult,
    PairedComparison,
    RealismVerdict,
    TruncationPoint,
    UnscoredRun,
)
from benchmarks.report.settings import PredictionSource, ReportSettings
from trajonco.insights.results import InsightsResult
from trajonco.judge.report import JudgeReport


class AgentRequest(BaseModel):
    """What the agents should assess: a label file of focus-cohort test patients, and where to write."""

    dataset: Path
    labels: Path = Field(description="label parquet of the subset (subject_id, prediction_time, boolean_value, ...)")
    out_dir: Path = Field(description="one sub-folder per variant goes here")
    cohort: str
    cancer: str | None = Field(description="the cancer to assess; None with any_cancer")
    any_cancer: bool
    variants: tuple[str, ...]
    horizon_days: int = Field(description="the cohort's gap: the agents predict a diagnosis within this horizon")
    truncate_tokens: int | None = Field(None, description="left-truncation: the agents see only the newest N tokens "
                                        "of each timeline (the trajectory-length analysis); None: the whole record")


class AgentRun(BaseModel):
    """What an agent runner produced: prediction files and the commands that produced them."""

    sources: list[PredictionSource]
    commands: list[str]
    seconds: float


AgentRunner = Callable[[AgentRequest], AgentRun]


class Timing(BaseModel):
    step: str
    seconds: float


class ReportResults(BaseModel):
    """Every number of a report (``results.json``)."""

    settings: ReportSettings
    dataset: DatasetSource
    cohorts: list[CohortInfo]
    gap_cohorts: list[CohortInfo] = Field(default_factory=list, description="cohorts rebuilt for the time-gap analysis")
    skips: list[CohortSkip]
    characteristics: list[CohortCharacteristics]
    focus_cohort: str = Field(description="name of the focus cohort (ROC/PR figure, trajectory length, agents)")
    results: list[ModelResult] = Field(description="every model on every cohort at the cohorts' own gap")
    paired: list[PairedComparison] = Field(default_factory=list, description="each agent run against each baseline "
                                           "and record-length score on the agent's own patients")
    unscored: list[UnscoredRun] = Field(default_factory=list, description="prediction files too small to evaluate")
    truncation_cohort: str | None
    truncation: list[TruncationPoint]
    gaps: list[GapPoint]
    agent_truncation: list[AgentSensitivityPoint] = Field(default_factory=list, description="the agents (first "
                                                          "variant, a few patients) per truncation budget")
    agent_gaps: list[AgentSensitivityPoint] = Field(default_factory=list, description="the agents (first variant, a "
                                                    "few patients) per time gap of the focus cohort")
    strata: list[CohortStrata]
    profiles: list[RunProfile]
    agent_roles: list[AgentRole]
    selection: list[SelectionPoint]
    realism: RealismVerdict
    agent_request: AgentRequest | None
    commands: list[str] = Field(description="commands that produced the numbers, the report's own first")
    timings: list[Timing]
    total_seconds: float
    insights: list[InsightsResult] = Field(default_factory=list, description="population insights of each agents' "
                                           "prediction run (benchmarks.report.agent_analyses)")
    pairwise_judge: JudgeReport | None = Field(None, description="the pairwise LLM judge of two agent runs on the "
                                               "same patients, when the report ran one")


@dataclass
class ReportData:
    """`ReportResults` plus what figures need that is not worth serialising (scores, prediction frames)."""

    results: ReportResults
    scores: dict[str, list[ModelScores]] = field(default_factory=dict)  # cohort -> model scores (main gap)
    predictions: list[LoadedPredictions] = field(default_factory=list)
