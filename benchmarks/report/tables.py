"""The report's tables, formatted from result models (every cell is a number the run computed).

>>> from baselines import Interval
>>> ci(Interval(value=0.7912, lower=0.75, upper=0.83, level=0.95, n_resamples=10, method="percentile", seed=0))
'0.791 (0.750–0.830)'
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines import Interval, StratumResult
from benchmarks.report.html import Table
from benchmarks.report.profile import AgentRole, RunProfile, SelectionPoint
from benchmarks.report.results import (
    CohortCharacteristics,
    CohortInfo,
    CohortSkip,
    GapPoint,
    GroupCharacteristics,
    ModelResult,
    TruncationPoint,
    UnscoredRun,
)


def ci(interval: Interval | None) -> str:
    """``value (lower–upper)`` with three decimals, '–' when missing."""
    if interval is None:
        return "–"
    return f"{interval.value:.3f} ({interval.lower:.3f}–{interval.upper:.3f})"


def _share(count: int, n: int) -> str:
    return f"{count} ({100.0 * count / n:.1f})" if n else "0"


def characteristics_table(items: Sequence[CohortCharacteristics]) -> Table:
    """The paper's Table 1, one row per cohort and role (columns: the characteristics)."""
    races = sorted({r for c in items for g in (c.cases, c.controls) for r in g.race})
    ethnicities = sorted({e for c in items for g in (c.cases, c.controls) for e in g.ethnicity})
    columns = (["cohort", "role", "N", "age, y", "female, n (%)"] + [f"{e}, n (%)" for e in ethnicities]
               + [f"{r}, n (%)" for r in races] + ["EHR span, y", "XML tokens", "timelines rendered"])
    rows = []
    for c in items:
        for role, g in (("cases", c.cases), ("controls", c.controls)):
            rows.append(_characteristics_row(c.cohort, role, g, ethnicities, races))
    sample = items[0].token_sample_per_role if items else 0
    return Table("table-characteristics", "Cohort characteristics of the test cohorts (median [IQR] or n (%))",
                 columns, rows, note=f"EHR span: first to last clinical event before the prediction time. XML tokens: "
                 f"tiktoken cl100k_base over the rendered timeline, on a seeded sample of up to {sample} patients per "
                 "cohort and role (the last column says how many).")


def _characteristics_row(cohort: str, role: str, g: GroupCharacteristics, ethnicities: list[str],
                         races: list[str]) -> list[str]:
    return ([cohort, role, str(g.n), g.age_years.text(), _share(g.sex.get("F", 0), g.n)]
            + [_share(g.ethnicity.get(e, 0), g.n) for e in ethnicities]
            + [_share(g.race.get(r, 0), g.n) for r in races]
            + [g.ehr_span_years.text(), g.xml_tokens.text(thousands=True), str(g.xml_tokens.n)])


def metric_table(results: Sequence[ModelResult], cohorts: Sequence[str], metric: str, table_id: str) -> Table:
    """AUROC or AUPRC with 95% CI: one row per cohort, one column per model."""
    models = list(dict.fromkeys(r.model for r in results))
    cell = {(r.cohort, r.model): getattr(r.evaluation, metric) for r in results}
    n = {r.cohort: (r.evaluation.n_positive, r.evaluation.n_negative) for r in results if r.kind == "baseline"}
    rows = [[c, f"{n[c][0]} / {n[c][1]}" if c in n else "–", *(ci(cell.get((c, m))) for m in models)]
            for c in cohorts]
    label = metric.upper()
    note = ("95% CIs: stratified bootstrap (cases and controls resampled separately). Prediction-file models are "
            "evaluated on the rows they scored (see their n in the model table).")
    if metric == "auprc":
        note += " Under 1:1 matching the chance level of AUPRC is 0.5."
    return Table(table_id, f"{label} (95% CI) on the test cohorts", ["cohort", "cases / controls", *models], rows,
                 note=note)


