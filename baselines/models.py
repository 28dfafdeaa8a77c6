"""The supervised baselines of the TrajOnco benchmark behind one scikit-learn interface, tuned on an 8:2 split.

Each baseline is a scikit-learn classifier (``fit(X, y)``, ``predict_proba(X)``) that tunes itself: ``fit`` splits
the *training* rows 8:2 (stratified, seeded), fits every candidate of a small grid on the 80 %, scores it by AUROC
on the 20 %, keeps the best and (by default) refits it on all training rows. What was tried is kept in ``tuning_``.

- `LogisticRegressionBaseline`: signed log1p → scaling → L2 logistic regression, C tuned;
- `KNNBaseline`: signed log1p → scaling → k-nearest neighbours, k tuned;
- `XGBoostBaseline`: gradient-boosted trees (``hist``), depth × learning-rate grid, rounds by early stopping.

The log transform tames heavy-tailed counts for the linear and distance models (trees do not need it) and keeps
sparse matrices sparse; scaling is by standard deviation only (``with_mean=False``) for the same reason.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.poisson(1.0, size=(400, 5)).astype(float); y = X[:, 0] + rng.normal(0, 1, 400) > 1.5
>>> model = LogisticRegressionBaseline(seed=0).fit(X, y)
>>> model.predict_proba(X).shape, model.tuning_.n_train, model.tuning_.n_validation
((400, 2), 320, 80)
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from xgboost import XGBClassifier

from baselines.errors import NotFittedError
from baselines.features import FeatureMatrix

log = logging.getLogger(__name__)

ParamValue = float | int | str
Params = dict[str, ParamValue]


class SignedLog1p(TransformerMixin, BaseEstimator):
    """sign(x) · log(1 + |x|), elementwise; zero stays zero, so sparse input stays sparse.

    >>> SignedLog1p().fit_transform(np.array([[0.0, np.e - 1, -(np.e - 1)]])).round(6).tolist()
    [[0.0, 1.0, -1.0]]
    """

    def fit(self, X, y=None):  # stateless
        return self

    def transform(self, X):
        if sp.issparse(X):
            out = X.copy().astype(np.float64)
            out.data = np.sign(out.data) * np.log1p(np.abs(out.data))
            return out
        X = np.asarray(X, dtype=np.float64)
        return np.sign(X) * np.log1p(np.abs(X))


class CandidateResult(BaseModel):
    """One grid point: its parameters and its AUROC on the validation split."""

    params: Params = Field(description="estimator parameters of this candidate")
    validation_auroc: float = Field(description="AUROC on the 20 % validation split of the training rows")


class TuningReport(BaseModel):
    """How a baseline was tuned: the split, every candidate's validation AUROC and the one chosen."""

    model: str = Field(description="baseline name")
    seed: int = Field(description="seed of the stratified train/validation split and of the estimator")
    n_train: int = Field(description="rows the candidates were fitted on")
    n_validation: int = Field(description="rows the candidates were scored on")
    candidates: list[CandidateResult] = Field(description="every candidate tried, in grid order")
    chosen: Params = Field(description="parameters of the selected candidate (as finally fitted)")
    refit_on_all_training_rows: bool = Field(description="whether the chosen candidate was refitted on train + validation")


