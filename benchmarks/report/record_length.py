"""Record-length baselines: how well the length of a patient's record alone separates cases from controls.

Cases often have longer, denser records before the prediction time than their matched controls (more visits,
work-up). Any model — supervised or LLM — can pick that up instead of clinical signal. Two scores make the
utilisation signal visible, per cohort, beside the real models:

- ``record length: XML tokens`` — cl100k tokens of the rendered timeline (every test patient, as Table 1);
- ``record length: visits`` — distinct visit days over the whole record before the prediction time (every row).

Each is evaluated exactly like a model (AUROC/AUPRC with bootstrap CIs), as a `ModelResult` of kind
``record_length``; it is never fitted, so it cannot leak.
"""

from __future__ import annotations

import polars as pl

from baselines import MetricInputError, ModelScores, evaluate
from baselines.metrics import too_few_text
from baselines.stratify import visit_counts
from benchmarks.report.results import CohortCharacteristics, ModelResult

SID, PT = "subject_id", "prediction_time"
TOKENS, VISITS = "record length: XML tokens", "record length: visits"


def _scores(name: str, labels: pl.DataFrame, values: pl.DataFrame, column: str) -> ModelScores:
    rows = labels.select(SID, PT, "boolean_value").join(values.select(SID, PT, column), on=[SID, PT], how="inner",
                                                        maintain_order="left").drop_nulls(column)
    return ModelScores(name, rows[SID].to_numpy(), rows[PT].to_numpy().astype("datetime64[us]"),
                       rows["boolean_value"].to_numpy().astype(bool), rows[column].cast(pl.Float64).to_numpy(),
                       n_missing=labels.height - rows.height)


def record_length_scores(labels: pl.DataFrame, events: pl.LazyFrame, tokens: pl.DataFrame | None) -> list[ModelScores]:
    """The visit-count score of every label row, and the token-count score of the rows in ``tokens``."""
    out = [_scores(VISITS, labels, visit_counts(events, labels, years=None), "visits")]
    if tokens is not None and tokens.height:
        out.insert(0, _scores(TOKENS, labels, tokens, "xml_tokens"))
    return out


def record_length_results(cohort: str, gap_days: int, labels: pl.DataFrame, events: pl.LazyFrame,
                          tokens: pl.DataFrame | None, *, n_resamples: int,
                          seed: int) -> tuple[list[ModelResult], list[ModelScores]]:
    """Evaluated record-length scores (those with at least 2 cases and 2 controls) and their raw scores."""
    results, kept = [], []
    for scores in record_length_scores(labels, events, tokens):
        try:
            evaluation = evaluate(scores, n_resamples=n_resamples, seed=seed)
        except MetricInputError:
            continue  # too few sampled rows of a role; the section says which scores exist
        evaluation.notes[:] = [n for n in evaluation.notes if "not probabilities" not in n]
        results.append(ModelResult(cohort=cohort, gap_days=gap_days, model=scores.model, kind="record_length",
                                   evaluation=evaluation))
        kept.append(scores)
    return results, kept


def imbalance_sentence(c: CohortCharacteristics, results: list[ModelResult]) -> str:
    """One sentence on a cohort's record-length imbalance (Table 1) and what the record-length baseline makes of it.

    >>> from benchmarks.report.results import GroupCharacteristics, Quantiles
    >>> g = lambda tokens, span: GroupCharacteristics(n=2, age_years=Quantiles(n=0), sex={}, race={}, ethnicity={},
    ...     ehr_span_years=Quantiles.of(span), xml_tokens=Quantiles.of(tokens))
    >>> c = CohortCharacteristics(cohort="lung", cases=g([4000, 6000], [5, 7]), controls=g([1000, 3000], [3, 5]),
    ...                           token_sample_per_role=2)
    >>> imbalance_sentence(c, [])
    'lung: cases have 2.5× the XML tokens of controls (median 5.0k vs 2.0k) and 1.5× the EHR span (6.0 vs 4.0 y); no record-length AUROC was computed.'
    """
    parts = []
    for label, a, b, fmt in (("the XML tokens", c.cases.xml_tokens, c.controls.xml_tokens, "k"),
                             ("the EHR span", c.cases.ehr_span_years, c.controls.ehr_span_years, "y")):
        if a.median is None or b.median is None or b.median <= 0:
            continue
        values = (f"median {a.median / 1000:.1f}k vs {b.median / 1000:.1f}k" if fmt == "k"
                  else f"{a.median:.1f} vs {b.median:.1f} y")
        parts.append(f"{a.median / b.median:.1f}× {label} of controls ({values})" if not parts
                     else f"{a.median / b.median:.1f}× {label} ({values})")
    text = f"{c.cohort}: cases have " + " and ".join(parts) if parts else f"{c.cohort}: no length to compare"
    mine = [r for r in results if r.cohort == c.cohort and r.kind == "record_length"]
    if not mine:
        return text + "; no record-length AUROC was computed."
    scores = "; ".join(f"{r.model.removeprefix('record length: ')} alone "
                       + (too_few_text(*r.counts()) if r.too_few else
                          f"{r.evaluation.auroc.value:.3f} ({r.evaluation.auroc.lower:.3f}–"
                          f"{r.evaluation.auroc.upper:.3f}, n={r.evaluation.n_positive}/{r.evaluation.n_negative})")
                       for r in mine)
    return f"{text}; AUROC of the record length used as the only score: {scores}."
