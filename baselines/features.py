"""Summary feature vectors of each labelled patient's input window, as a sparse matrix for the supervised baselines.

The input window of a label row is the subject's static rows plus every row strictly before ``prediction_time``
(a row *at* the prediction time is outside it). From that window, with polars group-bys over the whole MEDS scan
joined to the labels (no per-patient Python loop), each row of the matrix gets:

- ``count:<code>`` — how many times the code occurs (every timed code but ``MEDS_BIRTH``);
- ``recency:<code>`` — 1 / (1 + years since the code's last occurrence): 1 for "today", towards 0 for "long ago",
  and 0 (absent) for "never", so that absence does not read as "very recent" to linear and distance models;
- ``last:<code>`` — the last numeric value of codes carrying one (labs, vitals), ties broken by the larger value;
- ``static:<code>`` — 1 for each static code (``GENDER//F``, ``RACE//…``, ``ETHNICITY//…``);
- ``demographic:age_years`` — age at prediction time, from ``MEDS_BIRTH`` (days / 365.25, as `Demographics.age_at`);
- ``summary:n_events``, ``summary:n_visit_days`` (distinct encounter dates; distinct event dates when the subject
  has no encounter codes), ``summary:record_years`` (first clinical event to prediction time).

The vocabulary is fitted on the training labels only: a feature is kept when it is present (stored, non-absent)
in at least ``min_prevalence`` of the training label rows — 1% by default, as in the TrajOnco benchmark. It is then
applied unchanged to the test labels, whose unseen codes are dropped.

>>> from datetime import datetime
>>> events = pl.LazyFrame({
...     "subject_id": [1, 1, 1, 1, 2, 2, 2],
...     "time": [None, datetime(1950, 1, 1), datetime(2019, 1, 1), datetime(2020, 1, 1),
...              None, datetime(1960, 1, 1), datetime(2019, 7, 1)],
...     "code": ["GENDER//F", "MEDS_BIRTH", "LOINC//718-7", "LOINC//718-7", "GENDER//M", "MEDS_BIRTH", "LOINC//718-7"],
...     "numeric_value": [None, None, 11.0, 9.5, None, None, 14.0],
... })
>>> labels = pl.DataFrame({"subject_id": [1, 2], "prediction_time": [datetime(2020, 1, 1)] * 2,
...                        "boolean_value": [True, False]})
>>> fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.5)).fit_transform(events, labels)
>>> fm.column("count:LOINC//718-7").tolist()  # the row at the prediction time does not count
[1.0, 1.0]
>>> fm.column("last:LOINC//718-7").tolist()
[11.0, 14.0]
>>> fm.column("static:GENDER//M").tolist()
[0.0, 1.0]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import polars as pl
import scipy.sparse as sp

from baselines.errors import EventDataError, FeatureMismatchError, NotFittedError
from baselines.labels import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID, check_labels
from vista.shared.meds import schema

log = logging.getLogger(__name__)

TIME, CODE, NUMERIC_VALUE = schema.TIME, schema.CODE, schema.NUMERIC_VALUE
SAMPLE = "_sample"  # position of the label row: the row of the feature matrix
DAYS_PER_YEAR = 365.25
ENCOUNTER_PREFIX = schema.ENCOUNTER_PREFIX + schema.SEP


class FeatureKind(StrEnum):
    """The families of summary features; a feature's name is ``<kind>:<key>``."""

    COUNT = "count"
    RECENCY = "recency"
    LAST_VALUE = "last"
    STATIC = "static"
    DEMOGRAPHIC = "demographic"
    SUMMARY = "summary"


AGE_KEY = "age_years"
SUMMARY_KEYS = ("n_events", "n_visit_days", "record_years")
KIND_ENUM = pl.Enum([k.value for k in FeatureKind])


