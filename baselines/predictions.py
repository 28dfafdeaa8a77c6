"""Model scores on an evaluation cohort: zero-shot "models" read from prediction files, and writing scores back out.

Prediction files follow MEDS-DEV: ``subject_id``, optional ``prediction_time``, ``predicted_boolean_probability``
(plus anything else, ignored); a ``jobs.predict`` run is read with its ``prediction_details.parquet``
(`trajonco.prediction_files.read_predictions`), so its failed tasks count as null scores, not as absent rows. A `PredictionFileModel` lets the LLM agents and the single-agent baseline sit in
the same tables as the supervised baselines: it is "fitted" on nothing and scores a `FeatureMatrix` by looking its
rows up in the file. A row of the cohort without a usable score (absent, or null after a failed run) raises,
unless ``on_missing="subset"``, in which case the model is evaluated on the rows it scored and `ModelScores`
records how many were left out and why.

>>> import numpy as np
>>> s = ModelScores("lr", np.array([1, 2]), np.array(["2020-01-01", "2020-01-01"], "datetime64[us]"),
...                 np.array([True, False]), np.array([0.8, 0.3]))
>>> s.n, s.n_positive
(2, 1)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.atomic import atomic_path

from trajonco.prediction_files import PredictionFilesError, read_predictions

from baselines.errors import PredictionFileError
from baselines.features import FeatureMatrix
from baselines.labels import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID, check_labels

log = logging.getLogger(__name__)

PROBABILITY = "predicted_boolean_probability"
PREDICTED_VALUE = "predicted_boolean_value"
OnMissing = Literal["raise", "subset"]

PREDICTIONS_SCHEMA = pa.schema([
    pa.field(SUBJECT_ID, pa.int64(), nullable=False),
    pa.field(PREDICTION_TIME, pa.timestamp("us"), nullable=False),
    pa.field(BOOLEAN_VALUE, pa.bool_()),
    pa.field(PREDICTED_VALUE, pa.bool_()),
    pa.field(PROBABILITY, pa.float32()),
])
"""What `write_predictions` writes: MEDS-DEV's prediction columns, with the types its evaluator validates (a float32
score; `trajonco.prediction_files`)."""


@dataclass(frozen=True, eq=False)
class ModelScores:
    """One model's scores on the rows of an evaluation cohort it scored (label order kept)."""

    model: str
    subject_ids: np.ndarray  # int64
    prediction_times: np.ndarray  # datetime64[us]
    labels: np.ndarray  # bool
    scores: np.ndarray  # float64, higher = more likely a case
    n_missing: int = 0  # cohort rows without a score in the source (only with on_missing="subset")
    n_failed: int = 0  # cohort rows whose score is null in the source (failed runs; only with on_missing="subset")

    def __post_init__(self) -> None:
        n = self.subject_ids.shape[0]
        for name in ("prediction_times", "labels", "scores"):
            if getattr(self, name).shape != (n,):
                shape = getattr(self, name).shape
                raise ValueError(f"ModelScores({self.model}): {name} has shape {shape}, expected ({n},)")
        if n and not np.all(np.isfinite(self.scores)):
            bad = int(np.flatnonzero(~np.isfinite(self.scores))[0])
            raise PredictionFileError(self.model, "non-finite score", subject_id=int(self.subject_ids[bad]))

    @property
    def n(self) -> int:
        return int(self.subject_ids.shape[0])

    @property
    def n_positive(self) -> int:
        return int(self.labels.sum())

    def subset(self, mask: np.ndarray) -> ModelScores:
        """The rows where ``mask`` is True (for stratified results)."""
        return ModelScores(self.model, self.subject_ids[mask], self.prediction_times[mask], self.labels[mask],
                           self.scores[mask])

    def to_frame(self) -> pl.DataFrame:
        """MEDS-DEV prediction columns (predicted value = score ≥ 0.5 when scores are probabilities)."""
        is_probability = bool(self.n == 0 or (self.scores.min() >= 0.0 and self.scores.max() <= 1.0))
        return pl.DataFrame({
            SUBJECT_ID: self.subject_ids, PREDICTION_TIME: self.prediction_times, BOOLEAN_VALUE: self.labels,
            PREDICTED_VALUE: (self.scores >= 0.5) if is_probability else np.full(self.n, None),
            PROBABILITY: self.scores,
        }, schema={SUBJECT_ID: pl.Int64, PREDICTION_TIME: pl.Datetime("us"), BOOLEAN_VALUE: pl.Boolean,
                   PREDICTED_VALUE: pl.Boolean, PROBABILITY: pl.Float64})


def scores_of(model: str, data: FeatureMatrix, scores: np.ndarray) -> ModelScores:
    """`ModelScores` for every row of ``data`` (which must carry labels)."""
    return ModelScores(model, data.subject_ids, data.prediction_times, data.y, np.asarray(scores, dtype=np.float64))