def model_table(results: Sequence[ModelResult]) -> Table:
    """Every model run: what produced it, rows scored, AUROC/AUPRC, threshold metrics, fit time."""
    rows = []
    for r in results:
        e = r.evaluation
        youden = e.at_youden
        rows.append([r.cohort, r.model, r.kind, r.llm_model or "–", str(e.n), str(e.n_missing + e.n_failed),
                     ci(e.auroc), ci(e.auprc), f"{youden.sensitivity:.2f}" if youden.sensitivity is not None else "–",
                     f"{youden.specificity:.2f}" if youden.specificity is not None else "–",
                     f"{e.calibration.brier_score:.3f}" if e.calibration else "–",
                     f"{r.seconds:.1f}" if r.kind == "baseline" else "–",
                     "; ".join(e.notes) or ""])
    return Table("table-models", "Every model run (LLM = the model that produced a prediction file's scores)",
                 ["cohort", "model", "kind", "LLM", "rows scored", "rows without score", "AUROC", "AUPRC",
                  "sensitivity @Youden", "specificity @Youden", "Brier", "fit + score s", "notes"], rows)


def unscored_table(runs: Sequence[UnscoredRun]) -> Table:
    rows = [[u.cohort, u.model, u.llm_model or "–", str(u.n_scored), u.reason, u.source] for u in runs]
    return Table("table-unscored", "Prediction files that could not be evaluated",
                 ["cohort", "model", "LLM", "rows scored", "why", "file"], rows)


def cohort_info_table(infos: Sequence[CohortInfo], skips: Sequence[CohortSkip]) -> Table:
    rows = [[i.cohort, str(i.gap_days), str(i.test_cases), str(i.test_controls), str(i.train_rows), str(i.n_features),
             f"{i.build_seconds:.1f}", f"{i.describe_seconds:.1f}", f"{i.feature_seconds:.1f}",
             f"{i.model_seconds:.1f}", ""] for i in infos]
    rows += [[s.cohort, str(s.gap_days), "–", "–", "–", "–", "–", "–", "–", "–", f"skipped: {s.reason}"]
             for s in skips]
    return Table("table-cohorts", "Cohorts built (test: held-out split; training: train + tuning splits)",
                 ["cohort", "gap, days", "test cases", "test controls", "training rows", "features", "build s",
                  "Table 1 s", "features s", "models s", "note"], rows)


def truncation_table(points: Sequence[TruncationPoint]) -> Table:
    models = list(dict.fromkeys(p.model for p in points))
    budgets = sorted({p.budget_tokens for p in points if p.budget_tokens is not None}) + [None]
    by = {(p.budget_tokens, p.model): p for p in points}
    rows = []
    for b in budgets:
        any_point = next((by[(b, m)] for m in models if (b, m) in by), None)
        if any_point is None:
            continue
        rows.append([f"{b:,}" if b is not None else "whole record", f"{100 * any_point.share_truncated:.0f}%",
                     f"{any_point.median_kept_tokens:,.0f}", f"{any_point.median_history_years:.2f}",
                     *(ci(by[(b, m)].auroc) if (b, m) in by else "–" for m in models)])
    return Table("table-truncation", "AUROC (95% CI) with inputs left-truncated to a token budget",
                 ["budget (tokens)", "test patients truncated", "median tokens kept", "median history kept, y",
                  *models], rows)


def gap_table(points: Sequence[GapPoint]) -> Table:
    gaps = sorted({p.gap_years for p in points})
    keys = list(dict.fromkeys((p.cohort, p.model) for p in points))
    by = {(p.cohort, p.model, p.gap_years): p for p in points}
    rows = [[c, m, *(ci(by[(c, m, g)].auroc) if (c, m, g) in by else "–" for g in gaps)] for c, m in keys]
    return Table("table-gap", "AUROC (95% CI) by gap between prediction time and diagnosis",
                 ["cohort", "model", *(f"{g:g} y" for g in gaps)], rows,
                 note="Each gap rebuilds the cohort (cases: index − gap; controls: a random visit date as index), "
                      "refits the model on the rebuilt training cohort and scores the rebuilt test cohort.")