@dataclass(frozen=True)
class FeatureConfig:
    """Which feature families to build and the prevalence a feature needs in the training labels to be kept."""

    min_prevalence: float = 0.01
    counts: bool = True
    recency: bool = True
    last_values: bool = True
    static: bool = True
    demographics: bool = True
    summary: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.min_prevalence, (int, float)) and 0.0 <= self.min_prevalence <= 1.0):
            raise ValueError(f"min_prevalence must be a fraction in [0, 1], not {self.min_prevalence!r}")
        if not any((self.counts, self.recency, self.last_values, self.static, self.demographics, self.summary)):
            raise ValueError("FeatureConfig turns every feature family off")

    def min_count(self, n_training_rows: int) -> int:
        """Smallest number of training rows a feature must be present in: ceil(min_prevalence × n), at least 1.

        >>> FeatureConfig().min_count(100), FeatureConfig().min_count(101), FeatureConfig(0.07).min_count(100)
        (1, 2, 7)
        """
        return max(1, math.ceil(self.min_prevalence * n_training_rows - 1e-9))


def recency_from_days(days: np.ndarray | float) -> np.ndarray | float:
    """The stored recency value of a code last seen ``days`` ago: 1 / (1 + days / 365.25)."""
    return 1.0 / (1.0 + np.asarray(days) / DAYS_PER_YEAR)


def days_from_recency(value: np.ndarray | float) -> np.ndarray | float:
    """Inverse of `recency_from_days` (for reading a recency feature back as days)."""
    return (1.0 / np.asarray(value) - 1.0) * DAYS_PER_YEAR


@dataclass(frozen=True, eq=False)
class FeatureVocabulary:
    """The features kept after fitting: names in column order, and how they were chosen."""

    names: tuple[str, ...]
    n_training_rows: int
    min_count: int
    candidates: int  # features seen in the training windows before the prevalence filter
    config: FeatureConfig

    def index_frame(self) -> pl.DataFrame:
        """``kind``, ``key``, ``column``: the lookup used to place long-format values into matrix columns."""
        kinds, keys = zip(*(name.split(":", 1) for name in self.names)) if self.names else ((), ())
        return pl.DataFrame(
            {"kind": list(kinds), "key": list(keys), "column": np.arange(len(self.names), dtype=np.uint32)},
            schema={"kind": KIND_ENUM, "key": pl.Categorical, "column": pl.UInt32},
        )


@dataclass(frozen=True, eq=False)
class FeatureMatrix:
    """Summary features of a set of label rows: ``X`` (CSR, rows in label order) and who each row is."""

    X: sp.csr_matrix
    subject_ids: np.ndarray  # int64, one per row
    prediction_times: np.ndarray  # datetime64[us], one per row
    feature_names: tuple[str, ...]
    labels: np.ndarray | None = None  # bool, one per row, when the label table had boolean_value
    vocabulary: FeatureVocabulary | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n_rows, n_cols = self.X.shape
        if self.subject_ids.shape != (n_rows,) or self.prediction_times.shape != (n_rows,):
            raise ValueError(f"FeatureMatrix: {n_rows} rows but {self.subject_ids.shape[0]} subject ids / "
                             f"{self.prediction_times.shape[0]} prediction times")
        if len(self.feature_names) != n_cols:
            raise ValueError(f"FeatureMatrix: {n_cols} columns but {len(self.feature_names)} feature names")
        if self.labels is not None and self.labels.shape != (n_rows,):
            raise ValueError(f"FeatureMatrix: {n_rows} rows but {self.labels.shape[0]} labels")

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def y(self) -> np.ndarray:
        """The labels as a bool array (raises when the label table had no ``boolean_value``)."""
        if self.labels is None:
            raise ValueError("this FeatureMatrix was built from labels without boolean_value")
        return self.labels

    def column(self, name: str) -> np.ndarray:
        """One feature as a dense float array (0 where absent)."""
        try:
            j = self.feature_names.index(name)
        except ValueError:
            raise KeyError(f"no feature {name!r} (the matrix has {len(self.feature_names)} features)") from None
        return np.asarray(self.X[:, j].toarray()).ravel().astype(np.float64)

    def check_same_features(self, other: FeatureMatrix) -> None:
        """Raise `FeatureMismatchError` unless ``other`` has exactly these columns (same fitted vocabulary)."""
        if self.feature_names != other.feature_names:
            ours, theirs = set(self.feature_names), set(other.feature_names)
            raise FeatureMismatchError(
                f"feature columns differ ({len(self.feature_names)} vs {len(other.feature_names)}; "
                f"{len(ours - theirs)} only in the first, {len(theirs - ours)} only in the second): "
                "build both with the same fitted SummaryFeaturizer")


