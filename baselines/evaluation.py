"""Fit the supervised baselines on the training cohort and score the test cohort — never the other way round.

`fit_and_score` is the one place models meet cohorts: it refuses to run when a subject is in both the training
and the test matrix (`check_no_overlap`) or when the two matrices were not built with the same fitted vocabulary,
fits every `TunedBaseline` on the training rows only, and returns each model's `ModelScores` on the test rows.
Models read from prediction files are not fitted; they are looked up.

>>> import numpy as np
>>> check_no_overlap(np.array([1, 2, 3]), np.array([4, 5]))
>>> check_no_overlap(np.array([1, 2, 3]), np.array([3, 4]))
Traceback (most recent call last):
...
baselines.errors.TrainTestOverlapError: 1 subject(s) are in both the training and the test cohort (first: [3]); a model must never be trained on test patients
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from baselines.errors import MetricInputError, TrainTestOverlapError
from baselines.features import FeatureMatrix
from baselines.metrics import PairedDifference, paired_auroc_difference
from baselines.models import TunedBaseline
from baselines.predictions import ModelScores, PredictionFileModel, scores_of

log = logging.getLogger(__name__)

RiskModel = TunedBaseline | PredictionFileModel


def check_no_overlap(train_subject_ids: np.ndarray, test_subject_ids: np.ndarray) -> None:
    """Raise `TrainTestOverlapError` when any subject id is in both arrays."""
    shared = np.intersect1d(np.asarray(train_subject_ids), np.asarray(test_subject_ids))
    if shared.size:
        raise TrainTestOverlapError(
            f"{shared.size} subject(s) are in both the training and the test cohort (first: {shared[:5].tolist()}); "
            "a model must never be trained on test patients")


def fit_and_score(models: Sequence[RiskModel], train: FeatureMatrix | None, test: FeatureMatrix) -> list[ModelScores]:
    """Fit each supervised model on ``train`` and score ``test``; prediction-file models just score ``test``.

    ``train`` may be None only when every model is a `PredictionFileModel`.
    """
    supervised = [m for m in models if isinstance(m, TunedBaseline)]
    if supervised:
        if train is None:
            raise ValueError(f"models {[m.name for m in supervised]} need a training FeatureMatrix")
        check_no_overlap(train.subject_ids, test.subject_ids)
        train.check_same_features(test)
    results: list[ModelScores] = []
    for model in models:
        started = time.perf_counter()
        if isinstance(model, TunedBaseline):
            assert train is not None
            model.fit(train.X, train.y)
            result = scores_of(model.name, test, model.scores(test))
            log.info("%s: fitted on %d training rows, chosen %s (%.1f s)", model.name, train.n_rows,
                     model.tuning_.chosen, time.perf_counter() - started)
        elif isinstance(model, PredictionFileModel):
            result = model.scores_for(test)
        else:
            raise TypeError(f"not a baseline or a prediction-file model: {type(model).__name__}")
        results.append(result)
    return results


def on_rows_of(scores: ModelScores, reference: ModelScores) -> ModelScores:
    """``scores`` re-scored on exactly the rows of ``reference`` (same subject and prediction time, its order).

    Used to put a baseline scored on a whole test cohort on the agents' subset. Raises `MetricInputError` naming
    the first row ``scores`` lacks, or a row whose label differs.

    >>> t = np.array(["2020-01-01"] * 3, "datetime64[us]")
    >>> whole = ModelScores("lr", np.array([1, 2, 3]), t, np.array([True, False, True]), np.array([.9, .1, .6]))
    >>> part = ModelScores("agent", np.array([3, 1]), t[:2], np.array([True, True]), np.array([.5, .5]))
    >>> on_rows_of(whole, part).scores.tolist()
    [0.6, 0.9]
    """
    index = {(int(s), np.datetime64(t, "us")): i for i, (s, t) in enumerate(zip(scores.subject_ids,
                                                                                  scores.prediction_times))}
    rows = []
    for s, t, label in zip(reference.subject_ids, reference.prediction_times, reference.labels):
        i = index.get((int(s), np.datetime64(t, "us")))
        if i is None:
            raise MetricInputError(f"{scores.model} has no score for subject {int(s)} at {t} ({reference.model} has)")
        if bool(scores.labels[i]) != bool(label):
            raise MetricInputError(f"subject {int(s)} is labelled differently by {scores.model} and {reference.model}")
        rows.append(i)
    at = np.asarray(rows, dtype=np.int64)
    return ModelScores(scores.model, scores.subject_ids[at], scores.prediction_times[at], scores.labels[at],
                       scores.scores[at])


def on_shared_rows(a: ModelScores, b: ModelScores) -> tuple[ModelScores, ModelScores]:
    """``a`` and ``b`` both restricted to the rows they both scored (same subject and prediction time), in ``a``'s
    order — to compare two prediction files (e.g. two LLMs) on the same patients. Raises `MetricInputError` when a
    shared row is labelled differently.

    >>> t = np.array(["2020-01-01"] * 3, "datetime64[us]")
    >>> a = ModelScores("gpt", np.array([1, 2, 3]), t, np.array([True, False, True]), np.array([.9, .1, .6]))
    >>> b = ModelScores("llama", np.array([3, 4]), t[:2], np.array([True, False]), np.array([.5, .2]))
    >>> [x.subject_ids.tolist() for x in on_shared_rows(a, b)]
    [[3], [3]]
    """
    keys_b = {(int(s), np.datetime64(t, "us")) for s, t in zip(b.subject_ids, b.prediction_times)}
    keep = np.array([(int(s), np.datetime64(t, "us")) in keys_b for s, t in zip(a.subject_ids, a.prediction_times)],
                    dtype=bool)
    shared = ModelScores(a.model, a.subject_ids[keep], a.prediction_times[keep], a.labels[keep], a.scores[keep])
    return shared, on_rows_of(b, shared)


def compare_on_same_rows(a: ModelScores, b: ModelScores, *, n_resamples: int = 2000, seed: int = 0) -> PairedDifference:
    """AUROC(a) − AUROC(b) with a paired bootstrap CI, ``b`` re-scored on the rows ``a`` scored."""
    aligned = on_rows_of(b, a)
    return paired_auroc_difference(a.labels, a.scores, aligned.scores, n_resamples=n_resamples, seed=seed)
