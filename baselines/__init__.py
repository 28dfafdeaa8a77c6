"""Supervised baselines (LR, KNN, XGBoost) on summary features, scored with the agents' prediction files; metrics.

Typical use::

    events = MedsDataset(root).scan()
    featurizer = SummaryFeaturizer()                                  # ≥ 1 % prevalence, fitted on training rows
    train = featurizer.fit_transform(events, read_labels("labels/train.parquet"))
    test = featurizer.transform(events, read_labels("labels/test.parquet"))
    models = make_baselines() + [PredictionFileModel("predictions/trajonco.parquet")]
    for scores in fit_and_score(models, train, test):                 # raises if a subject is in both cohorts
        print(evaluate(scores).auroc)                                 # AUROC with a stratified bootstrap 95 % CI

Builds on `vista` (MEDS reading) and `trajonco` (cohort labels); nothing here imports `jobs`.
"""

from baselines.errors import (
    BaselineDataError,
    BaselineError,
    EventDataError,
    FeatureMismatchError,
    LabelDataError,
    MetricInputError,
    NotFittedError,
    PredictionFileError,
    TrainTestOverlapError,
)
from baselines.evaluation import check_no_overlap, fit_and_score
from baselines.features import FeatureConfig, FeatureMatrix, FeatureVocabulary, SummaryFeaturizer
from baselines.labels import check_labels, read_labels
from baselines.metrics import Evaluation, Interval, bootstrap_interval, evaluate
from baselines.models import (
    BASELINES,
    KNNBaseline,
    LogisticRegressionBaseline,
    TunedBaseline,
    TuningReport,
    XGBoostBaseline,
    make_baselines,
)
from baselines.predictions import ModelScores, PredictionFileModel, write_predictions
from baselines.stratify import SCREENING_CANCERS, StratumResult, cohort_strata, stratified_results

__all__ = [
    "BASELINES",
    "SCREENING_CANCERS",
    "BaselineDataError",
    "BaselineError",
    "Evaluation",
    "EventDataError",
    "FeatureConfig",
    "FeatureMatrix",
    "FeatureMismatchError",
    "FeatureVocabulary",
    "Interval",
    "KNNBaseline",
    "LabelDataError",
    "LogisticRegressionBaseline",
    "MetricInputError",
    "ModelScores",
    "NotFittedError",
    "PredictionFileError",
    "PredictionFileModel",
    "StratumResult",
    "SummaryFeaturizer",
    "TrainTestOverlapError",
    "TunedBaseline",
    "TuningReport",
    "XGBoostBaseline",
    "bootstrap_interval",
    "check_labels",
    "check_no_overlap",
    "cohort_strata",
    "evaluate",
    "fit_and_score",
    "make_baselines",
    "read_labels",
    "stratified_results",
    "write_predictions",
]
