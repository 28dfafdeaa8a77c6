"""Unit tests of the reproduction report's parts: Pareto front, realism verdict, settings, truncation windows,
characteristics and prediction-file errors."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from benchmarks.report import ReportInputError, ReportSettings, pareto_front
from benchmarks.report.characteristics import cohort_characteristics
from benchmarks.report.realism import realism_verdict
from benchmarks.report.timelines import iter_timelines, truncate_events, truncation_windows
from vista.shared.meds import schema
from vista.shared.meds.errors import MedsDataError
from vista.shared.timeline import truncate_left


# ------------------------------------------------------------------------------------------------ Pareto front
def test_pareto_front_on_a_known_case():
    points = [
        (0.80, 10.0, 0.010),  # best AUROC: on the front
        (0.78, 5.0, 0.002),  # fastest and cheapest: on the front
        (0.75, 6.0, 0.003),  # beaten by the second on all three
        (0.80, 12.0, 0.010),  # same AUROC and cost as the first, slower: dominated
        (0.79, 4.0, 0.020),  # fastest of all but expensive: on the front
        (0.70, 20.0, 0.0),  # free: on the front (nobody is cheaper)
    ]
    assert pareto_front(points) == [True, True, False, False, True, True]


def test_pareto_front_keeps_ties_and_single_points():
    assert pareto_front([(0.7, 1.0, 1.0), (0.7, 1.0, 1.0)]) == [True, True]  # equal points do not dominate
    assert pareto_front([(0.6, 3.0, 0.5)]) == [True]


# ------------------------------------------------------------------------------------------------ realism
def test_realism_verdict_inside_and_outside_the_range():
    inside = realism_verdict({"lung": 0.79, "liver": 0.83}, (0.6, 0.9), synthetic=True)
    assert inside.below == inside.above == []
    assert "0.790 (lung)" in inside.paragraph and "inside 0.6–0.9" in inside.paragraph
    outside = realism_verdict({"lung": 0.99, "colorectal": 0.52, "breast": 0.7}, (0.6, 0.9), synthetic=True)
    assert outside.above == ["lung"] and outside.below == ["colorectal"]
    assert "lung (0.990)" in outside.paragraph and "colorectal (0.520)" in outside.paragraph
    assert "generator" in outside.paragraph


# ------------------------------------------------------------------------------------------------ settings
def test_settings_reject_unknown_models_and_cohorts(tmp_path):
    with pytest.raises(ValidationError, match="unknown baseline"):
        ReportSettings(out=tmp_path, baselines=("random_forest",))
    with pytest.raises(ValidationError, match="not among the cohorts"):
        ReportSettings(out=tmp_path, cohorts=("lung",), stratify_cohorts=("breast",))
    with pytest.raises(ValidationError, match="focus_cohort"):
        ReportSettings(out=tmp_path, cohorts=("breast",), focus_cohort="lung")
    assert ReportSettings(out=tmp_path).gap_days == (183, 365, 730, 1096, 1461, 1826)


# ------------------------------------------------------------------------------------------------ data-driven parts
@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory) -> tuple[Path, pl.DataFrame]:
    """A small synthetic dataset and 40 labelled subjects with a prediction time inside their record."""
    from vista.shared.meds.reader import MedsDataset
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("report_units") / "meds"
    generate(SynthConfig(n_subjects=300, seed=5, workers=1), root, progress=False)
    events = MedsDataset(root).scan().collect()
    spans = (events.filter(pl.col("time").is_not_null() & (pl.col("code") != schema.BIRTH_CODE))
             .group_by("subject_id").agg(first=pl.col("time").min(), last=pl.col("time").max())
             .filter((pl.col("last") - pl.col("first")).dt.total_days() > 900).sort("subject_id").head(40))
    labels = spans.select("subject_id", prediction_time=pl.col("last"),
                          boolean_value=pl.int_range(pl.len()) % 2 == 0,
                          age_at_index=pl.lit(60.0), sex=pl.lit("F"))
    return root, labels


def test_truncated_feature_window_holds_exactly_the_events_of_the_truncated_timeline(small_dataset):
    """The MEDS rows left by `truncate_events` are the events of `truncate_left`'s XML (plus static and birth)."""
    from vista.shared.meds.reader import MedsDataset

    root, labels = small_dataset
    budgets = (600, 2_000)
    windows = truncation_windows(root, labels, budgets)
    assert windows.height == labels.height * len(budgets)
    events = MedsDataset(root).scan()
    timelines = {sid: timeline for sid, _, timeline in iter_timelines(root, labels)}
    truncated_some = False
    for budget in budgets:
        per_subject = windows.filter(pl.col("budget_tokens") == budget)
        kept = (truncate_events(events, per_subject.select("subject_id", "window_start"))
                .join(labels.lazy().select("subject_id", "prediction_time"), on="subject_id")
                .filter(pl.col("time").is_not_null() & (pl.col("code") != schema.BIRTH_CODE)
                        & (pl.col("time") < pl.col("prediction_time")))
                .group_by("subject_id").len().collect())
        rows = dict(kept.iter_rows())
        for row in per_subject.iter_rows(named=True):
            xml = truncate_left(timelines[row["subject_id"]], budget)
            assert rows.get(row["subject_id"], 0) == len(xml.event_ids()), row
            assert row["kept_tokens"] == xml.n_tokens() <= budget or not xml.blocks
            truncated_some |= row["window_start"] is not None
    assert truncated_some, "the budgets should truncate some of these patients"


