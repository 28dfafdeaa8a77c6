"""Orchestrate a reproduction report: dataset → cohorts → baselines → sensitivity analyses → agents → HTML.

`reproduce(settings, agent_runner=...)` computes every number (`ReportResults`, also written to
``results.json``), renders ``report.html`` and the figures' PNG files under ``settings.out``. The cohort work runs
in worker processes (`benchmarks.report.parallel`); the agents run afterwards, on an idle machine, so their latency
profile is not inflated by the baselines' load. Running the agents is the caller's business (``jobs.report``
wires ``jobs.predict``): this package never imports ``jobs``; it hands an `AgentRequest` to ``agent_runner``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from vista.shared.atomic import atomic_path, make_dirs
from baselines import ModelScores, StratumResult, stratified_results
from baselines.metrics import too_few_text
from benchmarks.report.agent_sensitivity import run_agent_sensitivity
from benchmarks.report.cohort_tasks import CohortOutcome, CohortTask, TruncationOutcome, TruncationTask
from benchmarks.report.dataset import ensure_dataset
from benchmarks.report.errors import ReportError, ReportInputError
from trajonco.report_document import Section
from benchmarks.report.paired import model_choice_comparisons, paired_comparisons
from benchmarks.report.parallel import TaskRunner
from benchmarks.report.predictions import LoadedPredictions, evaluate_predictions, load_predictions
from benchmarks.report.profile import (
    agent_roles_from_ledger,
    has_usage,
    run_profile,
    selection_view,
)
from benchmarks.report.realism import best_baselines, realism_verdict, record_length_range, too_few_cohorts
from benchmarks.report.results import (
    AgentSensitivityPoint,
    CohortStrata,
    GapPoint,
    ModelResult,
    UnscoredRun,
)
from benchmarks.report.report_data import AgentRequest, AgentRunner, ReportData, ReportResults, Timing
from benchmarks.report.sections import build_sections, write_report
from benchmarks.report.settings import PredictionSource, ReportSettings
from benchmarks.report.timelines import pick_subset
from trajonco.cohorts import CohortDefinition, load_definition

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportOutcome:
    html: Path
    results_json: Path
    data: ReportData

    @property
    def nothing_to_show(self) -> str | None:
        """Why the report holds no result at all (every cohort skipped, nothing scored), or None.

        The report is still written (it says why); ``jobs.report`` exits non-zero with this line.
        """
        r = self.data.results
        if r.results:
            return None
        skipped = "; ".join(f"{s.cohort}: {s.reason}" for s in r.skips) or "no cohort was built"
        return f"nothing to show: no model could be scored on any cohort ({skipped})"


def _definitions(refs: Sequence[str]) -> dict[str, CohortDefinition]:
    return {ref: load_definition(ref) for ref in refs}


def _main_task(settings: ReportSettings, ref: str, name: str) -> CohortTask:
    return CohortTask(definition=ref, out_dir=settings.out / "cohorts" / name, models=settings.baselines,
                      seed=settings.seed, n_resamples=settings.n_resamples, train_cases_cap=settings.train_cases_cap,
                      test_cases=settings.test_cases, describe=True, token_sample=settings.token_sample,
                      stratify=ref in settings.stratify_cohorts, keep_scores=True, record_length=True)


def _gap_task(settings: ReportSettings, ref: str, name: str, days: int) -> CohortTask:
    return CohortTask(definition=ref, out_dir=settings.out / "cohorts" / "gaps" / f"{name}_{days}d",
                      models=settings.gap_models, seed=settings.seed, n_resamples=settings.n_resamples,
                      gap_days=days, train_cases_cap=settings.gap_train_cases_cap, test_cases=settings.test_cases)


def _size_hint(definition: CohortDefinition) -> int:
    return len(definition.cancers)  # composites (any-cancer) are the largest: start them first


def run_cohort_tasks(settings: ReportSettings, definitions: dict[str, CohortDefinition], dataset_root: Path,
                     progress: Progress) -> tuple[dict[str, CohortOutcome], list[CohortOutcome],
                                                  TruncationOutcome | None]:
    """Main cohorts, gap cohorts and the truncation analysis (submitted when the focus cohort is built)."""
    main: dict[str, CohortOutcome] = {}
    gaps: list[CohortOutcome] = []
    truncation: TruncationOutcome | None = None
    ordered = sorted(settings.cohorts, key=lambda r: (-_size_hint(definitions[r]), r != settings.focus_cohort))
    queue: deque[tuple[CohortTask | TruncationTask, str]] = deque(
        [(_main_task(settings, ref, definitions[ref].name), "main") for ref in ordered]
        + [(_gap_task(settings, ref, definitions[ref].name, days), "gap")
           for ref in settings.gap_cohorts for days in settings.gap_days])
    total = len(queue) + (1 if settings.truncation_budgets else 0)
    finished = 0
    with TaskRunner(dataset_root, settings.workers) as runner:
        pending: dict[Future, str] = {}

        def refill() -> None:  # a short queue in the pool, so a task added later (truncation) starts next
            while queue and len(pending) < settings.workers + 1:
                task, kind = queue.popleft()
                pending[runner.submit(task)] = kind

        refill()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in done:
                kind = pending.pop(future)
                try:
                    outcome = future.result()  # a task's error stops the report, naming its input
                except BrokenProcessPool as exc:
                    raise ReportError(f"a worker process of the report died ({exc}); its own error is printed "
                                      "above (out of memory? rerun with --workers 1 to see it here)") from None
                finished += 1
                if isinstance(outcome, TruncationOutcome):
                    truncation = outcome
                    progress(f"[{finished}/{total}] trajectory length: {len(outcome.points)} points "
                             f"(rendering {outcome.render_seconds:.0f} s, fitting {outcome.fit_seconds:.0f} s)")
                    continue
                progress(f"[{finished}/{total}] {_describe(outcome)}")
                if kind == "gap":
                    gaps.append(outcome)
                    continue
                main[outcome.task.definition] = outcome
                if (outcome.task.definition == settings.focus_cohort and settings.truncation_budgets
                        and outcome.info is not None):
                    queue.appendleft((TruncationTask(
                        cohort=outcome.cohort, train_labels=outcome.train_labels, test_labels=outcome.test_labels,
                        budgets=settings.truncation_budgets, models=settings.truncation_models, seed=settings.seed,
                        n_resamples=settings.n_resamples), "truncation"))
            refill()
    return main, gaps, truncation


def _describe(outcome: CohortOutcome) -> str:
    if outcome.skip is not None:
        return f"{outcome.task.label}: skipped — {outcome.skip.reason}"
    assert outcome.info is not None
    head = f"{outcome.task.label}: {outcome.info.test_cases} test cases, {outcome.info.train_rows} training rows, "
    baselines = [r for r in outcome.results if r.kind == "baseline"]
    if baselines and all(r.too_few for r in baselines):
        return head + f"AUROC {too_few_text(*baselines[0].counts())}"
    best = max((r for r in baselines if not r.too_few), key=lambda r: r.evaluation.auroc.value)
    return head + f"best AUROC {best.evaluation.auroc.value:.3f} ({best.model})"


def gap_points(settings: ReportSettings, gaps: Sequence[CohortOutcome]) -> list[GapPoint]:
    years = dict(zip(settings.gap_days, settings.gap_years))
    points = []
    for outcome in gaps:
        for r in outcome.results:
            points.append(GapPoint(cohort=outcome.cohort, gap_years=years[outcome.gap_days], gap_days=outcome.gap_days,
                                   model=r.model, n_cases=r.evaluation.n_positive, n_controls=r.evaluation.n_negative,
                                   auroc=r.evaluation.auroc))
    return sorted(points, key=lambda p: (p.cohort, p.model, p.gap_years))


def agent_request(settings: ReportSettings, definitions: dict[str, CohortDefinition], outcome: CohortOutcome,
                  dataset_root: Path) -> AgentRequest | None:
    """The focus cohort's agent subset, written as a label file (None when no patient qualifies)."""
    if outcome.test_labels is None or settings.agent_patients == 0:
        return None
    per_role = max(1, settings.agent_patients // 2)
    subset = pick_subset(dataset_root, outcome.test_labels, per_role, max_tokens=settings.agent_max_tokens,
                         seed=settings.seed, source=f"{outcome.cohort} test labels")
    if subset.is_empty():
        return None
    folder = settings.out / "agents"
    labels = folder / "labels.parquet"
    with atomic_path(labels) as tmp:  # private, like every report file (vista.shared.atomic)
        subset.write_parquet(tmp)
    definition = definitions[settings.focus_cohort]
    single = len(definition.cancers) == 1
    return AgentRequest(dataset=dataset_root, labels=labels, out_dir=folder, cohort=settings.focus_cohort,
                        cancer=definition.cancers[0].name if single else None, any_cancer=not single,
                        variants=settings.agent_variants, horizon_days=definition.gap_days)


def score_prediction_files(settings: ReportSettings, sources: Sequence[PredictionSource],
                           main: dict[str, CohortOutcome]) -> tuple[list[ModelResult], list[UnscoredRun],
                                                                    list[LoadedPredictions],
                                                                    dict[str, list[ModelScores]],
                                                                    dict[str, list[StratumResult]]]:
    """Evaluate each prediction file on the test labels of its cohort (and within its strata)."""
    results, unscored, loaded_all, scores, stratified = [], [], [], {}, {}
    for source in sources:
        outcome = main.get(source.cohort)
        if outcome is None or outcome.test_labels is None:
            raise ReportInputError(str(source.path), f"scores cohort {source.cohort!r}, which this report did not "
                                   f"build (cohorts: {', '.join(main)})", field="cohort")
        loaded = load_predictions(source)
        loaded_all.append(loaded)
        result, model_scores = evaluate_predictions(loaded, outcome.test_labels, cohort=outcome.cohort,
                                                    gap_days=outcome.gap_days, n_resamples=settings.n_resamples,
                                                    seed=settings.seed)
        if isinstance(result, UnscoredRun):
            unscored.append(result)
            continue
        results.append(result)
        scores.setdefault(source.cohort, []).append(model_scores)
        if outcome.strata is not None:
            stratified.setdefault(source.cohort, []).extend(
                stratified_results(model_scores, outcome.strata, n_resamples=settings.n_resamples, seed=settings.seed))
    return results, unscored, loaded_all, scores, stratified


SectionBuilder = Callable[[ReportData], Section]
"""Builds one extra report section from the report's data (a judge, population insights...)."""


def reproduce(settings: ReportSettings, *, agent_runner: AgentRunner | None = None, progress: Progress = print,
              extra_sections: Sequence[SectionBuilder] = ()) -> ReportOutcome:
    """Compute every number of the report, then write ``report.html``, ``results.json`` and ``figures/``.

    ``extra_sections`` add sections (in order, before the commands and settings) built from the finished data.
    """

    started = time.perf_counter()
    timings: list[Timing] = []
    make_dirs(settings.out)

    def step(name: str, since: float) -> float:
        now = time.perf_counter()
        timings.append(Timing(step=name, seconds=round(now - since, 2)))
        return now

    mark = time.perf_counter()
    progress(f"[report] dataset: {settings.dataset_root}")
    dataset = ensure_dataset(settings)
    dataset_root = Path(dataset.root)
    mark = step("dataset (generate or reuse)" if dataset.synthetic else "dataset (open)", mark)
    definitions = _definitions(settings.cohorts)
    main, gaps, truncation = run_cohort_tasks(settings, definitions, dataset_root, progress)
    mark = step(f"cohort tasks in {settings.workers} worker(s) (wall)", mark)
    for label, outcomes in (("main cohorts", list(main.values())), ("time-gap cohorts", gaps)):
        busy = sum(o.info.total_seconds for o in outcomes if o.info is not None)
        timings.append(Timing(step=f"  of which {label} (summed over workers)", seconds=round(busy, 2)))
    if truncation is not None:
        timings.append(Timing(step="  of which trajectory length (one worker)",
                              seconds=round(truncation.render_seconds + truncation.fit_seconds, 2)))

    request, commands = None, [settings.command or "python -m jobs.report (from Python)"]
    agent_truncation: list[AgentSensitivityPoint] = []
    agent_gaps: list[AgentSensitivityPoint] = []
    sources = list(settings.predictions)
    focus = main.get(settings.focus_cohort)
    if agent_runner is not None and focus is not None and focus.info is not None:
        request = agent_request(settings, definitions, focus, dataset_root)
        if request is not None:
            progress(f"[report] agents: {pl.read_parquet(request.labels).height} {request.cohort} test patients, "
                     f"variants {', '.join(request.variants)}")
            run = agent_runner(request)
            sources += run.sources
            commands += run.commands
            mark = step("agents (jobs.predict)", mark)
            if run.sources:
                agent_truncation, agent_gaps, more, _ = run_agent_sensitivity(
                    settings, request, run.sources[0].path, agent_runner, gaps, dataset_root, progress)
                commands += more
                if agent_truncation or agent_gaps:
                    mark = step("agents over truncation budgets and gaps (jobs.predict)", mark)

    extra_results, unscored, loaded, file_scores, file_strata = score_prediction_files(settings, sources, main)
    profiles = [run_profile(item) for item in loaded if has_usage(item.frame)]
    roles = [role for p in profiles for role in p.agents]
    for ledger in settings.usage_ledgers:
        roles += agent_roles_from_ledger(ledger)

    cohort_order = [definitions[ref].name for ref in settings.cohorts]
    baseline_results = [r for ref in settings.cohorts if ref in main for r in main[ref].results]
    all_results = baseline_results + extra_results
    best = best_baselines(baseline_results)
    realism = realism_verdict({c: r.evaluation.auroc.value for c, r in best.items()}, settings.realistic_range,
                              synthetic=dataset.synthetic,
                              ci_lower_above_half=sum(r.evaluation.auroc.lower > 0.5 for r in best.values()),
                              too_few=too_few_cohorts(baseline_results),
                              record_length=record_length_range(baseline_results))
    strata = []
    for ref in settings.stratify_cohorts:
        outcome = main.get(ref)
        if outcome is not None and outcome.info is not None:
            strata.append(CohortStrata(cohort=outcome.cohort, results=outcome.stratified + file_strata.get(ref, [])))
    scores = {main[ref].cohort: main[ref].scores + file_scores.get(ref, []) for ref in settings.cohorts if ref in main}
    paired = [comparison for ref in settings.cohorts if ref in main and file_scores.get(ref)
              for comparison in paired_comparisons(main[ref].cohort, file_scores[ref], main[ref].scores, all_results,
                                                   n_resamples=settings.n_resamples, seed=settings.seed)]
    paired += [comparison for ref in settings.cohorts if ref in main and len(file_scores.get(ref, [])) > 1
               for comparison in model_choice_comparisons(main[ref].cohort, file_scores[ref], all_results,
                                                          n_resamples=settings.n_resamples, seed=settings.seed)]
    results = ReportResults(
        settings=settings, dataset=dataset, focus_cohort=definitions[settings.focus_cohort].name,
        cohorts=[o.info for ref in settings.cohorts if (o := main.get(ref)) is not None and o.info is not None],
        gap_cohorts=sorted((o.info for o in gaps if o.info is not None), key=lambda i: (i.cohort, i.gap_days)),
        skips=[o.skip for o in [*main.values(), *gaps] if o.skip is not None],
        characteristics=[o.characteristics for ref in settings.cohorts
                         if (o := main.get(ref)) is not None and o.characteristics is not None],
        results=sorted(all_results, key=lambda r: (cohort_order.index(r.cohort) if r.cohort in cohort_order else 99,
                                                   r.kind, r.model)),
        paired=paired, unscored=unscored, truncation_cohort=truncation.task.cohort if truncation else None,
        truncation=truncation.points if truncation else [], gaps=gap_points(settings, gaps), strata=strata,
        agent_truncation=agent_truncation, agent_gaps=agent_gaps,
        profiles=profiles, agent_roles=roles, selection=selection_view(
            profiles, extra_results, [r for r in baseline_results if r.cohort == definitions[settings.focus_cohort].name]), realism=realism,
        agent_request=request, commands=commands, timings=timings, total_seconds=0.0)
    data = ReportData(results=results, scores=scores, predictions=loaded)
    step("prediction files, profile, verdict", mark)
    results.total_seconds = round(time.perf_counter() - started, 2)
    html_path, json_path = write_report(data, build_sections(data, extra=[build(data) for build in extra_sections]))
    progress(f"[report] written {html_path} ({time.perf_counter() - started:.0f} s in all)")
    return ReportOutcome(html=html_path, results_json=json_path, data=data)


def load_results(path: Path) -> ReportResults:
    """Read a ``results.json`` back."""
    return ReportResults.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
