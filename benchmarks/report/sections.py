"""Turn a report's results into HTML sections (tables, figures, plain-words paragraphs) and write the files.

Every core section is present in every report; a section without data says why (no prediction file given, no
budget asked...) instead of disappearing. Each core section has one builder below (``_overview``...), listed in
`CORE_SECTIONS`. **Adding a section** (a judge, population insights...): write a function
``ReportData -> Section`` in its own module and pass it to ``reproduce(..., extra_sections=[...])`` (or to
`build_sections` as ``extra``); extra sections go before the commands-and-settings section, in the order given.

Caveats that change how every number reads (the agents ran on the embedded test model; agent runs on too few
patients) are `notices` shown at the very top.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vista.shared.atomic import atomic_write_bytes, atomic_write_text
from baselines.metrics import MIN_CASES, too_few_text
from trajonco.report_document import Figure, Section, Table
from benchmarks.report import figures, tables
from benchmarks.report.evidence import PARAGRAPH as EVIDENCE_PARAGRAPH, evidence_table
from benchmarks.report.html import render_html
from benchmarks.report.palette import Palette
from benchmarks.report.record_length import imbalance_sentence
from benchmarks.report.report_data import ReportData
from benchmarks.report.results import ModelResult, UnscoredRun
from vista.shared.llm.config import EMBEDDED_MODEL_NAME

SECTION_IDS = ("overview", "characteristics", "record-length", "auroc", "paired", "auprc", "models", "roc-pr",
               "truncation", "time-gap", "stratified", "agents", "latency-cost", "model-selection", "realism",
               "provenance")
"""Ids of the report's core sections, in order (anchors in report.html); extra sections come before the last."""


@dataclass(frozen=True)
class Context:
    """What every section builder reads: the data, the report's palette and the figure folder."""

    data: ReportData
    palette: Palette
    figures: Path

    def figure(self, figure_id: str, caption: str, png: bytes) -> Figure:
        atomic_write_bytes(self.figures / f"{figure_id}.png", png)  # private, like every report file (vista.shared.atomic)
        return Figure(figure_id, caption, png)


def report_palette(data: ReportData) -> Palette:
    """One colour per model name shown anywhere in the report (baselines fixed, then the others in order)."""
    r = data.results
    names = [*(x.model for x in r.results), *(p.name for p in r.profiles), *(p.name for p in r.selection),
             *(x.model for s in r.strata for x in s.results), *(p.model for p in r.truncation),
             *(p.model for p in r.gaps), *(p.model for p in [*r.agent_truncation, *r.agent_gaps]),
             *(c.comparator for c in r.paired), *(c.agent for c in r.paired)]
    return Palette(names)


def ran_embedded(run: ModelResult | UnscoredRun) -> bool:
    """Whether a prediction file's scores came from the embedded model: its recorded ``backend`` says so (files
    from before the column existed: its model name is the embedded model's)."""
    if run.llm_backend is not None:
        return "embedded" in run.llm_backend.split(", ")
    return bool(run.llm_model) and EMBEDDED_MODEL_NAME in (run.llm_model or "")


def _answered_by(run: ModelResult | UnscoredRun) -> str:
    """'M (openai, served as X)' — the model asked for, and who answered when the file records it."""
    if not run.llm_model:
        return "not recorded in the file"
    who = [run.llm_backend] if run.llm_backend else []
    if run.served_model and run.served_model != run.llm_model:
        who.append(f"served as {run.served_model}")
    return run.llm_model + (f" ({', '.join(who)})" if who else "")