def test_characteristics_count_roles_and_sample_tokens(small_dataset):
    from vista.shared.meds.reader import MedsDataset

    root, labels = small_dataset
    tokens = pl.DataFrame({"subject_id": labels["subject_id"][:4], "prediction_time": labels["prediction_time"][:4],
                           "xml_tokens": [100, 200, 300, 400]})
    table = cohort_characteristics("test", MedsDataset(root).scan(), labels, tokens, 2)
    assert table.cases.n == 20 and table.controls.n == 20
    assert table.cases.xml_tokens.n == 2 and table.cases.xml_tokens.median == 200.0  # rows 0, 2 are cases
    assert sum(table.cases.race.values()) == 20 and sum(table.controls.ethnicity.values()) == 20
    assert table.cases.sex == {"F": 20}
    assert table.cases.ehr_span_years.median is not None and table.cases.ehr_span_years.median > 900 / 365.25


def test_a_subject_missing_from_the_dataset_is_named(small_dataset):
    root, labels = small_dataset
    bad = pl.concat([labels.head(2), labels.head(1).with_columns(subject_id=pl.lit(99_999_999, pl.Int64))])
    with pytest.raises(MedsDataError, match="not in the dataset: 99999999"):
        truncation_windows(root, bad, (1000,), source="bad.parquet")


def test_prediction_file_for_a_cohort_not_built_is_refused(tmp_path):
    from benchmarks.report.reproduce import score_prediction_files
    from benchmarks.report.settings import PredictionSource

    path = tmp_path / "p.parquet"
    pl.DataFrame({"subject_id": [1], "predicted_boolean_probability": [0.5]}).write_parquet(path)
    settings = ReportSettings(out=tmp_path)
    with pytest.raises(ReportInputError, match=r"p\.parquet.*field 'cohort'.*did not build"):
        score_prediction_files(settings, [PredictionSource(path=path, cohort="breast")], {})


def test_prediction_file_without_scores_names_the_file_and_field(tmp_path):
    from baselines import PredictionFileError
    from benchmarks.report.predictions import load_predictions
    from benchmarks.report.settings import PredictionSource

    path = tmp_path / "p.parquet"
    pl.DataFrame({"subject_id": [1], "risk": [3]}).write_parquet(path)
    with pytest.raises(PredictionFileError, match=r"p\.parquet: field 'predicted_boolean_probability'"):
        load_predictions(PredictionSource(path=path))


def test_profile_of_a_prediction_file(tmp_path):
    """Runtime, stage, token and cost quantiles come from the file's columns; cached patients are set apart."""
    from benchmarks.report.predictions import load_predictions
    from benchmarks.report.profile import run_profile
    from benchmarks.report.settings import PredictionSource

    n = 6
    frame = pl.DataFrame({
        "subject_id": list(range(n)), "prediction_time": [datetime(2020, 1, 1)] * n,
        "predicted_boolean_probability": [0.1, 0.9, 0.3, 0.7, 0.5, 0.2], "model": ["gpt-x"] * n,
        "variant": ["two_stage"] * n, "status": ["ok"] * 5 + ["error"],
        "latency_total_s": [10.0, 20.0, 30.0, 40.0, 0.1, None], "wall_s": [11.0, 21.0, 31.0, 41.0, 0.2, 0.5],
        "latency_preprocess_s": [2.0, 4.0, 6.0, 8.0, 0.0, None],
        "latency_workers_s": [6.0, 12.0, 18.0, 24.0, 0.0, None],
        "latency_manager_s": [2.0, 4.0, 6.0, 8.0, 0.0, None], "latency_single_agent_s": [0.0] * 5 + [None],
        "prompt_tokens": [1000, 2000, 3000, 4000, 0, 0], "completion_tokens": [100, 200, 300, 400, 0, 0],
        "cost_usd": [0.01, 0.02, 0.03, 0.04, 0.0, 0.0], "unpriced_calls": [0] * n, "llm_calls": [3, 5, 7, 9, 5, 0],
        "cache_hits": [0, 0, 0, 0, 5, 0], "timeline_tokens": [1500, 3000, 9000, 20000, 3000, None],
        "n_chunks": [1, 2, 6, 13, 2, None],
    })
    path = tmp_path / "predictions.parquet"
    frame.write_parquet(path)
    profile = run_profile(load_predictions(PredictionSource(path=path)))
    assert profile.name == "two_stage · gpt-x" and profile.patients == 6 and profile.profiled == 4
    assert profile.cached_patients == 1 and profile.statuses == {"error": 1, "ok": 5}
    assert profile.runtime_s.median == 25.0 and profile.stages["preprocess"].median == 5.0
    assert "single_agent" not in profile.stages
    assert profile.total_tokens.median == 2750.0 and profile.total_cost_usd == pytest.approx(0.10)
    assert [(b.label, b.n) for b in profile.by_chunks] == [("1 chunk", 1), ("2 chunks", 1), ("5–8 chunks", 1),
                                                          ("9–16 chunks", 1)]
    assert any("cache" in note for note in profile.notes)
    assert np.isclose(profile.cost_usd.median, 0.025)