def strata_table(cohort: str, results: Sequence[StratumResult]) -> Table:
    rows = [[r.stratifier, r.stratum, r.model, str(r.n_positive), str(r.n_negative), ci(r.auroc), ci(r.auprc),
             r.note or ""] for r in results]
    return Table(f"table-strata-{cohort}", f"Stratified results — {cohort}",
                 ["stratifier", "stratum", "model", "cases", "controls", "AUROC", "AUPRC", "note"], rows,
                 note="Visit frequency: distinct visit days in the 5 years before the prediction time, in quartiles "
                      "over the cohort. Controls take the cancer (and screening group) of their matched case.")


def _q(quantiles, digits: int = 1) -> str:
    return quantiles.text(digits) if quantiles.n else "–"


def profile_table(profiles: Sequence[RunProfile]) -> Table:
    rows = []
    for p in profiles:
        rows.append([p.name, p.llm_model or "–", p.variant or "–", str(p.patients),
                     ", ".join(f"{k} {v}" for k, v in p.statuses.items()), str(p.profiled), _q(p.runtime_s),
                     _q(p.wall_s), _q(p.timeline_tokens, 0), _q(p.chunks, 0), _q(p.llm_calls, 0),
                     _q(p.prompt_tokens, 0), _q(p.completion_tokens, 0), _q(p.cost_usd, 5),
                     f"{p.total_cost_usd:.4f}"
                     + (f" (+{p.unpriced_calls} unpriced calls)" if p.unpriced_calls else "")])
    return Table("table-latency", "Latency, tokens and cost per patient (median [IQR])",
                 ["run", "LLM", "variant", "patients", "status", "profiled", "runtime s", "wall s", "XML tokens",
                  "chunks", "LLM calls", "prompt tokens", "completion tokens", "cost $", "total cost $"], rows,
                 note="runtime: timeline → final answer (latency_total_s); wall: the task in its actor, reading the "
                      "record included. Patients answered from the response cache are not profiled.")


def stage_table(profiles: Sequence[RunProfile]) -> Table:
    stages = ["preprocess", "workers", "manager", "single_agent"]
    rows = [[p.name, *(_q(p.stages[s]) if s in p.stages else "–" for s in stages)] for p in profiles]
    return Table("table-stages", "Seconds per stage per patient (median [IQR]); one-stage vs two-stage",
                 ["run", *stages], rows)


def length_table(profiles: Sequence[RunProfile]) -> Table:
    rows = [[p.name, b.label, str(b.n), _q(b.runtime_s)] for p in profiles for b in (*p.by_tokens, *p.by_chunks)]
    return Table("table-length", "Runtime per patient by EHR length (median [IQR] seconds)",
                 ["run", "EHR length", "patients", "runtime s"], rows)


def agent_table(roles: Sequence[AgentRole]) -> Table:
    rows = [[r.run, r.agent, "–" if r.patients is None else str(r.patients), str(r.calls), str(r.cache_hits),
             str(r.failed), f"{r.prompt_tokens:,}", f"{r.completion_tokens:,}", f"{r.model_seconds:.1f}"]
            for r in roles]
    return Table("table-agents", "LLM calls per agent role", ["run", "agent", "patients", "calls", "cache hits",
                                                               "failed", "prompt tokens", "completion tokens",
                                                               "model seconds"], rows)


def selection_table(points: Sequence[SelectionPoint]) -> Table:
    rows = [[p.name, p.llm_model or "–", p.variant or "–", f"{p.auroc:.3f}", f"{p.median_runtime_s:.3g}",
             f"{p.median_cost_usd:.5f}", "yes" if p.on_pareto_front else "no"] for p in points]
    return Table("table-selection", "Model selection: AUROC vs median runtime vs median cost per patient",
                 ["run", "LLM", "variant", "AUROC", "median runtime s", "median cost $", "Pareto front"], rows,
                 note="A run is on the Pareto front when no other run has a higher-or-equal AUROC, a lower-or-equal "
                      "runtime and a lower-or-equal cost, with at least one strictly better. Agents: median wall time "
                      "and cost per patient from their prediction files; baselines (focus cohort): fit + scoring "
                      "time divided by the rows they scored, no token cost. Agents' AUROCs on a handful of "
                      "patients carry wide uncertainty (see their n in the model table).")
