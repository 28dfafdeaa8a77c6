"""Turn a report's results into HTML sections (tables, figures, plain-words paragraphs) and write the files.

Every section is present in every report; a section without data says why (no prediction file given, no
budget asked...) instead of disappearing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.report import figures, tables
from benchmarks.report.html import Figure, Section, Table, render_html
from benchmarks.report.reproduce import ReportData

SECTION_IDS = ("overview", "characteristics", "auroc", "auprc", "models", "roc-pr", "truncation", "time-gap",
               "stratified", "agents", "latency-cost", "model-selection", "realism", "provenance")
"""Ids of the report's sections, in order (anchors in report.html)."""


def _figure(figure_id: str, caption: str, png: bytes, folder: Path) -> Figure:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{figure_id}.png").write_bytes(png)
    return Figure(figure_id, caption, png)


def _llm_sentence(data: ReportData) -> str:
    files = [r for r in data.results.results if r.kind == "prediction_file"]
    unscored = data.results.unscored
    if not files and not unscored:
        return "No LLM prediction file was given or produced, so no agent appears in the tables."
    described = [f"{r.model} on {r.cohort}: LLM {r.llm_model or 'not recorded in the file'} ({r.evaluation.n} "
                 "patients scored)" for r in files]
    described += [f"{u.model} on {u.cohort}: LLM {u.llm_model or 'not recorded in the file'} ({u.n_scored} patients "
                  f"scored, not evaluated: {u.reason})" for u in unscored]
    return f"The agents' numbers were produced by these LLM runs — {'; '.join(described)}."


