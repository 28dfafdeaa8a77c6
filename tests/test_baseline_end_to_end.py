"""End to end on the synthetic generator: lung cohorts → features → logistic regression → metrics and strata.

The generator puts pre-diagnostic signal in only part of the cases, so a 1-year gap must give a realistic AUROC
(neither chance nor perfect); with no gap the work-up codes right before the diagnosis give the answer away,
which shows the features do see the window right up to the prediction time (and nothing after it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from baselines.evaluation import check_no_overlap, fit_and_score
from baselines.features import SummaryFeaturizer
from baselines.labels import read_labels
from baselines.metrics import evaluate
from baselines.models import LogisticRegressionBaseline
from baselines.predictions import PredictionFileModel, write_predictions
from baselines.stratify import cohort_strata, stratified_results
from trajonco.cohorts import build_cohort, load_definition
from vista.shared.meds.reader import MedsDataset
from vista.shared.synth import SynthConfig, generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lung_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("synth") / "lung"
    config = SynthConfig(n_subjects=4000, seed=0, workers=2, case_fraction=0.3, cancer_weights={"lung": 1.0})
    generate(config, root, progress=False)
    return root


def _lung_auroc(root: Path, out: Path, gap_days: int):
    result = build_cohort(root, load_definition("lung").with_overrides(gap_days=gap_days), out)
    train_labels, test_labels = read_labels(result.label_paths["train"]), read_labels(result.label_paths["test"])
    events = MedsDataset(root).scan()
    featurizer = SummaryFeaturizer()
    train, test = featurizer.fit_transform(events, train_labels), featurizer.transform(events, test_labels)
    check_no_overlap(train.subject_ids, test.subject_ids)
    [scores] = fit_and_score([LogisticRegressionBaseline(seed=0)], train, test)
    return scores, test_labels, events


def test_logistic_regression_on_lung_at_a_one_year_gap_is_realistic(lung_dataset, tmp_path):
    scores, test_labels, events = _lung_auroc(lung_dataset, tmp_path / "gap365", 365)
    assert scores.n >= 150 and 0.4 <= scores.n_positive / scores.n <= 0.6
    result = evaluate(scores, n_resamples=500)
    assert 0.65 <= result.auroc.value <= 0.92, result.auroc
    assert result.auroc.lower < result.auroc.value < result.auroc.upper
    assert result.calibration is not None and 0.0 < result.calibration.brier_score < 0.25

    # the same scores through a prediction file, as the LLM agents' scores arrive
    path = write_predictions(scores, tmp_path / "predictions" / "logistic_regression.parquet")
    again = PredictionFileModel(path).scores_for(test_labels)
    assert np.allclose(again.scores, scores.scores) and np.array_equal(again.subject_ids, scores.subject_ids)

    strata = cohort_strata(test_labels, events)
    by_stratifier = {r.stratifier for r in stratified_results(scores, strata, n_resamples=100)}
    assert by_stratifier == {"age_group", "sex", "visit_frequency", "screening", "cancer"}


def test_without_a_gap_the_work_up_before_diagnosis_gives_the_answer_away(lung_dataset, tmp_path):
    scores, _, _ = _lung_auroc(lung_dataset, tmp_path / "gap0", 0)
    assert evaluate(scores, n_resamples=100).auroc.value >= 0.97