def notices(data: ReportData) -> list[str]:
    """The caveats shown at the top of the report (none when nothing needs saying)."""
    r = data.results
    out = []
    runs = [(x.model, x, x.evaluation.n) for x in r.results if x.kind == "prediction_file"]
    runs += [(u.model, u, u.n_scored) for u in r.unscored]
    embedded = [(name, run, n) for name, run, n in runs if ran_embedded(run)]
    if embedded:
        served = sorted({run.served_model for _, run, _ in embedded if run.served_model}) or [EMBEDDED_MODEL_NAME]
        out.append("Read the agents' numbers as a test of the machinery only: they come from the embedded test model "
                   f"{', '.join(served)} (SmolLM2, 135M parameters, ~100 MB, run in process) on "
                   + ", ".join(f"{n} patients ({name})" for name, _, n in embedded)
                   + ". It proves the pipeline runs end to end with a real model; its clinical judgement is poor and "
                   "says nothing about the method's accuracy. For a real comparison, run the agents against a capable "
                   "endpoint (--base-url ... --model ...) on more patients.")
    small = [x for x in r.results if x.too_few]
    if small:
        out.append(f"Results on fewer than {MIN_CASES} cases or controls — "
                   + ", ".join(f"{x.model} on {x.cohort} ({too_few_text(*x.counts())})" for x in small)
                   + " — show 'too few' instead of an AUROC, AUPRC or CI wherever they appear: never ranked as best, "
                   "never drawn in a figure, never on a Pareto front.")
    return out


def left_out(items: Sequence[tuple[str, int, int]]) -> str:
    """The caption sentence naming what a figure leaves out for too few cases or controls ('' when nothing).

    >>> left_out([("knn on lung", 2, 2)])
    ' Not drawn (fewer than 10 cases or controls): knn on lung, too few (n=2 cases, 2 controls).'
    """
    if not items:
        return ""
    return (f" Not drawn (fewer than {MIN_CASES} cases or controls): "
            + "; ".join(f"{name}, {too_few_text(n1, n0)}" for name, n1, n0 in dict.fromkeys(items)) + ".")


def _resamples(ctx: Context) -> str:
    return f"{ctx.data.results.settings.n_resamples:,} bootstrap resamples"


def _llm_sentence(data: ReportData) -> str:
    files = [r for r in data.results.results if r.kind == "prediction_file"]
    unscored = data.results.unscored
    if not files and not unscored:
        return "No LLM prediction file was given or produced, so no agent appears in the tables."
    described = [f"{r.model} on {r.cohort}: LLM {_answered_by(r)} ({r.evaluation.n} "
                 f"patients scored: {r.evaluation.n_positive} cases, {r.evaluation.n_negative} controls)" for r in files]
    described += [f"{u.model} on {u.cohort}: LLM {_answered_by(u)} ({u.n_scored} patients "
                  f"scored, not evaluated: {u.reason})" for u in unscored]
    return f"The agents' numbers were produced by these LLM runs — {'; '.join(described)}."


# ------------------------------------------------------------------------------------------------ core sections
def _overview(ctx: Context) -> Section:
    r, s = ctx.data.results, ctx.data.results.settings
    size = (f"the synthetic dataset ({r.dataset.subjects:,} subjects, seed {s.synth_seed}, "
            f"{'generated in ' + format(r.dataset.seconds, '.0f') + ' s' if r.dataset.generated_now else 'reused'})"
            if r.dataset.synthetic else f"the MEDS dataset {r.dataset.root}")
    return Section("overview", "Overview", paragraphs=[
        f"Reproduction of the TrajOnco benchmark on {size}: {len(r.cohorts)} cohort(s) built and scored"
        f"{', ' + str(len(r.skips)) + ' skipped (listed below)' if r.skips else ''}, baselines "
        f"{', '.join(s.baselines)} fitted on each training cohort (train + tuning splits, tuned on an 8:2 split) and "
        "scored on the matched held-out test cohort.", _llm_sentence(ctx.data),
        f"Total run time {r.total_seconds:.0f} s{' (quick mode)' if s.quick else ''}.", r.realism.paragraph])


