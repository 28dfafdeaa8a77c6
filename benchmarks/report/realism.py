"""Are the baselines' AUROCs realistic? A computed verdict in plain words (never written in advance).

Per cohort the best baseline's AUROC stands for the signal the data holds before the gap. Real-world early
detection from structured EHRs lands between about 0.6 and 0.9 (the paper: 0.64–0.80 for the agents, 0.80 for
XGBoost on lung); 1.0 would mean leakage or a trivially separable generator, 0.5 no signal at all.

>>> v = realism_verdict({"lung": 0.81, "liver": 0.95, "colorectal": 0.58}, (0.6, 0.9), synthetic=True)
>>> v.below, v.above
(['colorectal'], ['liver'])
>>> "outside" in v.paragraph and "liver (0.950)" in v.paragraph
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchmarks.report.results import ModelResult, RealismVerdict


def best_baselines(results: Sequence[ModelResult]) -> dict[str, ModelResult]:
    """cohort -> its baseline with the highest AUROC."""
    best: dict[str, ModelResult] = {}
    for r in results:
        if r.kind == "baseline" and (r.cohort not in best
                                     or r.evaluation.auroc.value > best[r.cohort].evaluation.auroc.value):
            best[r.cohort] = r
    return best


def realism_verdict(per_cohort: Mapping[str, float], realistic: tuple[float, float], *, synthetic: bool,
                    ci_lower_above_half: int | None = None) -> RealismVerdict:
    """The verdict on the best baseline AUROC of each cohort against the ``realistic`` range."""
    low, high = realistic
    where = "the synthetic cohorts" if synthetic else "these cohorts"
    if not per_cohort:
        return RealismVerdict(low=low, high=high, model="best baseline", per_cohort={}, below=[], above=[],
                              paragraph=f"No baseline could be scored on {where}, so their realism cannot be judged.")
    below = sorted(c for c, v in per_cohort.items() if v < low)
    above = sorted(c for c, v in per_cohort.items() if v > high)
    lo_cohort = min(per_cohort, key=lambda c: per_cohort[c])
    hi_cohort = max(per_cohort, key=lambda c: per_cohort[c])
    text = (f"On {where}, the best baseline's AUROC ranges from {per_cohort[lo_cohort]:.3f} ({lo_cohort}) to "
            f"{per_cohort[hi_cohort]:.3f} ({hi_cohort}) over {len(per_cohort)} cohort(s). ")
    if not below and not above:
        text += (f"Every cohort lies inside {low:.1f}–{high:.1f}: the baselines find real but imperfect signal — "
                 "far from chance (0.5) and far from the perfect separation (1.0) that leakage would give — which "
                 "is the range real EHR early-detection models reach.")
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
    if ci_lower_above_half is not None:
        text += (f" The lower 95% CI bound of the best baseline is above 0.5 in {ci_lower_above_half} of "
                 f"{len(per_cohort)} cohort(s).")
    return RealismVerdict(low=low, high=high, model="best baseline per cohort", per_cohort=dict(per_cohort),
                          below=below, above=above, paragraph=text)
