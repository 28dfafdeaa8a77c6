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

from baselines.errors import TrainTestOverlapError
from baselines.features import FeatureMatrix
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