class SummaryFeaturizer:
    """Fits the feature vocabulary on training labels, then turns any label table into a `FeatureMatrix`."""

    def __init__(self, config: FeatureConfig | None = None):
        self.config = config or FeatureConfig()
        self.vocabulary: FeatureVocabulary | None = None

    def fit(self, events: Events, train_labels: pl.DataFrame, *,
            source: str = "training labels") -> SummaryFeaturizer:
        """Choose the features present in ≥ ``min_prevalence`` of the training label rows."""
        self.fit_transform(events, train_labels, source=source)
        return self

    def fit_transform(self, events: Events, train_labels: pl.DataFrame, *,
                      source: str = "training labels") -> FeatureMatrix:
        """`fit` and `transform` of the same labels, computing the windows once."""
        labels = check_labels(train_labels, source, require_outcome=False)
        long = window_features(events, labels, self.config, source=source)
        self.vocabulary = fit_vocabulary(long, labels.height, self.config)
        log.info("feature vocabulary: %d of %d candidate features kept (present in >= %d of %d training rows)",
                 len(self.vocabulary.names), self.vocabulary.candidates, self.vocabulary.min_count, labels.height)
        return _assemble(long, labels, self.vocabulary)

    def transform(self, events: Events, labels: pl.DataFrame, *, source: str = "labels") -> FeatureMatrix:
        """The feature matrix of ``labels`` with the fitted vocabulary (features unseen in training are dropped)."""
        if self.vocabulary is None:
            raise NotFittedError("SummaryFeaturizer.transform called before fit")
        labels = check_labels(labels, source, require_outcome=False)
        return _assemble(window_features(events, labels, self.config, source=source), labels, self.vocabulary)


# ------------------------------------------------------------------------------------------------ the polars query
def check_events(events: pl.LazyFrame, source: str) -> pl.LazyFrame:
    """``subject_id``, ``time``, ``code``, ``numeric_value`` of ``events`` after checking their types."""
    try:
        found = events.collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise EventDataError(source, f"cannot read the event rows ({' '.join(str(exc).split())})") from None
    expected = {SUBJECT_ID: "an integer type", TIME: "a naive datetime", CODE: "a string", NUMERIC_VALUE: "a float type"}
    for column, wanted in expected.items():
        if column not in found:
            raise EventDataError(source, f"column is missing (columns: {', '.join(found.names())})", field=column)
        dtype = found[column]
        ok = {SUBJECT_ID: dtype.is_integer(), TIME: isinstance(dtype, pl.Datetime) and dtype.time_zone is None,
              CODE: dtype == pl.String, NUMERIC_VALUE: dtype.is_float() or dtype == pl.Null}[column]
        if not ok:
            raise EventDataError(source, f"has type {dtype}, expected {wanted}", field=column)
    return events.select(
        pl.col(SUBJECT_ID).cast(pl.Int64), pl.col(TIME).dt.cast_time_unit("us"), pl.col(CODE).cast(pl.Categorical),
        pl.col(NUMERIC_VALUE).cast(pl.Float32),
    )


def _check_subjects_present(parts: Sequence[pl.LazyFrame], labels: pl.DataFrame, source: str) -> None:
    """Raise when a labelled subject has no row at all in the events (never silently featurize an empty record)."""
    wanted = labels.lazy().select(SUBJECT_ID).unique()
    found = [part.select(SUBJECT_ID).join(wanted, on=SUBJECT_ID, how="semi").unique().collect() for part in parts]
    missing = wanted.join(pl.concat(found).lazy(), on=SUBJECT_ID, how="anti").sort(SUBJECT_ID).collect()
    if missing.height:
        first = int(missing[SUBJECT_ID][0])
        raise EventDataError(source, f"{missing.height} labelled subject(s) have no rows in the MEDS data "
                             f"(first: {missing[SUBJECT_ID].head(5).to_list()})", subject_id=first, field=SUBJECT_ID)


