"""The errors the baselines raise: each message names the file (or data source), subject and field to fix.

>>> str(LabelDataError("labels/train.parquet", "null prediction_time", subject_id=12, field="prediction_time"))
"labels/train.parquet: subject 12: field 'prediction_time': null prediction_time"
>>> isinstance(TrainTestOverlapError("3 subjects are in both"), BaselineError)
True
"""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as SklearnNotFittedError

from vista.shared.errors import LocatedError


class BaselineError(Exception):
    """Base class of every error raised by `baselines`."""


class BaselineDataError(BaselineError, LocatedError):
    """Bad input data. ``source`` is the file (or a name for an in-memory table) the problem was found in."""


class LabelDataError(BaselineDataError):
    """A label table lacks a column, has the wrong type, null or duplicated rows."""


class EventDataError(BaselineDataError):
    """The MEDS event rows cannot feed the features: wrong columns or types, a labelled subject without rows."""


class PredictionFileError(BaselineDataError):
    """A prediction file lacks a column, has unusable scores or misses a subject being evaluated."""


class FeatureMismatchError(BaselineError, ValueError):
    """Two feature matrices (training and test) were not built with the same fitted vocabulary."""


class TrainTestOverlapError(BaselineError, ValueError):
    """A subject is in both the training and the test cohort: the evaluation would leak."""


class NotFittedError(BaselineError, SklearnNotFittedError):
    """A featurizer or model was used before ``fit`` (also a scikit-learn ``NotFittedError``)."""


class MetricInputError(BaselineError, ValueError):
    """Scores and labels cannot give the metric asked for (lengths differ, one class only, NaN scores...)."""