def test_agent_subset_prefers_short_timelines_and_fills_with_the_shortest(small_dataset):
    from benchmarks.report.timelines import pick_subset, token_counts

    root, labels = small_dataset
    sizes = dict(token_counts(root, labels).select("subject_id", "xml_tokens").iter_rows())
    cutoff = int(np.median(list(sizes.values())))
    subset = pick_subset(root, labels, 3, max_tokens=cutoff, seed=0)
    assert subset["boolean_value"].sum() == 3 and (~subset["boolean_value"]).sum() == 3
    assert all(sizes[s] <= cutoff for s in subset["subject_id"])
    tiny = pick_subset(root, labels, 2, max_tokens=1, seed=0)  # nobody fits: the two shortest of each role
    for outcome in (True, False):
        role = labels.filter(pl.col("boolean_value") == outcome)["subject_id"].to_list()
        shortest = sorted(role, key=lambda s: (sizes[s], s))[:2]
        assert sorted(tiny.filter(pl.col("boolean_value") == outcome)["subject_id"].to_list()) == sorted(shortest)
    assert subset.columns == labels.columns


def test_a_prediction_file_too_small_for_a_ci_is_reported_not_fatal(tmp_path):
    """One case and one control cannot give a bootstrap CI: the run is listed as unscored, with the reason."""
    from benchmarks.report.predictions import evaluate_predictions, load_predictions
    from benchmarks.report.results import UnscoredRun
    from benchmarks.report.settings import PredictionSource

    when = datetime(2020, 1, 1)
    labels = pl.DataFrame({"subject_id": [1, 2, 3, 4], "prediction_time": [when] * 4,
                           "boolean_value": [True, False, True, False]})
    path = tmp_path / "predictions.parquet"
    pl.DataFrame({"subject_id": [1, 2], "prediction_time": [when] * 2, "predicted_boolean_probability": [0.9, 0.2],
                  "model": ["tiny-llm"] * 2, "variant": ["one_stage"] * 2}).write_parquet(path)
    result, scores = evaluate_predictions(load_predictions(PredictionSource(path=path)), labels, cohort="lung",
                                          gap_days=365, n_resamples=100, seed=0)
    assert isinstance(result, UnscoredRun) and result.n_scored == 2 and scores.n == 2
    assert result.llm_model == "tiny-llm" and "2 cases and 2 controls" in result.reason


# ------------------------------------------------------------------------------------------------ honest comparisons
def _scores(model, ids, labels, values):
    from baselines import ModelScores

    times = np.full(len(ids), np.datetime64("2020-01-01", "us"))
    return ModelScores(model, np.asarray(ids), times, np.asarray(labels, bool), np.asarray(values, float))


def test_paired_difference_equals_sklearn_on_the_same_rows_and_covers_it():
    from sklearn.metrics import roc_auc_score

    from baselines.metrics import paired_auroc_difference

    rng = np.random.default_rng(3)
    y = np.arange(200) < 100
    a, b = rng.normal(size=200) + 1.5 * y, rng.normal(size=200) + 0.3 * y
    d = paired_auroc_difference(y, a, b, n_resamples=400, seed=1)
    assert d.auroc_a == roc_auc_score(y, a) and d.auroc_b == roc_auc_score(y, b)
    assert d.difference.value == pytest.approx(d.auroc_a - d.auroc_b)
    assert 0.0 < d.difference.lower < d.difference.value < d.difference.upper
    same = paired_auroc_difference(y, a, a, n_resamples=100, seed=1)  # a model against itself: exactly 0
    assert same.difference.lower == same.difference.upper == 0.0


def test_a_baseline_is_rescored_on_the_agents_patients_only():
    """The agent scored 4 of 8 patients: the comparator's AUROC in the pair is on those 4, not on its 8."""
    from sklearn.metrics import roc_auc_score

    from benchmarks.report.paired import paired_comparisons

    ids, labels = list(range(1, 9)), [1, 1, 1, 1, 0, 0, 0, 0]
    baseline = _scores("lr", ids, labels, [0.9, 0.1, 0.8, 0.2, 0.3, 0.7, 0.1, 0.2])
    agent = _scores("agent", [1, 2, 5, 6], [1, 1, 0, 0], [0.6, 0.5, 0.4, 0.3])
    [pair] = paired_comparisons("lung", [agent], [baseline], [], n_resamples=100, seed=0)
    assert pair.comparator_auroc == roc_auc_score([1, 1, 0, 0], [0.9, 0.1, 0.3, 0.7])
    assert pair.agent_auroc == 1.0 and (pair.n_cases, pair.n_controls) == (2, 2) and pair.too_few
    assert pair.difference is not None and pair.difference.value == pytest.approx(1.0 - pair.comparator_auroc)
    sampled = _scores("record length: XML tokens", [1, 5], [1, 0], [900.0, 100.0])  # a sample lacking the agent's rows
    [gap] = paired_comparisons("lung", [agent], [sampled], [], n_resamples=100, seed=0)
    assert gap.difference is None and "has no score for subject 2" in gap.note


