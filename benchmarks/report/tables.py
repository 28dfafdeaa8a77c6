"""The report's tables, formatted from result models (every cell is a number the run computed).

>>> from baselines import Interval
>>> i = Interval(value=0.7912, lower=0.75, upper=0.83, level=0.95, n_resamples=10, method="percentile", seed=0)
>>> ci(i)
'0.791 (0.750–0.830)'
>>> ci_n(i, 43, 43), ci_n(i, 2, 2)
('0.791 (0.750–0.830) n=43/43', 'too few (n=2 cases, 2 controls)')
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from baselines import Interval, StratumResult
from baselines.metrics import MIN_CASES, too_few, too_few_text
from trajonco.report_document import Table
from benchmarks.report.profile import AgentRole, RunProfile, SelectionPoint
from benchmarks.report.results import (
    AgentSensitivityPoint,
    CohortCharacteristics,
    CohortInfo,
    CohortSkip,
    GapPoint,
    GroupCharacteristics,
    ModelResult,
    PairedComparison,
    TruncationPoint,
    UnscoredRun,
)


def ci(interval: Interval | None) -> str:
    """``value (lower–upper)`` with three decimals, '–' when missing."""
    if interval is None:
        return "–"
    return f"{interval.value:.3f} ({interval.lower:.3f}–{interval.upper:.3f})"


def ci_n(interval: Interval | None, n_positive: int, n_negative: int) -> str:
    """`ci` followed by the cases/controls it stands on; below `baselines.metrics.MIN_CASES` cases or controls,
    `baselines.metrics.too_few_text` instead of any number."""
    if too_few(n_positive, n_negative):
        return too_few_text(n_positive, n_negative)
    return f"{ci(interval)} n={n_positive}/{n_negative}"


def ci_or_too_few(interval: Interval | None, n_positive: int, n_negative: int) -> str:
    """`ci` alone (the counts stand in their own column), or `baselines.metrics.too_few_text`."""
    return too_few_text(n_positive, n_negative) if too_few(n_positive, n_negative) else ci(interval)


TOO_FEW_NOTE = ("'too few (n=… cases, … controls)' stands in place of any AUROC, AUPRC, CI or difference computed "
                f"on fewer than {MIN_CASES} cases or fewer than {MIN_CASES} controls (results.json keeps the raw "
                "value under too_few_raw): at that size a number such as 1.000 (1.000–1.000) is an artefact, not a "
                "finding.")


def _resamples(items: Sequence[object]) -> str:
    """The bootstrap resamples behind the CIs of ``items`` (results, points, comparisons), as captions say it.

    >>> _resamples([])
    'no'
    """
    counts = sorted({interval.n_resamples for item in items for interval in _intervals(item)})
    return "no" if not counts else " / ".join(f"{n:,}" for n in counts)


def _intervals(item: object) -> list[Interval]:
    found = []
    for name in ("auroc", "auprc", "difference", "auroc_ci", "evaluation"):
        value = getattr(item, name, None)
        if isinstance(value, Interval):
            found.append(value)
        elif value is not None and hasattr(value, "auroc"):
            found += [v for v in (value.auroc, value.auprc) if isinstance(v, Interval)]
    return found


def _paired_numbers(c: PairedComparison) -> list[str]:
    """Agent AUROC, comparator AUROC (same patients, whole cohort) and the difference, or 'too few'."""
    d = c.difference
    small = too_few_text(c.n_cases, c.n_controls)
    whole = ("–" if c.comparator_auroc_whole is None else
             too_few_text(c.comparator_whole_cases or 0, c.comparator_whole_controls or 0) if c.whole_too_few
             else f"{c.comparator_auroc_whole:.3f}")
    if c.too_few:
        return [small, small if c.comparator_auroc is not None else "–", whole, small if d is not None else "–"]
    return [f"{c.agent_auroc:.3f}", "–" if c.comparator_auroc is None else f"{c.comparator_auroc:.3f}", whole,
            "–" if d is None else f"{d.value:+.3f} ({d.lower:+.3f} to {d.upper:+.3f})"]


def _truncation_cell(p: TruncationPoint) -> str:
    if p.too_few:
        return too_few_text(p.n_cases, p.n_controls)
    if p.same_input_as is not None:
        return f"same input as {'the whole record' if p.same_input_as == 0 else format(p.same_input_as, ',')}"
    return ci(p.auroc)


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
    samples = sorted({c.token_sample_per_role for c in items if c.token_sample_per_role is not None})
    which = ("every test patient" if not samples else
             f"a seeded sample of up to {', '.join(map(str, samples))} patients per cohort and role (--token-sample)")
    return Table("table-characteristics", "Cohort characteristics of the test cohorts (median [IQR] or n (%))",
                 columns, rows, note=f"EHR span: first to last clinical event before the prediction time. XML tokens: "
                 f"tiktoken cl100k_base over the rendered timeline of {which}; the last column says how many.")


def _characteristics_row(cohort: str, role: str, g: GroupCharacteristics, ethnicities: list[str],
                         races: list[str]) -> list[str]:
    return ([cohort, role, str(g.n), g.age_years.text(), _share(g.sex.get("F", 0), g.n)]
            + [_share(g.ethnicity.get(e, 0), g.n) for e in ethnicities]
            + [_share(g.race.get(r, 0), g.n) for r in races]
            + [g.ehr_span_years.text(), g.xml_tokens.text(thousands=True), str(g.xml_tokens.n)])


def metric_table(results: Sequence[ModelResult], cohorts: Sequence[str], metric: str, table_id: str) -> Table:
    """AUROC or AUPRC with 95% CI and n (cases/controls) in every cell: one row per cohort, one column per model."""
    models = list(dict.fromkeys(r.model for r in results))
    by = {(r.cohort, r.model): r for r in results}
    n = {r.cohort: (r.evaluation.n_positive, r.evaluation.n_negative) for r in results if r.kind == "baseline"}

    def cell(cohort: str, model: str) -> str:
        r = by.get((cohort, model))
        return "–" if r is None else ci_n(getattr(r.evaluation, metric), r.evaluation.n_positive,
                                          r.evaluation.n_negative)

    rows = [[c, f"{n[c][0]} / {n[c][1]}" if c in n else "–", *(cell(c, m) for m in models)] for c in cohorts]
    label = metric.upper()
    note = (f"95% CIs: stratified bootstrap ({_resamples(results)} resamples; cases and controls resampled "
            "separately); n = cases/controls the value stands on. " + TOO_FEW_NOTE + " Record-length columns score "
            "each patient by the length of the record alone.")
    if metric == "auprc":
        note += " Under 1:1 matching the chance level of AUPRC is 0.5."
    return Table(table_id, f"{label} (95% CI) on the test cohorts", ["cohort", "cases / controls", *models], rows,
                 note=note)


def paired_table(comparisons: Sequence[PairedComparison]) -> Table:
    """Each agent run against each comparator on the agent's own patients, with the paired difference."""
    rows = []
    for c in comparisons:
        rows.append([c.cohort, c.agent, c.comparator, c.comparator_kind.replace("_", " "),
                     f"{c.n_cases} / {c.n_controls}", *_paired_numbers(c), c.note or ""])
    return Table("table-paired", "Agents vs baselines on the same patients (AUROC; difference with paired 95% CI)",
                 ["cohort", "agent run", "comparator", "comparator kind", "cases / controls", "agent AUROC",
                  "comparator AUROC, same patients", "comparator AUROC, whole test cohort",
                  "difference agent − comparator", "note"], rows,
                 note="The comparator is re-scored on exactly the patients the agent run scored; the CI of the "
                      "difference resamples the same cases and controls for both models (paired, stratified "
                      f"percentile bootstrap, {_resamples(comparisons)} resamples). A CI that contains 0 means no "
                      "detectable difference. " + TOO_FEW_NOTE)


