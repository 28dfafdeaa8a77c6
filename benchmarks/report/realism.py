"""Are the baselines' AUROCs realistic? A computed verdict in plain words (never written in advance).

Per cohort the best baseline's AUROC stands for the signal the data holds before the gap. Real-world early
detection from structured EHRs lands between about 0.6 and 0.9 (the paper: 0.64–0.80 for the agents, 0.80 for
XGBoost on lung); 0.5 is no signal at all. An AUROC below 1.0 does not rule out leakage or utilisation signal:
the record-length baselines (no clinical content) say how far structure alone gets, and the verdict quotes them.
Cohorts whose baselines stand on too few cases or controls (`baselines.metrics.MIN_CASES`) are not judged.

>>> v = realism_verdict({"lung": 0.81, "liver": 0.95, "colorectal": 0.58}, (0.6, 0.9), synthetic=True)
>>> v.below, v.above
(['colorectal'], ['liver'])
>>> "outside" in v.paragraph and "liver (0.950)" in v.paragraph
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from baselines.metrics import too_few_text
from benchmarks.report.results import ModelResult, RealismVerdict


def best_baselines(results: Sequence[ModelResult]) -> dict[str, ModelResult]:
    """cohort -> its baseline with the highest AUROC (among those on enough cases and controls)."""
    best: dict[str, ModelResult] = {}
    for r in results:
        if r.kind == "baseline" and not r.too_few and (r.cohort not in best
                                     or r.evaluation.auroc.value > best[r.cohort].evaluation.auroc.value):
            best[r.cohort] = r
    return best


def too_few_cohorts(results: Sequence[ModelResult]) -> dict[str, tuple[int, int]]:
    """cohort -> (cases, controls) of the cohorts whose every baseline stands on too few of them."""
    cohorts = dict.fromkeys(r.cohort for r in results if r.kind == "baseline")
    return {c: next(r.counts() for r in results if r.cohort == c and r.kind == "baseline") for c in cohorts
            if all(r.too_few for r in results if r.cohort == c and r.kind == "baseline")}


def record_length_range(results: Sequence[ModelResult]) -> tuple[float, float] | None:
    """Lowest and highest AUROC of the record-length scores (on enough patients), or None without any.

    >>> record_length_range([])
    """
    values = [r.evaluation.auroc.value for r in results if r.kind == "record_length" and not r.too_few]
    return (min(values), max(values)) if values else None


def realism_verdict(per_cohort: Mapping[str, float], realistic: tuple[float, float], *, synthetic: bool,
                    ci_lower_above_half: int | None = None, too_few: Mapping[str, tuple[int, int]] | None = None,
                    record_length: tuple[float, float] | None = None) -> RealismVerdict:
    """The verdict on the best baseline AUROC of each cohort against the ``realistic`` range; ``too_few``: cohorts
    not judged (their counts); ``record_length``: the AUROC range the record's length alone reached.

    >>> v = realism_verdict({"lung": 0.8}, (0.6, 0.9), synthetic=True, record_length=(0.61, 0.65))
    >>> "leakage" in v.paragraph, "0.61–0.65" in v.paragraph
    (True, True)
    """
    low, high = realistic
    where = "the synthetic cohorts" if synthetic else "these cohorts"
    small = "".join(f" {c}: {too_few_text(*n)}, not judged." for c, n in (too_few or {}).items())
    if not per_cohort:
        return RealismVerdict(low=low, high=high, model="best baseline", per_cohort={}, below=[], above=[],
                              paragraph=f"No baseline could be scored on enough patients of {where}, so their "
                                        f"realism cannot be judged.{small}")
    below = sorted(c for c, v in per_cohort.items() if v < low)
    above = sorted(c for c, v in per_cohort.items() if v > high)
    lo_cohort = min(per_cohort, key=lambda c: per_cohort[c])
    hi_cohort = max(per_cohort, key=lambda c: per_cohort[c])
    text = (f"On {where}, the best baseline's AUROC ranges from {per_cohort[lo_cohort]:.3f} ({lo_cohort}) to "
            f"{per_cohort[hi_cohort]:.3f} ({hi_cohort}) over {len(per_cohort)} cohort(s). ")
    if not below and not above:
        text += (f"Every cohort lies inside {low:.1f}–{high:.1f}, the range real EHR early-detection models reach: "
                 "the baselines find signal above chance (0.5). That does not by itself rule out leakage or "
                 "utilisation signal, which need not give a perfect 1.0.")
    else:
        parts = []
        if below:
            parts.append("below " + f"{low:.1f}: " + ", ".join(f"{c} ({per_cohort[c]:.3f})" for c in below))
        if above:
            parts.append("above " + f"{high:.1f}: " + ", ".join(f"{c} ({per_cohort[c]:.3f})" for c in above))
        inside = len(per_cohort) - len(below) - len(above)
        text += (f"{inside} cohort(s) lie inside {low:.1f}–{high:.1f}; these fall outside it — " + "; ".join(parts)
                 + ". " + ("That is not the realism the synthetic generator aims for; it should be fixed there "
                           "(not by moving this range)." if synthetic else
                           "Check these cohorts' definitions and data before comparing models on them."))
    if record_length is not None:
        text += (f" The record's length alone (record-length baselines, no clinical content) reaches an AUROC of "
                 f"{record_length[0]:.2f}–{record_length[1]:.2f} here: structure alone gets that far, and only "
                 "what a model reaches above it is signal beyond how much care the patient received.")
    if ci_lower_above_half is not None:
        text += (f" The lower 95% CI bound of the best baseline is above 0.5 in {ci_lower_above_half} of "
                 f"{len(per_cohort)} cohort(s).")
    return RealismVerdict(low=low, high=high, model="best baseline per cohort", per_cohort=dict(per_cohort),
                          below=below, above=above, paragraph=text + small)