def test_record_length_auroc_is_the_auroc_of_the_counts(small_dataset):
    from sklearn.metrics import roc_auc_score

    from baselines.stratify import visit_counts
    from benchmarks.report.record_length import TOKENS, VISITS, record_length_results
    from vista.shared.meds.reader import MedsDataset

    root, labels = small_dataset
    events = MedsDataset(root).scan()
    tokens = labels.head(12).select("subject_id", "prediction_time", xml_tokens=pl.int_range(pl.len()) * 100 + 7)
    results, scores = record_length_results("test", 365, labels, events, tokens, n_resamples=100, seed=0)
    by = {r.model: r for r in results}
    assert {r.kind for r in results} == {"record_length"} and set(by) == {TOKENS, VISITS}
    visits = labels.join(visit_counts(events, labels, years=None), on=["subject_id", "prediction_time"])
    assert by[VISITS].evaluation.auroc.value == roc_auc_score(visits["boolean_value"], visits["visits"])
    assert by[VISITS].evaluation.n == labels.height and by[TOKENS].evaluation.n == 12
    first = labels.head(12)
    assert by[TOKENS].evaluation.auroc.value == roc_auc_score(first["boolean_value"], np.arange(12) * 100 + 7)
    whole = visit_counts(events, labels, years=None)["visits"].sum()
    assert whole >= visit_counts(events, labels)["visits"].sum()  # the whole record holds the last 5 years


def test_small_strata_say_too_few_instead_of_a_ci():
    from baselines import stratified_results
    from baselines.metrics import MIN_CASES

    n = 30
    ids, labels = list(range(n)), [i % 2 == 0 for i in range(n)]
    scores = _scores("m", ids, labels, np.linspace(0, 1, n))
    strata = pl.DataFrame({"subject_id": ids, "prediction_time": [datetime(2020, 1, 1)] * n,
                           "sex": ["F" if i < 4 else "M" for i in range(n)]})
    results = {r.stratum: r for r in stratified_results(scores, strata, n_resamples=50)}
    assert results["F"].auroc is None and results["F"].note == f"too few: 2 cases (< {MIN_CASES})"
    assert results["M"].auroc is not None  # 13 cases and 13 controls


def test_runs_with_too_few_patients_are_never_on_the_pareto_front():
    from baselines import evaluate
    from benchmarks.report.profile import RunProfile, selection_view
    from benchmarks.report.results import ModelResult, Quantiles

    def result(model, n, source, kind="prediction_file"):
        labels = np.arange(2 * n) < n
        e = evaluate(_scores(model, range(2 * n), labels, labels + np.linspace(0, 0.5, 2 * n)), n_resamples=50)
        return ModelResult(cohort="lung", gap_days=365, model=model, kind=kind, source=source, evaluation=e,
                           seconds=1.0)

    tiny, lr = result("tiny", 2, "tiny.parquet"), result("lr", 40, None, "baseline")
    q = Quantiles.of([1.0])
    profile = RunProfile(name="tiny", llm_model="x", variant="one_stage", source="tiny.parquet", patients=4,
                         statuses={}, profiled=4, cached_patients=0, runtime_s=Quantiles.of([0.0001]), wall_s=q,
                         stages={}, prompt_tokens=q, completion_tokens=q, total_tokens=q,
                         cost_usd=Quantiles.of([0.0]), total_cost_usd=0.0, unpriced_calls=0, llm_calls=q,
                         timeline_tokens=q, chunks=q, by_tokens=[], by_chunks=[])
    points = {p.name: p for p in selection_view([profile], [tiny], [lr])}
    assert tiny.evaluation.auroc.value == 1.0 and points["tiny"].too_few and not points["tiny"].on_pareto_front
    assert points["lr"].on_pareto_front  # faster, better and cheaper runs would dominate it, but tiny may not


def test_tables_put_n_beside_every_auroc_and_say_too_few_instead_of_a_number(tmp_path):
    import re

    from benchmarks.report import tables
    from report_fixtures import build_report_data

    data = build_report_data(tmp_path)
    r = data.results
    table = tables.metric_table(r.results, ["lung", "any_cancer"], "auroc", "t")
    cells = [c for row in table.rows for c in row[2:] if c != "–"]
    assert cells and all(re.search(r" n=\d+/\d+", c) or c.startswith("too few (n=") for c in cells)
    one_stage = table.columns.index("one_stage · smollm2-135m-instruct-q4_1")
    assert table.rows[0][one_stage] == "too few (n=2 cases, 2 controls)"  # main: '1.000 (1.000–1.000) n=2/2 too few'
    paired = tables.paired_table(r.paired)
    assert len(paired.rows) == 10 and all(row[4] in ("2 / 2", "12 / 12") for row in paired.rows)
    small = [row for row in paired.rows if row[4] == "2 / 2"]
    assert small and all(row[5] == row[8] == "too few (n=2 cases, 2 controls)" for row in small)  # main: +0.500 (…)
    models = tables.model_table(r.results)
    tiny = next(row for row in models.rows if row[1] == "one_stage · smollm2-135m-instruct-q4_1")
    assert tiny[7] == tiny[8] == "too few (n=2 cases, 2 controls)"
    assert tables.settings_table(r.settings).collapsed


def test_figure_axes_hold_every_point():
    from benchmarks.report.figures import span

    low, high = span([0.12, 0.3, 1.0], low=0.4, high=1.0)
    assert low < 0.12 and high > 1.0


