"""The report's sections computed from the agents' own outputs: population insights of every agent run, and the
pairwise LLM judge of two agent runs on the same patients. Each is a section builder (``ReportData -> Section``) for
`reproduce`'s ``extra_sections``; their numbers go into ``results.json`` (``insights``, ``pairwise_judge``).

The judge runs only when the report has two agent runs of the focus cohort (e.g. one-stage and two-stage); it asks
its own LLM (``JudgeOptions.llm``, by default the embedded model, whose verdicts the section marks as machinery-only)
about at most ``JudgeOptions.patients`` shared patients, with a response cache under the report folder so a rerun
pays nothing twice. A judge that cannot run says why in its section instead of failing the report.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vista.shared.atomic import atomic_write_bytes, atomic_write_text
from trajonco.report_document import Section
from benchmarks.report.judge_section import judge_section
from benchmarks.report.report_data import ReportData
from benchmarks.report.sections import report_palette

log = logging.getLogger(__name__)

SectionBuilder = Callable[[ReportData], Section]


def _write_figures(section: Section, figures_dir: Path) -> None:
    for figure in section.figures:
        atomic_write_bytes(figures_dir / f"{figure.id}.png", figure.png)


def _agent_runs(data: ReportData) -> list:
    """The loaded prediction files that hold the agents' columns (a baseline-style file has none)."""
    return [loaded for loaded in data.predictions if "risk_trajectory" in loaded.frame.columns
            or "final_events" in loaded.frame.columns]


def insights_builder(seed: int = 0) -> SectionBuilder:
    """Population insights (topics, patient map, similarity heatmap, risk flows) of every agents' prediction run."""

    def build(data: ReportData) -> Section:
        from trajonco.insights.analysis import compute_insights
        from trajonco.insights.errors import InsightsInputError
        from trajonco.insights.inputs import read_run
        from trajonco.insights.results import InsightsSettings
        from trajonco.insights.section import insights_section

        runs, notes = [], []
        for loaded in data.predictions:
            try:
                runs.append(compute_insights(read_run(loaded.source.path), InsightsSettings(seed=seed)))
            except InsightsInputError as exc:
                notes.append(f"{loaded.name}: {exc}")
        section = insights_section(runs)
        section.paragraphs += [f"Not analysed — {note}" for note in notes]
        data.results.insights = [insights.result for insights in runs]
        _write_figures(section, data.results.settings.out / "figures")
        return section

    return build


@dataclass(frozen=True)
class JudgeOptions:
    """How the report runs the pairwise judge."""

    llm: list[str] = field(default_factory=list)  # LLMConfig KEY=VALUE items (default: VISTA_LLM_* / embedded)
    patients: int | None = 2  # shared patients judged at most (None: all); ~1 min each on the embedded model
    seed: int = 0
    report: Path | None = None  # an existing judge.json to show instead of running the judge


def judge_builder(options: JudgeOptions) -> SectionBuilder:
    """The pairwise-judge section: the first two agent runs of the focus cohort, compared patient by patient."""

    def build(data: ReportData) -> Section:
        from trajonco.judge.errors import EvaluationInputError
        from trajonco.judge.report import read_report

        out = data.results.settings.out
        palette = report_palette(data)
        colors = {name: palette[name] for name in palette.names()}
        report, why_not = None, None
        if options.report is not None:
            report = read_report(options.report)
        else:
            runs = [r for r in _agent_runs(data) if r.source.cohort == data.results.focus_cohort]
            if len(runs) < 2:
                why_not = (f"The report has {len(runs)} agent run(s) of the {data.results.focus_cohort} cohort; the "
                           "pairwise judge needs two on the same patients (e.g. --agent-variants one_stage,two_stage).")
            else:
                try:
                    report = _run_judge(runs[0], runs[1], options, out / "judge")
                except EvaluationInputError as exc:
                    why_not = f"The pairwise judge could not run: {exc}"
        section = judge_section(report, out / "figures", colors=colors)
        if why_not:
            section.paragraphs.insert(0, why_not)
        data.results.pairwise_judge = report
        _write_figures(section, out / "figures")
        return section

    return build


def _run_judge(run_a, run_b, options: JudgeOptions, out: Path):
    from trajonco.judge.compare import compare_runs
    from vista.shared.llm import LLMConfig

    config = LLMConfig.from_cli(options.llm)
    if config.cache_dir is None:
        config = config.with_overrides({"cache_dir": str(out / "llm_cache")})
    log.info("pairwise judge: %s vs %s on %s patients", run_a.name, run_b.name, options.patients or "all")
    report = asyncio.run(compare_runs(run_a.source.path, run_b.source.path, config, names=(run_a.name, run_b.name),
                                      limit=options.patients, seed=options.seed))
    atomic_write_text(out / "judge.json", report.model_dump_json(indent=1))
    return report
