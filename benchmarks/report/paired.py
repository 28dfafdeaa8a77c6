"""Agents against baselines on the same patients: every comparator re-scored on the rows the agent scored; and
model choice: every pair of prediction files (two LLMs, two variants) on the patients both scored.

An agent run usually scores a small subset of a test cohort (the embedded model assesses a handful of patients),
while the baselines score all of it. Putting the two AUROCs side by side compares different patients. Here each
baseline (and record-length score) is restricted to the agent's rows (`baselines.evaluation.on_rows_of`) and the
difference agent − comparator gets a paired, stratified bootstrap CI (`baselines.metrics.paired_auroc_difference`):
the same resampled patients score both models.
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines import MetricInputError, ModelScores
from baselines.evaluation import compare_on_same_rows, on_rows_of, on_shared_rows
from baselines.metrics import auroc
from benchmarks.report.results import ModelResult, PairedComparison


def paired_comparisons(cohort: str, agents: Sequence[ModelScores], comparators: Sequence[ModelScores],
                       results: Sequence[ModelResult], *, n_resamples: int, seed: int) -> list[PairedComparison]:
    """One `PairedComparison` per (agent run, comparator) of one cohort; ``results`` gives kinds and whole AUROCs.

    A comparator that lacks some of the agent's rows (a record-length score on a sample) is reported with a note
    instead of a difference, never silently left out.
    """
    by_model = {r.model: r for r in results if r.cohort == cohort}
    out: list[PairedComparison] = []
    for agent in agents:
        agent_auroc = auroc(agent.labels, agent.scores)
        n1, n0 = agent.n_positive, agent.n - agent.n_positive
        for comparator in comparators:
            known = by_model.get(comparator.model)
            common = dict(cohort=cohort, agent=agent.model, comparator=comparator.model,
                          comparator_kind=known.kind if known else "baseline", n_cases=n1, n_controls=n0,
                          agent_auroc=agent_auroc,
                          comparator_auroc_whole=known.evaluation.auroc.value if known else None,
                          comparator_whole_cases=known.evaluation.n_positive if known else None,
                          comparator_whole_controls=known.evaluation.n_negative if known else None)
            try:
                aligned = on_rows_of(comparator, agent)
            except MetricInputError as exc:
                out.append(PairedComparison(**common, comparator_auroc=None,
                                            note=f"not on the same patients: {exc}"))
                continue
            try:
                paired = compare_on_same_rows(agent, aligned, n_resamples=n_resamples, seed=seed)
            except MetricInputError as exc:
                out.append(PairedComparison(**common, comparator_auroc=auroc(aligned.labels, aligned.scores),
                                            note=str(exc)))
                continue
            out.append(PairedComparison(**common, comparator_auroc=paired.auroc_b, difference=paired.difference))
    return out


def model_choice_comparisons(cohort: str, files: Sequence[ModelScores], results: Sequence[ModelResult], *,
                             n_resamples: int, seed: int) -> list[PairedComparison]:
    """Model choice: every pair of prediction files of one cohort (e.g. two LLMs, or one-stage vs two-stage) on the
    patients both scored, with a paired bootstrap CI of the AUROC difference (first file − second)."""
    by_model = {r.model: r for r in results if r.cohort == cohort}
    out: list[PairedComparison] = []

    def whole(model: str) -> float | None:
        return by_model[model].evaluation.auroc.value if model in by_model else None

    for i, first in enumerate(files):
        for second in files[i + 1:]:
            try:
                a, b = on_shared_rows(first, second)
            except MetricInputError as exc:
                out.append(PairedComparison(cohort=cohort, agent=first.model, comparator=second.model,
                                            comparator_kind="prediction_file", n_cases=0, n_controls=0,
                                            agent_auroc=whole(first.model) or 0.5, comparator_auroc=None,
                                            comparator_auroc_whole=whole(second.model), note=str(exc)))
                continue
            common = dict(cohort=cohort, agent=first.model, comparator=second.model, comparator_kind="prediction_file",
                          n_cases=a.n_positive, n_controls=a.n - a.n_positive,
                          comparator_auroc_whole=whole(second.model))
            try:
                paired = compare_on_same_rows(a, b, n_resamples=n_resamples, seed=seed)
            except MetricInputError as exc:
                out.append(PairedComparison(**common, agent_auroc=whole(first.model) or 0.5, comparator_auroc=None,
                                            note=f"{a.n} shared patient(s): {exc}"))
                continue
            out.append(PairedComparison(**common, agent_auroc=paired.auroc_a, comparator_auroc=paired.auroc_b,
                                        difference=paired.difference))
    return out