def record_length_table(results: Sequence[ModelResult], cohorts: Sequence[str],
                        characteristics: Sequence[CohortCharacteristics]) -> Table:
    """Per cohort: AUROC of the token count and of the visit count alone, beside the best baseline and Table 1."""
    lengths = list(dict.fromkeys(r.model for r in results if r.kind == "record_length"))
    by = {(r.cohort, r.model): r for r in results}
    table1 = {c.cohort: c for c in characteristics}
    rows = []
    for cohort in cohorts:
        baselines = [r for r in results if r.cohort == cohort and r.kind == "baseline"]
        best = max(baselines, key=lambda r: r.evaluation.auroc.value, default=None)
        c = table1.get(cohort)
        rows.append([cohort, *(ci_n(r.evaluation.auroc, r.evaluation.n_positive, r.evaluation.n_negative)
                               if r is not None else "–" for r in (by.get((cohort, m)) for m in lengths)),
                     f"{best.model} {ci_n(best.evaluation.auroc, *best.counts())}" if best else "–",
                     f"{c.cases.xml_tokens.text(thousands=True)} vs {c.controls.xml_tokens.text(thousands=True)}"
                     if c else "–",
                     f"{c.cases.ehr_span_years.text()} vs {c.controls.ehr_span_years.text()}" if c else "–"])
    return Table("table-record-length", "Record-length baselines: AUROC of the record's length alone",
                 ["cohort", *lengths, "best baseline", "XML tokens, cases vs controls", "EHR span y, cases vs controls"],
                 rows, note="XML tokens: the rendered timeline of every test patient (the Table 1 column); visits: "
                            "distinct visit days before the prediction time, every test patient. An AUROC well above "
                            "0.5 here is utilisation signal that every model can exploit without reading the clinical "
                            "content. " + TOO_FEW_NOTE)


