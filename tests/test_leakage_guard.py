"""Leakage guard: the prediction time really hides the diagnosis.

On a synthetic dataset, a plain logistic regression on code counts (every row strictly before the prediction time),
trained on the training cohort and scored on the test cohort, must be near-perfect when the gap is 0 (the work-up
before the diagnosis is visible) and only moderately good with the default one-year gap. A cohort that let
diagnosis-time rows into the input would score ≈1.0 at one year; one that hid everything would score ≈0.5.
The bounds are fixed: if the synthetic data misses them, fix the generator, not the thresholds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from trajonco.cohorts import CohortResult, build_cohort, load_definition
from trajonco.cohorts.source import scan_events

pytestmark = pytest.mark.slow

MIN_TEST_CASES = 300


@pytest.fixture(scope="module")
def lung_heavy_dataset(tmp_path_factory) -> Path:
    """≈7k subjects, lung over half of the cancers, 45 % held out: > 300 lung cases in the test cohort."""
    from vista.shared.synth import SplitFractions, SynthConfig, generate

    root = tmp_path_factory.mktemp("leakage") / "meds"
    config = SynthConfig(
        n_subjects=7000,
        seed=11,
        case_fraction=0.3,
        cancer_weights={"lung": 1.0},
        splits=SplitFractions(train=0.5, tuning=0.05, held_out=0.45),
    )
    generate(config, root, progress=False)
    return root


def code_count_features(
    events: pl.LazyFrame, labels: pl.DataFrame, vocabulary: dict[str, int] | None = None
) -> tuple[sp.csr_matrix, dict[str, int]]:
    """log(1 + count) of every code in the rows strictly before each label's prediction time (one row per label)."""
    counts = (
        events.join(labels.lazy().select("subject_id", "prediction_time"), on="subject_id")
        .filter(pl.col("time") < pl.col("prediction_time"))
        .group_by("subject_id", "code")
        .len()
        .collect()
    )
    if vocabulary is None:
        vocabulary = {code: i for i, code in enumerate(sorted(counts["code"].unique().to_list()))}
    counts = counts.filter(pl.col("code").is_in(list(vocabulary)))
    position = {sid: i for i, sid in enumerate(labels["subject_id"].to_list())}
    rows = np.array([position[s] for s in counts["subject_id"].to_list()], dtype=np.int64)
    cols = np.array([vocabulary[c] for c in counts["code"].to_list()], dtype=np.int64)
    values = np.log1p(counts["len"].to_numpy().astype(np.float64))
    return sp.csr_matrix((values, (rows, cols)), shape=(labels.height, len(vocabulary))), vocabulary


def lung_auroc(dataset: Path, gap_days: int, out: Path) -> tuple[float, CohortResult]:
    result = build_cohort(dataset, load_definition("lung").with_overrides(gap_days=gap_days), out)
    assert result.train is not None
    events = scan_events(dataset)
    x_train, vocabulary = code_count_features(events, result.train)
    x_test, _ = code_count_features(events, result.test, vocabulary)
    model = LogisticRegression(max_iter=2000).fit(x_train, result.train["boolean_value"].to_numpy())
    auroc = float(roc_auc_score(result.test["boolean_value"].to_numpy(), model.predict_proba(x_test)[:, 1]))
    print(f"lung, gap {gap_days} d: {result.manifest.test.cases} test cases, AUROC {auroc:.3f}")
    return auroc, result


def test_gap_zero_sees_the_work_up(lung_heavy_dataset: Path, tmp_path: Path, record_property):
    auroc, result = lung_auroc(lung_heavy_dataset, 0, tmp_path / "gap0")
    record_property("auroc_gap_0", auroc)
    assert result.manifest.test.cases >= MIN_TEST_CASES
    assert auroc >= 0.95


def test_one_year_gap_hides_the_diagnosis(lung_heavy_dataset: Path, tmp_path: Path, record_property):
    auroc, result = lung_auroc(lung_heavy_dataset, 365, tmp_path / "gap365")
    record_property("auroc_gap_365", auroc)
    assert result.manifest.test.cases >= MIN_TEST_CASES
    assert 0.60 <= auroc <= 0.85