def write_predictions(scores: ModelScores, path: str | Path) -> Path:
    """Write ``scores`` as a MEDS-DEV prediction parquet file (atomically: temp file, then rename)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        pq.write_table(scores.to_frame().to_arrow().cast(PREDICTIONS_SCHEMA), tmp)
    return path


class PredictionFileModel:
    """A zero-shot model whose scores come from a prediction file (LLM agents, single-agent baseline)."""

    def __init__(self, path: str | Path, name: str | None = None, *, probability_column: str = PROBABILITY,
                 on_missing: OnMissing = "raise"):
        if on_missing not in ("raise", "subset"):
            raise ValueError(f"on_missing must be 'raise' or 'subset', not {on_missing!r}")
        self.path = Path(path)
        self.name = name or self.path.stem
        self.probability_column = probability_column
        self.on_missing: OnMissing = on_missing
        self._table = self._read()

    def _read(self) -> pl.DataFrame:
        source = str(self.path)
        if not self.path.is_file():
            raise PredictionFileError(source, "prediction file not found")
        try:  # a jobs.predict run: with its prediction_details.parquet, so failed tasks count as failed, not absent
            frame = pl.from_arrow(read_predictions(self.path, columns=[SUBJECT_ID, PREDICTION_TIME, self.probability_column]))
        except PredictionFilesError as exc:
            raise PredictionFileError(exc.source, f"cannot read the prediction file ({exc.problem})",
                                      subject_id=exc.subject_id, field=exc.field) from None
        for column in (SUBJECT_ID, self.probability_column):
            if column not in frame.columns:
                raise PredictionFileError(source, f"column is missing (columns: {', '.join(frame.columns)})", field=column)
        if not frame.schema[SUBJECT_ID].is_integer():
            raise PredictionFileError(source, f"has type {frame.schema[SUBJECT_ID]}, expected an integer", field=SUBJECT_ID)
        if not frame.schema[self.probability_column].is_numeric():
            raise PredictionFileError(source, f"has type {frame.schema[self.probability_column]}, expected a number",
                                      field=self.probability_column)
        keys = [SUBJECT_ID] + ([PREDICTION_TIME] if PREDICTION_TIME in frame.columns else [])
        if PREDICTION_TIME in frame.columns and not isinstance(frame.schema[PREDICTION_TIME], pl.Datetime):
            raise PredictionFileError(source, f"has type {frame.schema[PREDICTION_TIME]}, expected a datetime",
                                      field=PREDICTION_TIME)
        frame = frame.select(pl.col(SUBJECT_ID).cast(pl.Int64),
                             *([pl.col(PREDICTION_TIME).dt.cast_time_unit("us")] if len(keys) == 2 else []),
                             pl.col(self.probability_column).cast(pl.Float64).alias("_score"))
        repeated = frame.filter(pl.struct(keys).is_duplicated())
        if repeated.height:
            raise PredictionFileError(source, f"{repeated.height} rows repeat the key {tuple(keys)}",
                                      subject_id=int(repeated[SUBJECT_ID][0]), field=SUBJECT_ID)
        bad = frame.filter(pl.col("_score").is_not_null() & ~pl.col("_score").is_finite())
        if bad.height:
            raise PredictionFileError(source, f"{bad.height} NaN/inf scores", subject_id=int(bad[SUBJECT_ID][0]),
                                      field=self.probability_column)
        return frame

    def fit(self, X=None, y=None) -> PredictionFileModel:
        """Nothing to train: the scores were produced zero-shot."""
        return self

    def scores_for(self, cohort: FeatureMatrix | pl.DataFrame) -> ModelScores:
        """This model's scores on the rows of ``cohort`` — a `FeatureMatrix` or a label table — in its row order.

        Rows without a usable score raise, or are left out and counted, as ``on_missing`` says.
        """
        if isinstance(cohort, pl.DataFrame):
            labels = check_labels(cohort, "cohort labels")
            subject_ids = labels[SUBJECT_ID].to_numpy()
            times = labels[PREDICTION_TIME].to_numpy().astype("datetime64[us]")
            outcome = labels[BOOLEAN_VALUE].to_numpy().astype(bool)
        else:
            subject_ids, times, outcome = cohort.subject_ids, cohort.prediction_times, cohort.y
        keys = [SUBJECT_ID] + ([PREDICTION_TIME] if PREDICTION_TIME in self._table.columns else [])
        rows = pl.DataFrame({SUBJECT_ID: subject_ids, PREDICTION_TIME: times},
                            schema={SUBJECT_ID: pl.Int64, PREDICTION_TIME: pl.Datetime("us")})
        joined = rows.join(self._table.with_columns(_in_file=pl.lit(True)), on=keys, how="left",
                           maintain_order="left", coalesce=True)
        absent = joined["_in_file"].is_null().to_numpy()
        no_score = joined["_score"].is_null().to_numpy()
        score = joined["_score"].to_numpy()
        n_missing, n_failed = int(absent.sum()), int((no_score & ~absent).sum())
        if no_score.any():
            first = int(subject_ids[np.flatnonzero(no_score)[0]])
            problem = (f"no usable score for {int(no_score.sum())} of {rows.height} cohort rows "
                       f"({n_missing} absent from the file, {n_failed} null)")
            if self.on_missing == "raise":
                raise PredictionFileError(str(self.path), problem, subject_id=first, field=self.probability_column)
            log.warning("%s: %s; evaluating the %d scored rows", self.path, problem, int((~no_score).sum()))
        keep = ~no_score
        return ModelScores(self.name, subject_ids[keep], times[keep], outcome[keep], score[keep],
                           n_missing=n_missing, n_failed=n_failed)