def model_table(results: Sequence[ModelResult]) -> Table:
    """Every model run: what produced it, rows scored, AUROC/AUPRC, threshold metrics, fit time."""
    rows = []
    for r in results:
        e = r.evaluation
        youden = e.at_youden
        small = r.too_few  # threshold metrics and Brier of a handful of patients are as unstable as their AUROC
        rows.append([r.cohort, r.model, r.kind.replace("_", " "), r.llm_model or "–", str(e.n),
                     f"{e.n_positive} / {e.n_negative}", str(e.n_missing + e.n_failed),
                     ci_or_too_few(e.auroc, e.n_positive, e.n_negative),
                     ci_or_too_few(e.auprc, e.n_positive, e.n_negative),
                     f"{youden.sensitivity:.2f}" if youden.sensitivity is not None and not small else "–",
                     f"{youden.specificity:.2f}" if youden.specificity is not None and not small else "–",
                     f"{e.calibration.brier_score:.3f}" if e.calibration and not small else "–",
                     f"{r.seconds:.1f}" if r.kind == "baseline" else "–",
                     "; ".join(e.notes) or ""])
    return Table("table-models", "Every model run (LLM = the model that produced a prediction file's scores)",
                 ["cohort", "model", "kind", "LLM", "rows scored", "cases / controls", "rows without score", "AUROC",
                  "AUPRC",
                  "sensitivity @Youden", "specificity @Youden", "Brier", "fit + score s", "notes"], rows,
                 note=f"AUROC/AUPRC: 95% stratified bootstrap CI ({_resamples(results)} resamples). " + TOO_FEW_NOTE)


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


def _agent_cell(point: AgentSensitivityPoint | None) -> str:
    if point is None:
        return "–"
    return point.text() + (" (= whole record, run reused)" if point.reused_full_run and point.budget_tokens else "")


AGENT_NOTE = ("Agent columns/rows: the first agent variant on a few patients of its subset (n = cases/controls "
              f"scored); below {MIN_CASES} cases or controls they say 'too few (n=…)' — a check that the analysis "
              "runs, not an estimate to compare with the baselines'.")


def truncation_table(points: Sequence[TruncationPoint], agent_points: Sequence[AgentSensitivityPoint] = ()) -> Table:
    """Rows: budgets (whole record last); columns: each baseline, then each agent run (with its n)."""
    models = list(dict.fromkeys(p.model for p in points))
    agents = list(dict.fromkeys(p.model for p in agent_points))
    budgets = sorted({p.budget_tokens for p in [*points, *agent_points] if p.budget_tokens is not None}) + [None]
    by = {(p.budget_tokens, p.model): p for p in points}
    agent_by = {(p.budget_tokens, p.model): p for p in agent_points}
    rows = []
    for b in budgets:
        any_point = next((by[(b, m)] for m in models if (b, m) in by), None)
        if any_point is None and not any((b, a) in agent_by for a in agents):
            continue
        shape = ([f"{100 * any_point.share_truncated:.0f}%", f"{any_point.median_kept_tokens:,.0f}",
                  f"{any_point.median_history_years:.2f}"] if any_point is not None else ["–", "–", "–"])
        rows.append([f"{b:,}" if b is not None else "whole record", *shape,
                     *(_truncation_cell(by[(b, m)]) if (b, m) in by else "–" for m in models),
                     *(_agent_cell(agent_by.get((b, a))) for a in agents)])
    note = (f"95% CIs: stratified bootstrap ({_resamples(points)} resamples). Cells marked 'same input as …' hold "
            "the fit of that budget: every timeline fits both budgets, so the input windows are identical and nothing "
            "new was measured. " + TOO_FEW_NOTE)
    if agent_points:
        longest = max(p.longest_timeline_tokens for p in agent_points)
        note += (" " + AGENT_NOTE + f" The agents' patients have at most {longest:,} tokens: budgets at or above "
                 "that are identical to the whole record, so the whole-record run's file is reused there instead of "
                 "running the agents again. The first three columns describe the baselines' test patients.")
    return Table("table-truncation", "AUROC (95% CI) with inputs left-truncated to a token budget",
                 ["budget (tokens)", "test patients truncated", "median tokens kept", "median history kept, y",
                  *models, *(f"{a} (agents)" for a in agents)], rows, note=note)