def _check_values(window: pl.DataFrame, labels: pl.DataFrame) -> None:
    """Raise on a null code or a NaN/inf value in a window (a validated MEDS dataset has none; raw frames might)."""
    for column, bad in ((CODE, pl.col(CODE).is_null()), (NUMERIC_VALUE, ~pl.col(NUMERIC_VALUE).is_finite())):
        found = window.filter(bad)
        if found.height:
            subject = int(labels[SUBJECT_ID][int(found[SAMPLE][0])])
            problem = f"{found.height} {'null codes' if column == CODE else 'NaN/inf values'} in the input windows"
            raise EventDataError("MEDS events", problem, subject_id=subject, field=column)


Events = pl.LazyFrame | Sequence[pl.LazyFrame]
"""The MEDS rows features are computed from: one frame, or one per shard (`vista.shared.meds.shard_scan`), each
subject's rows all in one of them (as MEDS requires of shards). Per shard, only the labelled subjects' windows of
one shard are in memory at a time, and the result (a few values per label row and code) follows the cohort."""


def window_features(events: Events, labels: pl.DataFrame, config: FeatureConfig, *,
                    source: str = "labels") -> pl.DataFrame:
    """Every feature value of every label row in long format: ``_sample`` (label row), ``kind``, ``key``, ``value``.

    One row per (label row, feature) that is present; absent features have no row. ``events`` given shard by shard
    gives the same rows as the shards' concatenation.
    """
    parts = [events] if isinstance(events, pl.LazyFrame) else list(events)
    parts = [check_events(part, "MEDS events") for part in parts] or [check_events(_NO_EVENTS, "MEDS events")]
    _check_subjects_present(parts, labels, source)
    targets = _targets(labels)
    return pl.concat([_part_features(part, targets, labels, config) for part in parts], how="vertical")


def _targets(labels: pl.DataFrame) -> pl.LazyFrame:
    """``_sample`` (the label row), subject and prediction time of each label row."""
    return labels.lazy().select(pl.int_range(pl.len(), dtype=pl.UInt32).alias(SAMPLE), SUBJECT_ID, PREDICTION_TIME)


_NO_EVENTS = pl.LazyFrame(schema={SUBJECT_ID: pl.Int64, TIME: pl.Datetime("us"), CODE: pl.String,
                                  NUMERIC_VALUE: pl.Float32})


def _part_features(events: pl.LazyFrame, targets: pl.LazyFrame, labels: pl.DataFrame,
                   config: FeatureConfig) -> pl.DataFrame:
    """The long-format features of the label rows whose subjects have their rows in ``events``."""
    # The window is materialized once (≈ 20 bytes a row): every feature family below reads it, and letting polars
    # push each family's filters down would scan and join the shards once per family.
    rows = (events.join(targets, on=SUBJECT_ID, how="inner")
            .filter(pl.col(TIME).is_null() | (pl.col(TIME) < pl.col(PREDICTION_TIME)))
            .select(SAMPLE, TIME, CODE, NUMERIC_VALUE).collect())
    _check_values(rows, labels)
    window = rows.lazy()
    times = targets.select(SAMPLE, PREDICTION_TIME)
    timed = window.filter(pl.col(TIME).is_not_null())
    clinical = timed.filter(pl.col(CODE) != schema.BIRTH_CODE)

    parts: list[pl.LazyFrame] = []
    if config.counts or config.recency:
        per_code = clinical.group_by(SAMPLE, CODE).agg(n=pl.len(), last_time=pl.col(TIME).max()).join(times, on=SAMPLE)
        if config.counts:
            parts.append(_long(per_code, FeatureKind.COUNT, pl.col("n")))
        if config.recency:
            years = (pl.col(PREDICTION_TIME) - pl.col("last_time")).dt.total_microseconds() / (86_400e6 * DAYS_PER_YEAR)
            parts.append(_long(per_code, FeatureKind.RECENCY, 1.0 / (1.0 + years)))
    if config.last_values:
        last = clinical.filter(pl.col(NUMERIC_VALUE).is_not_null()).group_by(SAMPLE, CODE).agg(
            value=pl.col(NUMERIC_VALUE).sort_by(TIME, NUMERIC_VALUE).last())
        parts.append(_long(last, FeatureKind.LAST_VALUE, pl.col("value")))
    if config.static:
        static = window.filter(pl.col(TIME).is_null()).select(SAMPLE, CODE).unique()
        parts.append(_long(static, FeatureKind.STATIC, pl.lit(1.0)))
    if config.demographics:
        birth = timed.filter(pl.col(CODE) == schema.BIRTH_CODE).group_by(SAMPLE).agg(birth=pl.col(TIME).min())
        birth = birth.join(times, on=SAMPLE)
        age = (pl.col(PREDICTION_TIME).dt.date() - pl.col("birth").dt.date()).dt.total_days() / DAYS_PER_YEAR
        parts.append(birth.select(SAMPLE, kind=pl.lit(FeatureKind.DEMOGRAPHIC.value, KIND_ENUM),
                                  key=pl.lit(AGE_KEY, pl.Categorical), value=age.cast(pl.Float64)))
    if config.summary:
        is_visit = pl.col(CODE).cat.starts_with(ENCOUNTER_PREFIX)
        day = pl.col(TIME).dt.date()
        summary = clinical.group_by(SAMPLE).agg(
            n_events=pl.len().cast(pl.Float64),
            visit_days=day.filter(is_visit).n_unique(),
            event_days=day.n_unique(),
            first_time=pl.col(TIME).min(),
        ).join(times, on=SAMPLE).select(
            SAMPLE, "n_events",
            record_years=((pl.col(PREDICTION_TIME) - pl.col("first_time")).dt.total_microseconds()
                          / (86_400e6 * DAYS_PER_YEAR)),
            n_visit_days=pl.when(pl.col("visit_days") > 0).then("visit_days").otherwise("event_days").cast(pl.Float64),
        )
        parts.append(summary.unpivot(index=SAMPLE, on=list(SUMMARY_KEYS), variable_name="key", value_name="value")
                     .select(SAMPLE, kind=pl.lit(FeatureKind.SUMMARY.value, KIND_ENUM),
                             key=pl.col("key").cast(pl.Categorical), value="value"))
    return pl.concat(parts, how="vertical").collect()