def test_one_colour_per_model_across_the_report(tmp_path):
    from benchmarks.report.sections import report_palette
    from report_fixtures import build_report_data

    palette = report_palette(build_report_data(tmp_path))
    colours = [palette[name] for name in palette.names()]
    assert len(colours) == len(set(colours))


# ------------------------------------------------------------------------------------------------ agent sensitivity
def _scripted_runner(calls: list):
    """An `AgentRunner` double: records each request and writes a prediction file scoring cases above controls
    except one case (so the AUROC is not trivially 1)."""
    from benchmarks.report.report_data import AgentRun
    from benchmarks.report.settings import PredictionSource

    def run(request):
        calls.append(request)
        labels = pl.read_parquet(request.labels)
        out = request.out_dir / request.variants[0] / "predictions.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        score = pl.when(pl.col("boolean_value")).then(0.9).otherwise(0.2)
        (labels.with_columns(predicted_boolean_probability=pl.when(pl.int_range(pl.len()) == 0).then(0.1)
                             .otherwise(score), model=pl.lit("scripted"), variant=pl.lit(request.variants[0]))
         .write_parquet(out))
        return AgentRun(sources=[PredictionSource(path=out, cohort=request.cohort)], commands=[f"run {out}"],
                        seconds=0.0)
    return run


def test_agents_run_per_budget_and_gap_and_reuse_the_whole_record_run(small_dataset, tmp_path):
    from datetime import timedelta

    from sklearn.metrics import roc_auc_score

    from benchmarks.report.agent_sensitivity import run_agent_sensitivity
    from benchmarks.report.cohort_tasks import CohortOutcome, CohortTask
    from benchmarks.report.report_data import AgentRequest
    from benchmarks.report.timelines import token_counts

    root, labels = small_dataset
    settings = ReportSettings(out=tmp_path, cohorts=("lung",), agent_patients=4, agent_variants=("one_stage",
                              "two_stage"), agent_max_tokens=None, truncation_budgets=(600, 10_000_000),
                              gap_years=(0.5, 1.0), n_resamples=50)
    subset = labels.head(4)  # 2 cases, 2 controls
    (tmp_path / "agents").mkdir()
    subset.write_parquet(tmp_path / "agents" / "labels.parquet")
    request = AgentRequest(dataset=root, labels=tmp_path / "agents" / "labels.parquet", out_dir=tmp_path / "agents",
                           cohort="lung", cancer="lung", any_cancer=False, variants=("one_stage", "two_stage"),
                           horizon_days=365)
    calls: list = []
    runner = _scripted_runner(calls)
    full = runner(request).sources[0].path
    calls.clear()
    # gap 0.5 y: a rebuilt cohort where one control of the subset is missing and times moved; gap 1 y: the same rows
    missing = int(subset.filter(~pl.col("boolean_value"))["subject_id"][0])
    shifted = labels.filter(pl.col("subject_id") != missing).with_columns(
        pl.col("prediction_time") - timedelta(days=1))
    outcomes = [CohortOutcome(task=CohortTask(definition="lung", out_dir=tmp_path, models=(), seed=0, n_resamples=50,
                                              gap_days=days), cohort="lung", gap_days=days, test_labels=test)
                for days, test in ((183, shifted), (365, labels))]
    truncation, gaps, commands, _ = run_agent_sensitivity(settings, request, full, runner, outcomes, root,
                                                          progress=lambda line: None)
    longest = int(token_counts(root, subset)["xml_tokens"].max())
    assert 600 < longest < 10_000_000
    # one run per budget below the longest timeline, one per gap whose patients or horizon differ; one variant
    assert [(c.truncate_tokens, c.horizon_days, c.variants) for c in calls] == [
        (600, 365, ("one_stage",)), (None, 183, ("one_stage",))]
    assert commands == [f"run {c.out_dir / 'one_stage' / 'predictions.parquet'}" for c in calls]
    by_budget = {p.budget_tokens: p for p in truncation}
    assert set(by_budget) == {None, 600, 10_000_000}
    assert by_budget[10_000_000].reused_full_run and by_budget[10_000_000].source == str(full)
    assert not by_budget[600].reused_full_run and by_budget[600].longest_timeline_tokens == longest
    by_gap = {p.gap_days: p for p in gaps}
    assert by_gap[365].reused_full_run and not by_gap[183].reused_full_run and by_gap[183].gap_years == 0.5
    gap_labels = pl.read_parquet(calls[1].labels)
    assert gap_labels.height == 4 and int(gap_labels["boolean_value"].sum()) == 2
    assert missing not in gap_labels["subject_id"].to_list()  # topped up from the rebuilt cohort
    kept = gap_labels.join(subset, on="subject_id", suffix="_main")
    assert kept.height == 3 and (kept["prediction_time"] < kept["prediction_time_main"]).all()  # the gap's times
    for point in [*truncation, *gaps]:
        assert (point.n_cases, point.n_controls) == (2, 2) and point.too_few and "too few" in point.text()
        frame = pl.read_parquet(point.source)
        direct = roc_auc_score(frame["boolean_value"], frame["predicted_boolean_probability"])
        assert point.auroc == pytest.approx(direct)
        assert point.auroc_ci is not None