def gap_table(points: Sequence[GapPoint], agent_points: Sequence[AgentSensitivityPoint] = ()) -> Table:
    """One row per cohort and model (baselines, then agent runs with their n), one column per gap."""
    gaps = sorted({p.gap_years for p in points} | {p.gap_years for p in agent_points if p.gap_years is not None})
    keys = list(dict.fromkeys((p.cohort, p.model) for p in points))
    by = {(p.cohort, p.model, p.gap_years): p for p in points}
    rows = [[c, m, *(ci_n(by[(c, m, g)].auroc, by[(c, m, g)].n_cases, by[(c, m, g)].n_controls)
                     if (c, m, g) in by else "–" for g in gaps)] for c, m in keys]
    agent_by = {(p.cohort, p.model, p.gap_years): p for p in agent_points}
    for c, m in dict.fromkeys((p.cohort, p.model) for p in agent_points):
        rows.append([c, f"{m} (agents)", *(_agent_cell(agent_by.get((c, m, g))) for g in gaps)])
    note = ("Each gap rebuilds the cohort (cases: index − gap; controls: a random visit date as index), refits the "
            f"model on the rebuilt training cohort and scores the rebuilt test cohort. 95% CIs: stratified bootstrap "
            f"({_resamples(points)} resamples). " + TOO_FEW_NOTE)
    if agent_points:
        note += (" " + AGENT_NOTE + " At each gap the agents assess the subset's patients present in the rebuilt "
                 "test cohort (at its prediction times; a short role topped up from it) with --horizon-days = the "
                 "gap; at the cohort's own gap on the same patients the whole-record run is reused.")
    return Table("table-gap", "AUROC (95% CI) by gap between prediction time and diagnosis",
                 ["cohort", "model", *(f"{g:g} y" for g in gaps)], rows, note=note)


def strata_table(cohort: str, results: Sequence[StratumResult]) -> Table:
    rows = [[r.stratifier, r.stratum, r.model, str(r.n_positive), str(r.n_negative),
             *(ci_or_too_few(i, r.n_positive, r.n_negative) if i else too_few_text(r.n_positive, r.n_negative)
               for i in (r.auroc, r.auprc)),
             r.note or ""]
            for r in results]
    return Table(f"table-strata-{cohort}", f"Stratified results — {cohort}",
                 ["stratifier", "stratum", "model", "cases", "controls", "AUROC", "AUPRC", "note"], rows,
                 note="Visit frequency: distinct visit days in the 5 years before the prediction time, in quartiles "
                      "over the cohort. Controls take the cancer (and screening group) of their matched case. "
                      f"95% CIs: stratified bootstrap ({_resamples(results)} resamples). " + TOO_FEW_NOTE)


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
    """Every run of the model-selection view with its AUROC, 95% CI and n (or 'too few'), runtime and cost."""
    rows = [[p.name, p.llm_model or "–", p.variant or "–",
             ci_or_too_few(p.auroc_ci, p.n_positive, p.n_negative) if p.auroc_ci is not None
             else (too_few_text(p.n_positive, p.n_negative) if p.too_few else f"{p.auroc:.3f}"),
             f"{p.n_positive} / {p.n_negative}", f"{p.median_runtime_s:.3g}", f"{p.median_cost_usd:.5f}",
             "no (too few patients)" if p.too_few else "yes" if p.on_pareto_front else "no"] for p in points]
    return Table("table-selection", "Model selection: AUROC (95% CI) vs median runtime vs median cost per patient",
                 ["run", "LLM", "variant", "AUROC (95% CI)", "cases / controls", "median runtime s", "median cost $",
                  "Pareto front"], rows,
                 note="A run is on the Pareto front when no other run has a higher-or-equal AUROC, a lower-or-equal "
                      "runtime and a lower-or-equal cost, with at least one strictly better (the front compares the "
                      "point estimates; overlapping CIs mean the order is not established). CIs: stratified "
                      f"bootstrap ({_resamples(points)} resamples). Agents: median wall time "
                      "and cost per patient from their prediction files; baselines (focus cohort): fit + scoring "
                      "time divided by the rows they scored, no token cost. Runs with fewer than "
                      f"{MIN_CASES} cases or controls are listed with 'too few' instead of an AUROC, never on the "
                      "front and never drawn in the figure.")


def settings_table(settings: BaseModel) -> Table:
    """Every setting as one short row (tuples comma-separated), for a collapsible block instead of raw JSON.

    >>> from benchmarks.report.settings import ReportSettings
    >>> rows = settings_table(ReportSettings(out="out/r", cohorts=("lung",))).rows
    >>> ["cohorts", "lung"] in rows and ["out", "out/r"] in rows
    True
    """
    rows = []
    for name, value in settings.model_dump(mode="json").items():
        if isinstance(value, list):
            text = ", ".join(str(v) if not isinstance(v, dict) else " ".join(f"{k}={w}" for k, w in v.items())
                             for v in value) or "(none)"
        else:
            text = "–" if value is None or value == "" else str(value)
        rows.append([name, text])
    return Table("table-settings", "Report settings (results.json holds them too)", ["setting", "value"], rows,
                 collapsed=True)
