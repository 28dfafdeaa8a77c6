"""The agents over the sensitivity analyses: trajectory length (left-truncation budgets) and time gap.

The baselines are refitted per budget and per gap on whole cohorts (`benchmarks.report.cohort_tasks`); the agents
cost an LLM call chain per patient, so they run on a few patients of their subset with one variant (the first of
``agent_variants``), through the same `AgentRunner` as the main agent run (``jobs.predict`` with
``--truncate-tokens B`` per budget, ``--horizon-days`` = the gap per gap). Runs that would be identical to the
whole-record run are not repeated: a budget at or above the longest timeline of these patients keeps every token,
and the cohort's own gap on the same patients is the main run — their points reuse the main run's file and say so.

Gap cohorts are rebuilt per gap (cases: index − gap; controls: a new random visit date), so a patient of the focus
subset may be missing from a gap cohort's test labels, or carry another prediction time there: each gap takes the
subset's patients present in that gap cohort's test labels (at the gap cohort's prediction times) and tops up a
short role with the gap cohort's own short timelines (`pick_subset`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from vista.shared.atomic import atomic_path
from baselines import MetricInputError, PredictionFileModel
from baselines.metrics import auroc, bootstrap_interval
from benchmarks.report.predictions import load_predictions
from benchmarks.report.results import AgentSensitivityPoint
from benchmarks.report.settings import PredictionSource, ReportSettings, gap_days_of
from benchmarks.report.timelines import pick_subset, sample_per_role, token_counts
from vista.shared.meds.labels import read_label_table

if TYPE_CHECKING:
    from benchmarks.report.cohort_tasks import CohortOutcome
    from benchmarks.report.report_data import AgentRequest, AgentRun

SID, PT = "subject_id", "prediction_time"


def sensitivity_patients(settings: ReportSettings) -> int:
    """Patients of the agents' sensitivity runs (0: none).

    >>> sensitivity_patients(ReportSettings(out="x", agent_patients=6))
    6
    >>> sensitivity_patients(ReportSettings(out="x", agent_patients=6, agent_sensitivity_patients=2))
    2
    >>> sensitivity_patients(ReportSettings(out="x", agent_sensitivity="none"))
    0
    """
    if settings.agent_sensitivity == "none" or settings.agent_patients == 0:
        return 0
    wanted = settings.agent_patients if settings.agent_sensitivity_patients is None else \
        settings.agent_sensitivity_patients
    return min(wanted, settings.agent_patients)


def score_point(source: Path, labels: pl.DataFrame, *, n_resamples: int, seed: int, **fields) -> AgentSensitivityPoint:
    """An agent file scored on ``labels``: AUROC when both classes have a score, its CI from 2 cases and 2 controls."""
    name = load_predictions(PredictionSource(path=source)).name
    scores = PredictionFileModel(source, name=name, on_missing="subset").scores_for(labels)
    cases, controls = int(scores.labels.sum()), int((~scores.labels).sum())
    value = interval = None
    if cases and controls:
        value = float(auroc(scores.labels, scores.scores))
        try:
            interval = bootstrap_interval(scores.labels, scores.scores, "auroc", n_resamples=n_resamples, seed=seed)
        except MetricInputError:
            interval = None  # fewer than 2 cases or controls: the point alone, marked too few
    return AgentSensitivityPoint(model=name, n_cases=cases, n_controls=controls,
                                 n_unscored=scores.n_missing + scores.n_failed, auroc=value, auroc_ci=interval,
                                 source=str(source), **fields)


def gap_labels(dataset_root: Path, subset: pl.DataFrame, gap_test: pl.DataFrame, *, max_tokens: int | None,
               seed: int, source: str) -> pl.DataFrame:
    """The subset's patients as the gap cohort's test labels hold them; a short role topped up from that cohort."""
    chosen = gap_test.filter(pl.col(SID).is_in(subset[SID].implode()))
    parts = [chosen]
    for outcome in (True, False):
        wanted = int((subset["boolean_value"] == outcome).sum())
        have = int((chosen["boolean_value"] == outcome).sum())
        if have < wanted:
            rest = gap_test.filter(pl.col("boolean_value") == outcome).join(chosen, on=[SID], how="anti")
            if rest.height:
                parts.append(pick_subset(dataset_root, rest, wanted - have, max_tokens=max_tokens, seed=seed,
                                         source=source))
    return pl.concat(parts).unique([SID, PT]).sort(SID, PT)


def _same_rows(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.height == b.height and a.select(SID, PT).sort(SID, PT).equals(b.select(SID, PT).sort(SID, PT))


def run_agent_sensitivity(settings: ReportSettings, request: AgentRequest, full_run: Path,
                          runner: Callable[[AgentRequest], AgentRun], gap_outcomes: Sequence[CohortOutcome],
                          dataset_root: Path, progress: Callable[[str], None]
                          ) -> tuple[list[AgentSensitivityPoint], list[AgentSensitivityPoint], list[str], float]:
    """Truncation points, gap points, the commands run and their seconds (the whole-record point included)."""
    n = sensitivity_patients(settings)
    if n == 0:
        return [], [], [], 0.0
    variant = request.variants[0]
    folder = request.out_dir / "sensitivity"
    subset = sample_per_role(pl.from_arrow(read_label_table(request.labels)), max(1, n // 2), settings.seed)
    labels_path = folder / "labels.parquet"
    with atomic_path(labels_path) as tmp:  # private, like every report file (vista.shared.atomic)
        subset.write_parquet(tmp)
    longest = int(token_counts(dataset_root, subset, source=str(labels_path))["xml_tokens"].max())
    common = {"n_resamples": settings.n_resamples, "seed": settings.seed}
    commands: list[str] = []
    seconds = 0.0

    def run(out_dir: Path, labels: Path, **changes) -> Path:
        nonlocal seconds
        done = runner(request.model_copy(update={"labels": labels, "out_dir": out_dir, "variants": (variant,),
                                                 **changes}))
        commands.extend(done.commands)
        seconds += done.seconds
        return done.sources[0].path

    truncation: list[AgentSensitivityPoint] = []
    gaps: list[AgentSensitivityPoint] = []
    if settings.agent_sensitivity in ("all", "truncation") and settings.truncation_budgets:
        whole = {"analysis": "truncation", "cohort": request.cohort, "gap_days": request.horizon_days,
                 "longest_timeline_tokens": longest}
        truncation.append(score_point(full_run, subset, reused_full_run=True, note="the whole-record run", **whole,
                                      **common))
        for budget in sorted(settings.truncation_budgets):
            if budget >= longest:
                truncation.append(score_point(full_run, subset, budget_tokens=budget, reused_full_run=True,
                                              note=f"budget ≥ the longest timeline ({longest:,} tokens): identical "
                                                   "to the whole record, whose run is reused", **whole, **common))
                continue
            progress(f"[report] agents, {variant}, truncated to {budget:,} tokens: {subset.height} patients")
            path = run(folder / f"truncate_{budget}", labels_path, truncate_tokens=budget)
            truncation.append(score_point(path, subset, budget_tokens=budget, **whole, **common))
    if settings.agent_sensitivity in ("all", "gap"):
        years = dict(zip(settings.gap_days, settings.gap_years))
        wanted = settings.gap_years if settings.agent_gap_years is None else settings.agent_gap_years
        days = {gap_days_of(y) for y in wanted}
        focus = [o for o in gap_outcomes if o.task.definition == settings.focus_cohort and o.test_labels is not None
                 and o.gap_days in days]
        for outcome in sorted(focus, key=lambda o: o.gap_days):
            assert outcome.test_labels is not None
            source = f"{outcome.cohort} test labels (gap {outcome.gap_days} d)"
            labels = gap_labels(dataset_root, subset, outcome.test_labels, max_tokens=settings.agent_max_tokens,
                                seed=settings.seed, source=source)
            if labels.is_empty():
                continue
            tokens = int(token_counts(dataset_root, labels, source=source)["xml_tokens"].max())
            point = {"analysis": "gap", "cohort": request.cohort, "gap_years": years.get(outcome.gap_days),
                     "gap_days": outcome.gap_days, "longest_timeline_tokens": tokens}
            if outcome.gap_days == request.horizon_days and _same_rows(labels, subset):
                gaps.append(score_point(full_run, labels, reused_full_run=True, note="the cohort's own gap on the "
                                        "same patients: the whole-record run, reused", **point, **common))
                continue
            out_dir = folder / f"gap_{outcome.gap_days}d"
            path_labels = out_dir / "labels.parquet"
            with atomic_path(path_labels) as tmp:
                labels.write_parquet(tmp)
            progress(f"[report] agents, {variant}, gap {outcome.gap_days} days: {labels.height} patients")
            path = run(out_dir, path_labels, horizon_days=outcome.gap_days)
            kept = int(labels[SID].is_in(subset[SID].implode()).sum())
            gaps.append(score_point(path, labels, note=f"{kept} of {labels.height} patients from the focus subset",
                                    **point, **common))
    return truncation, gaps, commands, seconds