def test_agent_sensitivity_can_be_turned_off(small_dataset, tmp_path):
    from benchmarks.report.agent_sensitivity import run_agent_sensitivity

    root, labels = small_dataset
    calls: list = []
    for changes in ({"agent_sensitivity": "none"}, {"agent_sensitivity_patients": 0}):
        settings = ReportSettings(out=tmp_path, cohorts=("lung",), **changes)
        assert run_agent_sensitivity(settings, None, tmp_path, _scripted_runner(calls), [], root, print) == (
            [], [], [], 0.0)
    assert calls == []


def test_agent_points_appear_beside_the_baselines_with_their_n(tmp_path):
    from benchmarks.report import tables
    from report_fixtures import build_report_data

    data = build_report_data(tmp_path / "report")
    r = data.results
    truncation = tables.truncation_table(r.truncation, r.agent_truncation)
    agent_column = truncation.columns.index("one_stage · smollm2-135m-instruct-q4_1 (agents)")
    cells = {row[0]: row[agent_column] for row in truncation.rows}
    assert cells["2,000"] == "too few (n=2 cases, 2 controls)" and "run reused" in cells["32,000"]
    assert cells["whole record"] == "too few (n=2 cases, 2 controls)"
    gap = tables.gap_table(r.gaps, r.agent_gaps)
    agent_row = next(row for row in gap.rows if row[1].endswith("(agents)"))
    assert agent_row[2] == "too few (n=1 cases, 1 controls)"  # 1 case + 1 control: never a number
    assert "n=40/40" in gap.rows[0][2]


def test_agents_run_only_at_the_gaps_asked(small_dataset, tmp_path):
    from benchmarks.report.agent_sensitivity import run_agent_sensitivity
    from benchmarks.report.cohort_tasks import CohortOutcome, CohortTask
    from benchmarks.report.report_data import AgentRequest

    root, labels = small_dataset
    with pytest.raises(ValidationError, match="agent_gap_years"):
        ReportSettings(out=tmp_path, gap_years=(0.5, 1.0), agent_gap_years=(2.0,))
    settings = ReportSettings(out=tmp_path, cohorts=("lung",), agent_patients=2, truncation_budgets=(),
                              gap_years=(0.5, 1.0), agent_gap_years=(1.0,), n_resamples=50)
    labels.head(4).write_parquet(tmp_path / "labels.parquet")
    request = AgentRequest(dataset=root, labels=tmp_path / "labels.parquet", out_dir=tmp_path / "agents",
                           cohort="lung", cancer="lung", any_cancer=False, variants=("one_stage",), horizon_days=365)
    calls: list = []
    full = _scripted_runner(calls)(request).sources[0].path
    outcomes = [CohortOutcome(task=CohortTask(definition="lung", out_dir=tmp_path, models=(), seed=0, n_resamples=50,
                                              gap_days=days), cohort="lung", gap_days=days, test_labels=labels)
                for days in (183, 365)]
    truncation, gaps, _, _ = run_agent_sensitivity(settings, request, full, _scripted_runner(calls), outcomes, root,
                                                   progress=lambda line: None)
    assert truncation == [] and [p.gap_days for p in gaps] == [365] and gaps[0].reused_full_run
    assert len(calls) == 1  # the whole-record run only: 183 d not asked, 365 d the same rows as the whole record


def test_model_choice_compares_two_prediction_files_on_the_patients_both_scored():
    import numpy as np

    from baselines import ModelScores
    from benchmarks.report.paired import model_choice_comparisons

    rng = np.random.default_rng(0)
    t = np.array(["2020-01-01"] * 60, "datetime64[us]")
    labels = np.arange(60) % 2 == 0
    good = ModelScores("gpt", np.arange(60), t, labels, labels + rng.normal(0, 0.6, 60))
    weak = ModelScores("small", np.arange(20, 80), t, np.r_[labels[20:], labels[:20]], rng.normal(0, 1, 60))
    (choice,) = model_choice_comparisons("lung", [good, weak], [], n_resamples=200, seed=0)
    assert (choice.agent, choice.comparator, choice.comparator_kind) == ("gpt", "small", "prediction_file")
    assert choice.n_cases + choice.n_controls == 40  # subjects 20-59: the patients both files scored
    assert choice.difference is not None and choice.difference.value == choice.agent_auroc - choice.comparator_auroc


# ------------------------------------------------------------------------------------------------ small numbers
def _captured_figure(monkeypatch):
    """The matplotlib figure a `benchmarks.report.figures` function drew (its PNG step records it)."""
    from benchmarks.report import figures

    drawn = []
    real = figures._png

    def keep(fig):
        drawn.append(fig)
        return real(fig)

    monkeypatch.setattr(figures, "_png", keep)
    return drawn