def _long(frame: pl.LazyFrame, kind: FeatureKind, value: pl.Expr) -> pl.LazyFrame:
    return frame.select(SAMPLE, kind=pl.lit(kind.value, KIND_ENUM), key=pl.col(CODE), value=value.cast(pl.Float64))


# ------------------------------------------------------------------------------------------------ vocabulary + CSR
def fit_vocabulary(long: pl.DataFrame, n_training_rows: int, config: FeatureConfig) -> FeatureVocabulary:
    """Keep the features present in ≥ ``config.min_count(n_training_rows)`` label rows; columns sorted by kind, key."""
    presence = long.group_by("kind", "key").agg(rows=pl.len())  # one long row per (label row, feature)
    min_count = config.min_count(n_training_rows)
    # keys sorted as strings (lexical), never in the order codes entered polars' categorical cache
    kept = presence.filter(pl.col("rows") >= min_count).sort("kind", pl.col("key").cast(pl.String))
    names = tuple(f"{kind}:{key}" for kind, key in zip(kept["kind"].cast(pl.String).to_list(), kept["key"].to_list()))
    return FeatureVocabulary(names=names, n_training_rows=n_training_rows, min_count=min_count,
                             candidates=presence.height, config=config)


def _assemble(long: pl.DataFrame, labels: pl.DataFrame, vocabulary: FeatureVocabulary) -> FeatureMatrix:
    """Place the long-format values into a CSR matrix with the vocabulary's columns, rows in label order."""
    cells = long.join(vocabulary.index_frame(), on=["kind", "key"], how="inner")
    X = sp.coo_matrix(
        (cells["value"].to_numpy().astype(np.float32), (cells[SAMPLE].to_numpy(), cells["column"].to_numpy())),
        shape=(labels.height, len(vocabulary.names)),
    ).tocsr()  # (row, column) pairs are unique, so nothing is summed
    X.sort_indices()
    outcome = labels[BOOLEAN_VALUE].to_numpy() if BOOLEAN_VALUE in labels.columns else None
    return FeatureMatrix(
        X=X,
        subject_ids=labels[SUBJECT_ID].to_numpy().astype(np.int64),
        prediction_times=labels[PREDICTION_TIME].to_numpy().astype("datetime64[us]"),
        feature_names=vocabulary.names,
        labels=None if outcome is None else outcome.astype(bool),
        vocabulary=vocabulary,
    )