class TunedBaseline(ClassifierMixin, BaseEstimator):
    """A classifier that picks its hyper-parameters on a stratified split of the rows given to ``fit``."""

    name: ClassVar[str] = "baseline"

    def __init__(self, *, validation_fraction: float = 0.2, seed: int = 0, refit: bool = True, n_jobs: int = 1):
        self.validation_fraction = validation_fraction
        self.seed = seed
        self.refit = refit
        self.n_jobs = n_jobs

    @abstractmethod
    def param_grid(self, n_train: int) -> list[Params]:
        """The candidates to try when ``n_train`` rows are available for fitting."""

    @abstractmethod
    def build(self, params: Params) -> BaseEstimator:
        """An unfitted estimator for one grid point."""

    def _fit_candidate(self, params: Params, X_fit, y_fit, X_val, y_val) -> tuple[BaseEstimator, Params]:
        """Fit one candidate; returns the estimator and its parameters as they should be refitted."""
        estimator = self.build(params)
        estimator.fit(X_fit, y_fit)
        return estimator, params

    def fit(self, X, y) -> TunedBaseline:
        """Tune on an 8:2 stratified split of (X, y), then refit the best candidate on all rows if ``refit``."""
        y = _binary_labels(y)
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in (0, 1), not {self.validation_fraction}")
        rows = np.arange(X.shape[0])
        fit_rows, val_rows = train_test_split(rows, test_size=self.validation_fraction, stratify=y,
                                              random_state=self.seed)
        X_fit, X_val, y_fit, y_val = X[fit_rows], X[val_rows], y[fit_rows], y[val_rows]
        results: list[CandidateResult] = []
        best: tuple[float, BaseEstimator, Params] | None = None
        for params in self.param_grid(len(fit_rows)):
            estimator, final_params = self._fit_candidate(params, X_fit, y_fit, X_val, y_val)
            auroc = float(roc_auc_score(y_val, estimator.predict_proba(X_val)[:, 1]))
            results.append(CandidateResult(params=final_params, validation_auroc=auroc))
            log.info("%s %s: validation AUROC %.4f", self.name, final_params, auroc)
            if best is None or auroc > best[0]:
                best = (auroc, estimator, final_params)
        assert best is not None, "param_grid returned no candidate"
        _, estimator, chosen = best
        if self.refit:
            estimator = self.build(chosen).fit(X, y)
        self.estimator_ = estimator
        self.classes_ = np.array([False, True])
        self.tuning_ = TuningReport(model=self.name, seed=self.seed, n_train=len(fit_rows), n_validation=len(val_rows),
                                    candidates=results, chosen=chosen, refit_on_all_training_rows=self.refit)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities of (False, True) per row, shape (n, 2)."""
        if not hasattr(self, "estimator_"):
            raise NotFittedError(f"{self.name}: predict_proba called before fit")
        return self.estimator_.predict_proba(X)

    def predict(self, X) -> np.ndarray:
        return self.predict_proba(X)[:, 1] >= 0.5

    def scores(self, data: FeatureMatrix) -> np.ndarray:
        """The positive-class probability of every row of ``data``."""
        return self.predict_proba(data.X)[:, 1]


class LogisticRegressionBaseline(TunedBaseline):
    """L2 logistic regression on scaled, log-transformed features; the inverse regularization C is tuned."""

    name: ClassVar[str] = "logistic_regression"
    C_GRID: ClassVar[tuple[float, ...]] = (0.0001, 0.001, 0.01, 0.1, 1.0)

    def param_grid(self, n_train: int) -> list[Params]:
        return [{"C": c} for c in self.C_GRID]

    def build(self, params: Params) -> Pipeline:
        return make_pipeline(SignedLog1p(), StandardScaler(with_mean=False),
                             LogisticRegression(C=float(params["C"]), max_iter=2000, random_state=self.seed))


class KNNBaseline(TunedBaseline):
    """k-nearest neighbours (Euclidean) on scaled, log-transformed features; k is tuned."""

    name: ClassVar[str] = "knn"
    K_GRID: ClassVar[tuple[int, ...]] = (5, 15, 45, 135, 405)

    def param_grid(self, n_train: int) -> list[Params]:
        ks = [k for k in self.K_GRID if k < n_train] or [max(1, n_train - 1)]
        return [{"n_neighbors": k} for k in ks]

    def build(self, params: Params) -> Pipeline:
        return make_pipeline(SignedLog1p(), StandardScaler(with_mean=False),
                             KNeighborsClassifier(n_neighbors=int(params["n_neighbors"]), n_jobs=self.n_jobs))


class XGBoostBaseline(TunedBaseline):
    """XGBoost (``hist``) over a depth × learning-rate grid; boosting rounds chosen by early stopping on validation AUC."""

    name: ClassVar[str] = "xgboost"
    MAX_ROUNDS: ClassVar[int] = 1000
    EARLY_STOPPING: ClassVar[int] = 40
    GRID: ClassVar[tuple[tuple[int, float], ...]] = ((3, 0.05), (3, 0.2), (6, 0.05), (6, 0.2))

    def param_grid(self, n_train: int) -> list[Params]:
        return [{"max_depth": depth, "learning_rate": rate} for depth, rate in self.GRID]

    def build(self, params: Params) -> XGBClassifier:
        return XGBClassifier(
            tree_method="hist", n_estimators=int(params.get("n_estimators", self.MAX_ROUNDS)),
            max_depth=int(params["max_depth"]), learning_rate=float(params["learning_rate"]),
            subsample=0.8, colsample_bytree=0.5, min_child_weight=1.0, reg_lambda=1.0,
            eval_metric="auc", n_jobs=self.n_jobs, random_state=self.seed, verbosity=0,
        )

    def _fit_candidate(self, params, X_fit, y_fit, X_val, y_val):
        estimator = self.build(params)
        estimator.set_params(early_stopping_rounds=self.EARLY_STOPPING)
        estimator.fit(X_fit, y_fit, eval_set=[(X_val, y_val)], verbose=False)
        return estimator, {**params, "n_estimators": int(estimator.best_iteration) + 1}


BASELINES: dict[str, type[TunedBaseline]] = {
    cls.name: cls for cls in (LogisticRegressionBaseline, KNNBaseline, XGBoostBaseline)
}
"""The supervised baselines by name."""


def make_baselines(names: Sequence[str] = tuple(BASELINES), *, seed: int = 0, n_jobs: int = 1) -> list[TunedBaseline]:
    """Fresh instances of the named baselines (all three by default).

    ``n_jobs`` threads per model. Keep 1 on a busy 2-core machine: XGBoost's OpenMP threads compete badly with other
    processes (a 100-round fit measured here went from 0.7 s at 1 thread to 24 s at 2 under a load of 6).
    """
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; expected some of {list(BASELINES)}")
    return [BASELINES[n](seed=seed, n_jobs=n_jobs) for n in names]


def _binary_labels(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, not shape {y.shape}")
    values = set(np.unique(y).tolist())
    if not values <= {0, 1, False, True}:
        raise ValueError(f"labels must be boolean or 0/1, found {sorted(values)[:5]}")
    if len(values) < 2:
        raise ValueError("training labels hold one class only; a classifier needs cases and controls")
    return y.astype(bool)


__all__ = ["BASELINES", "CandidateResult", "KNNBaseline", "LogisticRegressionBaseline", "SignedLog1p",
           "TunedBaseline", "TuningReport", "XGBoostBaseline", "make_baselines"]