def test_results_json_gives_no_number_on_too_few_and_keeps_the_raw_value_named(tmp_path):
    """On main results.json said auroc.value 1.0 for the 2+2 agent run like any other; now the number is null there,
    the raw value sits under too_few_raw with the counts, and reading the file back restores it."""
    import json

    from benchmarks.report.report_data import ReportResults
    from report_fixtures import build_report_data

    data = build_report_data(tmp_path)
    saved = json.loads(data.results.model_dump_json())
    tiny = next(r for r in saved["results"] if r["model"].startswith("one_stage"))
    assert tiny["too_few"] is True and tiny["evaluation"]["auroc"] is None and tiny["evaluation"]["auprc"] is None
    raw = tiny["too_few_raw"]
    assert (raw["n_cases"], raw["n_controls"], raw["minimum"]) == (2, 2, 10)
    assert set(raw["values"]) == {"evaluation.auroc", "evaluation.auprc"}
    assert all(r["too_few"] is False and r["evaluation"]["auroc"]["value"] > 0 for r in saved["results"]
               if not r["model"].startswith("one_stage"))
    small_pairs = [c for c in saved["paired"] if c["n_cases"] == 2]
    assert small_pairs and all(c["agent_auroc"] is None and c["difference"] is None and c["too_few"]
                               for c in small_pairs)
    selection = {p["name"]: p for p in saved["selection"]}
    assert selection[tiny["model"]]["auroc"] is None and selection[tiny["model"]]["too_few"]
    assert all(p["auroc_ci"]["lower"] <= p["auroc"] <= p["auroc_ci"]["upper"] for p in saved["selection"]
               if not p["too_few"])  # model selection with CIs
    assert ReportResults.model_validate(saved) == data.results


def test_too_few_runs_are_left_out_of_every_figure_and_named_in_the_caption(tmp_path, monkeypatch):
    """On main the 2+2 agent run sat (hollow) among the others in the AUROC, paired, ROC and selection figures."""
    from benchmarks.report.sections import build_sections
    from report_fixtures import build_report_data

    drawn = _captured_figure(monkeypatch)
    data = build_report_data(tmp_path)
    sections = {s.id: s for s in build_sections(data)}
    tiny = "one_stage · smollm2-135m-instruct-q4_1"
    by_id = {f.id: f for s in sections.values() for f in s.figures}
    for figure_id in ("fig-auroc", "fig-roc-pr", "fig-selection", "fig-paired"):
        assert "Not drawn (fewer than 10 cases or controls)" in by_id[figure_id].caption, figure_id
        assert "too few (n=2 cases, 2 controls)" in by_id[figure_id].caption
    texts = []
    for fig in drawn:
        labels = " ".join(ax.get_xlabel() + ax.get_ylabel() for ax in fig.axes)
        if not any(word in labels for word in ("AUROC", "positive rate", "precision")):
            continue  # the latency figure shows every run's runtime, not its AUROC
        for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
            texts += [t.get_text() for t in legend.get_texts()]
    assert texts and not any(t.startswith(tiny) for t in texts)
    assert any(t.startswith("two_stage") for t in texts)  # the 12+12 run is drawn


def test_auroc_axes_stay_within_zero_and_one(tmp_path, monkeypatch):
    """On main the AUROC forest plot's x axis ran to 1.1 (and the strata plot's past 1)."""
    from benchmarks.report.sections import build_sections
    from report_fixtures import build_report_data

    drawn = _captured_figure(monkeypatch)
    build_sections(build_report_data(tmp_path))
    auroc_axes = [ax for fig in drawn for ax in fig.axes if "AUROC" in ax.get_xlabel() + ax.get_ylabel()]
    assert len(auroc_axes) >= 5
    for ax in auroc_axes:
        limits = ax.get_xlim() if "AUROC" in ax.get_xlabel() and "difference" not in ax.get_xlabel() else ax.get_ylim()
        if "difference" in ax.get_xlabel():
            continue
        assert 0.0 <= limits[0] < limits[1] <= 1.0, (ax.get_xlabel(), ax.get_ylabel(), limits)


def test_strata_figures_have_a_legend_of_every_model(tmp_path, monkeypatch):
    """On main a model whose first stratum was too small got no legend entry (the figures had none at all)."""
    from benchmarks.report import figures
    from benchmarks.report.sections import report_palette
    from report_fixtures import build_report_data

    data = build_report_data(tmp_path)
    drawn = _captured_figure(monkeypatch)
    item = data.results.strata[0]
    first = item.results[0].stratum
    shrunk = [r.model_copy(update={"auroc": None, "auprc": None}) if r.stratum == first else r for r in item.results]
    figures.strata_plot(shrunk, item.cohort, report_palette(data))
    labels = [t.get_text() for legend in drawn[0].legends for t in legend.get_texts()]
    assert labels == list(dict.fromkeys(r.model for r in item.results))


def test_captions_give_the_bootstrap_count(tmp_path):
    from benchmarks.report.sections import build_sections
    from report_fixtures import RESAMPLES, build_report_data

    sections = build_sections(build_report_data(tmp_path))
    captions = {f.id: f.caption for s in sections for f in s.figures}
    for figure_id in ("fig-auroc", "fig-paired", "fig-truncation", "fig-gap", "fig-selection", "fig-strata-lung"):
        assert f"{RESAMPLES} bootstrap resamples" in captions[figure_id], figure_id
    notes = {t.id: t.note or "" for s in sections for t in s.tables}
    assert f"{RESAMPLES} resamples" in notes["table-auroc"] and f"{RESAMPLES} resamples" in notes["table-selection"]