def _characteristics(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("characteristics", "Cohort characteristics (Table 1)",
                      tables=[tables.characteristics_table(r.characteristics)])
    if r.characteristics:
        section.paragraphs.append(
            "Record length differs between cases and controls — "
            + " ".join(imbalance_sentence(c, r.results) for c in r.characteristics)
            + " Any model can exploit this utilisation signal; the record-length baselines below measure it.")
    return section


def _record_length(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("record-length", "Record-length baselines (how much signal is utilisation)", paragraphs=[
        "Each patient scored by the length of the record alone — the XML timeline's token count, or the number of "
        "visit days before the prediction time — evaluated like a model. A model whose AUROC is not above these "
        "reads little beyond how much care the patient received."])
    if any(x.kind == "record_length" for x in r.results):
        section.tables.append(tables.record_length_table(r.results, [c.cohort for c in r.cohorts], r.characteristics))
    else:
        section.paragraphs.append("No record-length score was computed (no cohort built).")
    return section


def _auroc(ctx: Context) -> Section:
    r = ctx.data.results
    cohorts = [c.cohort for c in r.cohorts]
    section = Section("auroc", "AUROC of every model on every cohort",
                      tables=[tables.metric_table(r.results, cohorts, "auroc", "table-auroc")])
    shown, small = figures.drawable(r.results)
    caption = left_out([(f"{x.model} on {x.cohort}", *x.counts()) for x in small])
    if shown:
        section.figures.append(ctx.figure("fig-auroc", f"AUROC (95% CI, {_resamples(ctx)}) per cohort and model, "
                                          "n = cases/controls." + caption,
                                          figures.auroc_overview(r.results, cohorts, ctx.palette)))
    elif r.results:
        section.paragraphs.append("No AUROC figure: every result stands on too few patients." + caption)
    return section


def _paired(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("paired", "Agents vs baselines, and model choice, on the same patients", paragraphs=[
        "An agent run scores a subset of a test cohort; the baselines score all of it. Here every baseline and "
        "record-length score is re-scored on exactly the agent's patients, and the AUROC difference gets a paired "
        "bootstrap CI. Model choice: every two prediction files of a cohort (two LLMs, two variants) are compared "
        "the same way on the patients both scored (comparator kind prediction_file)."])
    if r.paired:
        section.tables.append(tables.paired_table(r.paired))
        with_ci = [c for c in r.paired if c.difference is not None]
        shown, small = figures.drawable(with_ci)
        caption = left_out([(f"{c.agent} vs {c.comparator}", c.n_cases, c.n_controls) for c in small])
        if shown:
            section.figures.append(ctx.figure("fig-paired", "AUROC difference agent − comparator on the agent's "
                                              f"patients (paired 95% CI, {_resamples(ctx)}), n = cases/controls."
                                              + caption, figures.paired_plot(r.paired, ctx.palette)))
        elif with_ci:
            section.paragraphs.append("No difference figure: every comparison stands on too few patients." + caption)
    else:
        section.paragraphs.append("No evaluated agent run to compare (no prediction file, or too few patients for an "
                                  "AUROC).")
    return section


def _auprc(ctx: Context) -> Section:
    r = ctx.data.results
    return Section("auprc", "AUPRC of every model on every cohort", tables=[
        tables.metric_table(r.results, [c.cohort for c in r.cohorts], "auprc", "table-auprc")])


def _models(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("models", "Every model run and cohort", tables=[
        tables.model_table(r.results), tables.cohort_info_table([*r.cohorts, *r.gap_cohorts], r.skips)])
    if r.unscored:
        section.tables.insert(1, tables.unscored_table(r.unscored))
    return section


def _roc_pr(ctx: Context) -> Section:
    r, s = ctx.data.results, ctx.data.results.settings
    focus = r.focus_cohort if any(c.cohort == r.focus_cohort for c in r.cohorts) else None
    focus_results = [x for x in r.results if x.cohort == focus]
    section = Section("roc-pr", f"ROC and precision–recall curves — {focus or s.focus_cohort}")
    shown, small = figures.drawable(focus_results)
    caption = left_out([(x.model, *x.counts()) for x in small])
    if shown:
        section.figures.append(ctx.figure("fig-roc-pr", f"ROC and PR curves of every model on the {focus} test "
                                          "cohort (prediction-file models on the rows they scored)." + caption,
                                          figures.roc_pr(focus_results, focus, ctx.palette)))
    elif focus_results:
        section.paragraphs.append("No ROC/PR figure: every model stands on too few patients." + caption)
    else:
        section.paragraphs.append(f"The focus cohort {s.focus_cohort} was not built (see the cohort table).")
    return section


def _truncation(ctx: Context) -> Section:
    r, s = ctx.data.results, ctx.data.results.settings
    section = Section("truncation", f"Sensitivity: trajectory length — {r.truncation_cohort or s.focus_cohort}",
                      paragraphs=[
        "Method: every patient's XML timeline (events strictly before the prediction time) is left-truncated with "
        "vista.shared.timeline.truncate_left to the newest whole timestamps that fit N tokens together with the patient "
        "root (demographics); a baseline then sees only the MEDS rows at or after the first kept timestamp (plus "
        "static and birth rows). Training and test windows are truncated alike and each baseline is refitted per "
        "budget, so the curve shows the signal available in the last N tokens of history. Budgets larger than "
        "every timeline give the whole record."])
    section.paragraphs.append(_agent_sensitivity_sentence(ctx, r.agent_truncation, "truncation"))
    if r.truncation or r.agent_truncation:
        section.tables.append(tables.truncation_table(r.truncation, r.agent_truncation))
        caption, drawn = _sensitivity_caption(r.truncation, r.agent_truncation,
                                              lambda p: "whole record" if p.budget_tokens is None
                                              else f"{p.budget_tokens:,} tokens")
        if drawn:
            section.figures.append(ctx.figure("fig-truncation", f"AUROC (95% CI, {_resamples(ctx)}) vs "
                                              "left-truncation budget (n in the legend; agents: squares, n beside "
                                              "each point)." + caption,
                                              figures.truncation_plot(r.truncation, r.truncation_cohort
                                                                      or s.focus_cohort, ctx.palette,
                                                                      r.agent_truncation)))
        else:
            section.paragraphs.append("No trajectory-length figure: nothing here is a measurement on enough "
                                      "patients." + caption)
    else:
        section.paragraphs.append("No trajectory-length analysis was run (no budget asked, or the focus cohort "
                                  "was not built).")
    return section


def _time_gap(ctx: Context) -> Section:
    r, s = ctx.data.results, ctx.data.results.settings
    section = Section("time-gap", "Sensitivity: time gap between prediction and diagnosis", paragraphs=[
        f"Each cohort in {', '.join(s.gap_cohorts) or '(none)'} is rebuilt with gaps of "
        f"{', '.join(f'{y:g}' for y in s.gap_years) or '(none)'} years (training cases capped at "
        f"{s.gap_train_cases_cap}) and {', '.join(s.gap_models)} refitted on each."])
    section.paragraphs.append(_agent_sensitivity_sentence(ctx, r.agent_gaps, "gap"))
    if r.gaps or r.agent_gaps:
        section.tables.append(tables.gap_table(r.gaps, r.agent_gaps))
        caption, drawn = _sensitivity_caption(r.gaps, r.agent_gaps, lambda p: f"{p.gap_years or 0:g} y ({p.cohort})")
        if drawn:
            section.figures.append(ctx.figure("fig-gap", f"AUROC (95% CI, {_resamples(ctx)}) vs gap, one panel per "
                                              "cohort (labels: cases/controls; agents: squares)." + caption,
                                              figures.gap_plot(r.gaps, ctx.palette, r.agent_gaps)))
        else:
            section.paragraphs.append("No time-gap figure: nothing here is a measurement on enough patients."
                                      + caption)
    else:
        section.paragraphs.append("No time-gap analysis was run.")
    return section


def _sensitivity_caption(points, agent_points, where) -> tuple[str, bool]:
    """What a sensitivity figure leaves out (too few patients; reused runs) and whether anything is left to draw."""
    small = [(f"{p.model} at {where(p)}", *p.counts()) for p in [*points, *agent_points] if p.too_few]
    caption = left_out(small)
    reused = [p for p in points if getattr(p, "same_input_as", None) is not None and not p.too_few]
    if reused:
        caption += (f" {len(reused)} baseline point(s) have exactly the input of another budget (every timeline fits "
                    "both) and reuse its fit: not drawn as separate measurements.")
    measured = figures.measured_agent_points(agent_points)
    repeats = [p for p in agent_points if not p.too_few and p.auroc is not None and p not in measured]
    if repeats:
        caption += (f" {len(repeats)} agent point(s) reuse a run already drawn (the same prediction file): drawn "
                    "once, and no line joins fewer than two distinct runs.")
    drawn = bool(measured) or any(not p.too_few and getattr(p, "same_input_as", None) is None for p in points)
    return caption, drawn


def _agent_sensitivity_sentence(ctx: Context, points, analysis: str) -> str:
    """What the agents did in a sensitivity analysis — or why they are absent (never silently)."""
    s = ctx.data.results.settings
    what = "truncation budget" if analysis == "truncation" else "gap"
    if points:
        run = sum(not p.reused_full_run for p in points)
        reused = [p for p in points if p.reused_full_run]
        n = max(p.n_cases for p in points), max(p.n_controls for p in points)
        return (f"Agents: {points[0].model} on {n[0]} case(s) and {n[1]} control(s) of their subset, once per "
                f"{what} ({run} run(s) of jobs.predict"
                + (f"; {len(reused)} point(s) reuse the whole-record run because they are identical to it" if reused
                   else "")
                + f"). With fewer than {MIN_CASES} cases or controls they show 'too few' instead of an AUROC and are "
                "not drawn: such a run shows the analysis runs end to end with the agents, not how they compare with "
                "the baselines."
                + (f" The agents ran at the gaps {', '.join(f'{y:g}' for y in s.agent_gap_years)} y only "
                   "(--agent-gap-years)." if analysis == "gap" and s.agent_gap_years is not None else ""))
    if s.agent_sensitivity == "none" or s.agent_sensitivity_patients == 0:
        return f"Agents: not run per {what} (--agent-sensitivity none or --agent-sensitivity-patients 0)."
    if s.agent_sensitivity not in ("all", analysis):
        return f"Agents: not run per {what} (--agent-sensitivity {s.agent_sensitivity})."
    return (f"Agents: not run per {what} (no agent run in this report, no {what} asked, or the focus cohort was not "
            "rebuilt for it).")


def _stratified(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("stratified", "Stratified results", paragraphs=[
        f"Strata with fewer than {MIN_CASES} cases or controls show 'too few (n=…)' instead of an AUROC and a "
        "confidence interval."])
    for item in r.strata:
        section.tables.append(tables.strata_table(item.cohort, item.results))
        if item.results:
            section.figures.append(ctx.figure(f"fig-strata-{item.cohort}", f"AUROC (95% CI, {_resamples(ctx)}) "
                                              f"within strata — {item.cohort} (labels: cases/controls; legend: "
                                              "models; strata on too few patients say 'too few' instead of a "
                                              "point)",
                                              figures.strata_plot(item.results, item.cohort, ctx.palette)))
    if not r.strata:
        section.paragraphs.append("No stratified cohort was built.")
    return section


def _agents(ctx: Context) -> Section:
    r, s = ctx.data.results, ctx.data.results.settings
    section = Section("agents", "The agents (LLM) in this report", paragraphs=[_llm_sentence(ctx.data)])
    if r.agent_request is not None:
        q = r.agent_request
        section.paragraphs.append(
            f"This run assessed a seeded subset of the {q.cohort} test cohort ({q.labels}) with the variants "
            f"{', '.join(q.variants)}, horizon {q.horizon_days} days, preferring patients whose timeline has at most "
            f"{s.agent_max_tokens} tokens (the shortest ones otherwise) so that the embedded model finishes in "
            "minutes. With so few patients the agents' AUROC intervals are wide: they prove the pipeline end to end, "
            "not the model's accuracy; give larger prediction files (--predictions) for a real comparison.")
    if (flagged := evidence_table(ctx.data.predictions)) is not None:
        section.paragraphs.append(EVIDENCE_PARAGRAPH)
        section.tables.append(flagged)
    return section


def _latency(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("latency-cost", "Latency and cost profile")
    if r.profiles:
        per_patient = {}
        for loaded in ctx.data.predictions:
            frame = loaded.frame
            if "latency_total_s" not in frame.columns:
                continue
            fresh = frame.filter((frame["cache_hits"] == 0) & frame["latency_total_s"].is_not_null())
            per_patient[loaded.name] = (fresh["timeline_tokens"].to_numpy().astype(np.float64),
                                        fresh["n_chunks"].to_numpy().astype(np.float64),
                                        fresh["latency_total_s"].to_numpy().astype(np.float64))
        section.tables += [tables.profile_table(r.profiles), tables.stage_table(r.profiles),
                           tables.length_table(r.profiles)]
        section.figures.append(ctx.figure("fig-latency", "Runtime per patient by EHR length and per stage (n: "
                                          "profiled patients)", figures.latency_plot(r.profiles, per_patient,
                                                                                     ctx.palette)))
        for p in r.profiles:
            section.paragraphs += [f"{p.name}: {note}" for note in p.notes]
    else:
        section.paragraphs.append("No prediction file with the agents' usage and latency columns (jobs.predict "
                                  "output) was given or produced.")
    if r.agent_roles:
        section.tables.append(tables.agent_table(r.agent_roles))
    return section


def _selection(ctx: Context) -> Section:
    r = ctx.data.results
    section = Section("model-selection", "Model selection: AUROC vs runtime vs cost")
    if r.selection:
        section.tables.append(tables.selection_table(r.selection))
        shown, small = figures.drawable(r.selection)
        caption = left_out([(p.name, *p.counts()) for p in small])
        if shown:
            section.figures.append(ctx.figure("fig-selection", f"AUROC (95% CI, {_resamples(ctx)}) vs median "
                                              "runtime (marker area ∝ median cost; dashed: Pareto front)." + caption,
                                              figures.selection_plot(r.selection, ctx.palette)))
        else:
            section.paragraphs.append("No model-selection figure: every run stands on too few patients." + caption)
    else:
        section.paragraphs.append("No profiled and evaluated LLM run to compare.")
    return section


def _realism(ctx: Context) -> Section:
    return Section("realism", "Are the baselines' AUROCs realistic?",
                   paragraphs=[ctx.data.results.realism.paragraph], css_class="verdict")


def _provenance(ctx: Context) -> Section:
    r = ctx.data.results
    timings = Table("table-timings", "Where the time went", ["step", "seconds"],
                    [[t.step, f"{t.seconds:.1f}"] for t in r.timings] + [["total", f"{r.total_seconds:.1f}"]])
    return Section("provenance", "Commands and settings", paragraphs=[
        "Every number above was computed by this run. These commands produced them (the first reproduces the whole "
        "report; the others are what it ran for the agents):"], code=list(r.commands),
        tables=[timings, tables.settings_table(r.settings)])


CORE_SECTIONS: tuple[Callable[[Context], Section], ...] = (
    _overview, _characteristics, _record_length, _auroc, _paired, _auprc, _models, _roc_pr, _truncation, _time_gap,
    _stratified, _agents, _latency, _selection, _realism, _provenance)


def build_sections(data: ReportData, extra: Sequence[Section] = ()) -> list[Section]:
    """The core sections in `SECTION_IDS` order, with ``extra`` sections before the last (commands and settings)."""
    ctx = Context(data, report_palette(data), data.results.settings.out / "figures")
    core = [build(ctx) for build in CORE_SECTIONS]
    assert tuple(x.id for x in core) == SECTION_IDS
    ids = [x.id for x in [*core, *extra]]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"report sections with the same id: {repeated}")
    return [*core[:-1], *extra, core[-1]]


def write_report(data: ReportData, sections: list[Section]) -> tuple[Path, Path]:
    """``report.html`` and ``results.json`` under the report folder."""
    out = data.results.settings.out
    html_path, json_path = out / "report.html", out / "results.json"
    atomic_write_text(html_path, render_html("TrajOnco benchmark reproduction", sections,
                                             subtitle=f"Command: {data.results.commands[0]}.", notices=notices(data)))
    atomic_write_text(json_path, data.results.model_dump_json(indent=1))
    return html_path, json_path