def build_sections(data: ReportData) -> list[Section]:
    r = data.results
    s = r.settings
    figs = s.out / "figures"
    cohorts = [c.cohort for c in r.cohorts]
    sections: list[Section] = []

    size = (f"the synthetic dataset ({r.dataset.subjects:,} subjects, seed {s.synth_seed}, "
            f"{'generated in ' + format(r.dataset.seconds, '.0f') + ' s' if r.dataset.generated_now else 'reused'})"
            if r.dataset.synthetic else f"the MEDS dataset {r.dataset.root}")
    sections.append(Section("overview", "Overview", paragraphs=[
        f"Reproduction of the TrajOnco benchmark on {size}: {len(r.cohorts)} cohort(s) built and scored"
        f"{', ' + str(len(r.skips)) + ' skipped (listed below)' if r.skips else ''}, baselines "
        f"{', '.join(s.baselines)} fitted on each training cohort (train + tuning splits, tuned on an 8:2 split) and "
        "scored on the matched held-out test cohort.", _llm_sentence(data),
        f"Total run time {r.total_seconds:.0f} s{' (quick mode)' if s.quick else ''}.", r.realism.paragraph]))

    sections.append(Section("characteristics", "Cohort characteristics (Table 1)",
                            tables=[tables.characteristics_table(r.characteristics)]))

    baseline_and_files = r.results
    sections.append(Section("auroc", "AUROC of every model on every cohort", tables=[
        tables.metric_table(baseline_and_files, cohorts, "auroc", "table-auroc")], figures=[
        _figure("fig-auroc", "AUROC (95% CI) per cohort and model", figures.auroc_overview(baseline_and_files, cohorts),
                figs)] if baseline_and_files else []))
    sections.append(Section("auprc", "AUPRC of every model on every cohort", tables=[
        tables.metric_table(baseline_and_files, cohorts, "auprc", "table-auprc")]))
    models = Section("models", "Every model run and cohort", tables=[
        tables.model_table(baseline_and_files), tables.cohort_info_table([*r.cohorts, *r.gap_cohorts], r.skips)])
    if r.unscored:
        models.tables.insert(1, tables.unscored_table(r.unscored))
    sections.append(models)

    focus = r.focus_cohort if any(c.cohort == r.focus_cohort for c in r.cohorts) else None
    focus_results = [x for x in r.results if x.cohort == focus]
    roc = Section("roc-pr", f"ROC and precision–recall curves — {focus or s.focus_cohort}")
    if focus_results:
        roc.figures.append(_figure("fig-roc-pr", f"ROC and PR curves of every model on the {focus} test cohort "
                                   "(prediction-file models on the rows they scored)",
                                   figures.roc_pr(focus_results, focus), figs))
    else:
        roc.paragraphs.append(f"The focus cohort {s.focus_cohort} was not built (see the cohort table).")
    sections.append(roc)

    trunc = Section("truncation", f"Sensitivity: trajectory length — {r.truncation_cohort or s.focus_cohort}",
                    paragraphs=[
        "Method: every patient's XML timeline (events strictly before the prediction time) is left-truncated with "
        "vista.timeline.truncate_left to the newest whole timestamps that fit N tokens together with the patient "
        "root (demographics); a baseline then sees only the MEDS rows at or after the first kept timestamp (plus "
        "static and birth rows). Training and test windows are truncated alike and each baseline is refitted per "
        "budget, so the curve shows the signal available in the last N tokens of history. Budgets larger than "
        "every timeline give the whole record."])
    if r.truncation:
        trunc.tables.append(tables.truncation_table(r.truncation))
        trunc.figures.append(_figure("fig-truncation", "AUROC vs left-truncation budget",
                                     figures.truncation_plot(r.truncation, r.truncation_cohort or ""), figs))
    else:
        trunc.paragraphs.append("No trajectory-length analysis was run (no budget asked, or the focus cohort "
                                "was not built).")
    sections.append(trunc)

    gap = Section("time-gap", "Sensitivity: time gap between prediction and diagnosis", paragraphs=[
        f"Each cohort in {', '.join(s.gap_cohorts) or '(none)'} is rebuilt with gaps of "
        f"{', '.join(f'{y:g}' for y in s.gap_years) or '(none)'} years (training cases capped at "
        f"{s.gap_train_cases_cap}) and {', '.join(s.gap_models)} refitted on each."])
    if r.gaps:
        gap.tables.append(tables.gap_table(r.gaps))
        gap.figures.append(_figure("fig-gap", "AUROC vs gap per cohort", figures.gap_plot(r.gaps), figs))
    else:
        gap.paragraphs.append("No time-gap analysis was run.")
    sections.append(gap)

    strat = Section("stratified", "Stratified results")
    for item in r.strata:
        strat.tables.append(tables.strata_table(item.cohort, item.results))
        if any(x.auroc is not None for x in item.results):
            strat.figures.append(_figure(f"fig-strata-{item.cohort}", f"AUROC within strata — {item.cohort}",
                                         figures.strata_plot(item.results, item.cohort), figs))
    if not r.strata:
        strat.paragraphs.append("No stratified cohort was built.")
    sections.append(strat)

    agents = Section("agents", "The agents (LLM) in this report", paragraphs=[_llm_sentence(data)])
    if r.agent_request is not None:
        q = r.agent_request
        agents.paragraphs.append(
            f"This run assessed a seeded subset of the {q.cohort} test cohort ({q.labels}) with the variants "
            f"{', '.join(q.variants)}, horizon {q.horizon_days} days, preferring patients whose timeline has at most "
            f"{s.agent_max_tokens} tokens (the shortest ones otherwise) so that the embedded model finishes in "
            "minutes. With so few patients the "
            "agents' AUROC intervals are wide: they prove the pipeline end to end, not the model's accuracy; give "
            "larger prediction files (--predictions) for a real comparison.")
    sections.append(agents)

    latency = Section("latency-cost", "Latency and cost profile")
    if r.profiles:
        per_patient = {}
        for loaded in data.predictions:
            frame = loaded.frame
            if "latency_total_s" not in frame.columns:
                continue
            fresh = frame.filter((frame["cache_hits"] == 0) & frame["latency_total_s"].is_not_null())
            per_patient[loaded.name] = (fresh["timeline_tokens"].to_numpy().astype(np.float64),
                                        fresh["n_chunks"].to_numpy().astype(np.float64),
                                        fresh["latency_total_s"].to_numpy().astype(np.float64))
        latency.tables += [tables.profile_table(r.profiles), tables.stage_table(r.profiles),
                           tables.length_table(r.profiles)]
        latency.figures.append(_figure("fig-latency", "Runtime per patient by EHR length and per stage",
                                       figures.latency_plot(r.profiles, per_patient), figs))
        for p in r.profiles:
            latency.paragraphs += [f"{p.name}: {note}" for note in p.notes]
    else:
        latency.paragraphs.append("No prediction file with the agents' usage and latency columns (jobs.predict output) "
                                  "was given or produced.")
    if r.agent_roles:
        latency.tables.append(tables.agent_table(r.agent_roles))
    sections.append(latency)

    select = Section("model-selection", "Model selection: AUROC vs runtime vs cost")
    if r.selection:
        select.tables.append(tables.selection_table(r.selection))
        select.figures.append(_figure("fig-selection", "AUROC vs median runtime (marker area ∝ median cost; dashed: "
                                      "Pareto front)", figures.selection_plot(r.selection), figs))
    else:
        select.paragraphs.append("No profiled and evaluated LLM run to compare.")
    sections.append(select)

    sections.append(Section("realism", "Are the baselines' AUROCs realistic?", paragraphs=[r.realism.paragraph],
                            css_class="verdict"))

    timings = Table("table-timings", "Where the time went", ["step", "seconds"],
                    [[t.step, f"{t.seconds:.1f}"] for t in r.timings] + [["total", f"{r.total_seconds:.1f}"]])
    sections.append(Section("provenance", "Commands and settings", paragraphs=[
        "Every number above was computed by this run. These commands produced them (the first reproduces the whole "
        "report; the others are what it ran for the agents):"], code=[*r.commands,
        s.model_dump_json(indent=1)], tables=[timings]))
    assert tuple(x.id for x in sections) == SECTION_IDS
    return sections


def write_report(data: ReportData, sections: list[Section]) -> tuple[Path, Path]:
    """``report.html`` and ``results.json`` under the report folder."""
    out = data.results.settings.out
    html_path, json_path = out / "report.html", out / "results.json"
    html_path.write_text(render_html("TrajOnco benchmark reproduction", sections,
                                     subtitle=f"Command: {data.results.commands[0]}."), encoding="utf-8")
    json_path.write_text(data.results.model_dump_json(indent=1), encoding="utf-8")
    return html_path, json_path