def test_a_line_through_points_that_reuse_one_run_is_not_drawn(tmp_path, monkeypatch):
    """On main the trajectory-length figure joined agent points that all reused one run by a dashed line."""
    from benchmarks.report import figures
    from benchmarks.report.results import AgentSensitivityPoint
    from benchmarks.report.sections import report_palette
    from report_fixtures import build_report_data

    data = build_report_data(tmp_path)
    interval = data.results.results[0].evaluation.auroc
    common = dict(analysis="truncation", cohort="lung", model="agent", gap_days=365, n_cases=20, n_controls=20,
                  auroc=0.7, auroc_ci=interval, longest_timeline_tokens=900)
    reused = [AgentSensitivityPoint(budget_tokens=b, reused_full_run=b is not None, source="full.parquet", **common)
              for b in (None, 2000, 8000)]
    drawn = _captured_figure(monkeypatch)
    figures.truncation_plot(data.results.truncation, "lung", report_palette(data), reused)
    dashed = [line for line in drawn[0].axes[0].get_lines() if line.get_linestyle() == "--"]
    assert dashed == []
    own = [*reused[:1], AgentSensitivityPoint(budget_tokens=2000, source="own.parquet", **common)]
    figures.truncation_plot(data.results.truncation, "lung", report_palette(data), own)
    assert [line for line in drawn[1].axes[0].get_lines() if line.get_linestyle() == "--"]


def test_realism_no_longer_says_leakage_would_give_one_and_quotes_the_record_length_baselines():
    from benchmarks.report.realism import realism_verdict

    v = realism_verdict({"lung": 0.8, "any_cancer": 0.75}, (0.6, 0.9), synthetic=True, record_length=(0.61, 0.65))
    assert "perfect separation" not in v.paragraph and "leakage would give" not in v.paragraph
    assert "0.61–0.65" in v.paragraph and "structure alone" in v.paragraph
    small = realism_verdict({}, (0.6, 0.9), synthetic=False, too_few={"lung": (2, 2)})
    assert "too few (n=2 cases, 2 controls)" in small.paragraph


def test_a_report_whose_cohorts_are_all_skipped_exits_non_zero_in_one_line(tmp_path, capsys):
    """On main `trajonco report` printed 'report: …' and exited 0 when every cohort was skipped."""
    from jobs import report
    from spellings import write_mimic_style

    root = write_mimic_style(tmp_path / "mimic")  # lung, breast, colorectal only: no liver case
    code = report.main(["--quick", "--dataset", str(root), "--cohorts", "liver", "--out", str(tmp_path / "out"),
                        "--agent-patients", "0", "--budgets", "", "--gap-years", "", "--workers", "1",
                        "--judge-patients", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == report.NOTHING_TO_SHOW != 0
    assert len(err) == 1 and err[0].startswith("error: nothing to show") and "liver" in err[0]
    assert (tmp_path / "out" / "report.html").is_file()


def test_the_report_over_a_mimic_style_dataset_finishes_and_says_what_is_too_small(tmp_path):
    """On main the report (and `trajonco insights`) died with a traceback in the patient-map step on a MIMIC-style
    dataset whose agents' events all reduce to one word; and Table 1 counted the tokens of a sample only."""
    import pyarrow.parquet as pq

    from benchmarks.report import PredictionSource, ReportSettings, reproduce
    from benchmarks.report.agent_analyses import insights_builder
    from vista.shared.meds.task_key import TaskKey
    from spellings import write_mimic_style
    from test_insights import CONTEXT, patient_result
    from trajonco.agents.schemas import RiskLevel
    from trajonco.prediction_rows import row_from_result, rows_to_table
    from vista.shared.llm.task_usage import TaskUsage

    root = write_mimic_style(tmp_path / "mimic")
    common = dict(dataset=root, cohorts=("lung", "any_cancer"), truncation_budgets=(), gap_years=(), agent_patients=0,
                  workers=1, n_resamples=50)
    first = reproduce(ReportSettings.quick_defaults(out=tmp_path / "report", **common), progress=lambda _: None)
    labels = pl.read_parquet(tmp_path / "report" / "cohorts" / "any_cancer" / "labels" / "test.parquet")
    rows = []
    for sid, when, case in labels.select("subject_id", "prediction_time", "boolean_value").iter_rows():
        result = patient_result(sid, [RiskLevel.LOW], ["cough"], 7 if case else 3).model_copy(
            update={"prediction_time": when})
        rows.append(row_from_result(TaskKey(sid, when), case, result, TaskUsage(), CONTEXT, wall_s=1.0))
    predictions = tmp_path / "agents" / "predictions.parquet"
    predictions.parent.mkdir()
    pq.write_table(rows_to_table(rows), predictions)
    outcome = reproduce(ReportSettings.quick_defaults(out=tmp_path / "report", predictions=(
        PredictionSource(path=predictions, cohort="any_cancer"),), **common),
        extra_sections=[insights_builder()], progress=lambda _: None)
    r = outcome.data.results
    assert outcome.html.is_file() and outcome.nothing_to_show is None and first.nothing_to_show is None
    assert r.insights and "too little signal" in (r.insights[0].embedding.map_reason or "")
    assert r.results and all(x.too_few for x in r.results)  # 2 and 6 test cases: no number anywhere
    page = outcome.html.read_text(encoding="utf-8")
    assert "too few (n=2 cases, 2 controls)" in page and "too few (n=6 cases, 6 controls)" in page
    assert "best AUROC" not in page
    for c in r.characteristics:  # Table 1 on the whole test cohort, not a sample
        info = next(i for i in r.cohorts if i.cohort == c.cohort)
        assert (c.cases.xml_tokens.n, c.controls.xml_tokens.n) == (info.test_cases, info.test_controls)
