"""XML timeline sizes of labelled patients, and the input windows left by left-truncating them to token budgets.

Both render each patient's real timeline (`vista.shared.timeline.render_timeline`, events strictly before the prediction
time) from the MEDS dataset, reading only the labelled subjects. Token counts are tiktoken cl100k, as in the paper.

Left-truncation (the trajectory-length analysis): `vista.shared.timeline.truncate_left(timeline, N)` keeps the newest
whole timestamps that fit N tokens with the patient root (demographics). The *window start* of a patient at
budget N is the first kept timestamp (None when the whole timeline fits); `truncate_events` then keeps a MEDS
row when it is static, the birth row (the root's demographics survive truncation), or timed at or after it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

import polars as pl

from benchmarks.report.errors import ReportError, ReportInputError
from vista.shared.meds import schema
from vista.shared.meds.reader import MedsDataset
from vista.shared.timeline import Timeline, TimelineError, render_timeline, truncate_left

SID, PT = "subject_id", "prediction_time"
DAYS_PER_YEAR = 365.25
WINDOW_START = "window_start"


def sample_per_role(labels: pl.DataFrame, per_role: int, seed: int) -> pl.DataFrame:
    """At most ``per_role`` cases and ``per_role`` controls of ``labels`` (seeded; all of a role when fewer).

    >>> from datetime import datetime
    >>> labels = pl.DataFrame({"subject_id": range(10), "prediction_time": [datetime(2020, 1, 1)] * 10,
    ...                        "boolean_value": [True] * 3 + [False] * 7})
    >>> sample_per_role(labels, 5, seed=0)["boolean_value"].value_counts(sort=True).rows()
    [(False, 5), (True, 3)]
    """
    parts = []
    for outcome in (True, False):
        role = labels.filter(pl.col("boolean_value") == outcome)
        parts.append(role.sample(n=min(per_role, role.height), seed=seed, shuffle=False) if role.height else role)
    return pl.concat(parts).sort(SID, PT)


def _check_one_row_per_subject(labels: pl.DataFrame, source: str) -> None:
    repeated = labels.filter(pl.col(SID).is_duplicated())
    if repeated.height:
        raise ReportInputError(source, f"{repeated.height} rows share a subject; timelines are rendered per subject",
                               subject_id=int(repeated[SID][0]), field=SID)


def iter_timelines(dataset_root: Path, labels: pl.DataFrame, *,
                   source: str = "labels") -> Iterator[tuple[int, datetime, Timeline]]:
    """(subject_id, prediction_time, timeline) of every label row, reading only the labelled subjects."""
    _check_one_row_per_subject(labels, source)
    dataset = MedsDataset(dataset_root)
    catalog = dataset.code_catalog()
    when = dict(zip(labels[SID].to_list(), labels[PT].to_list()))
    seen = 0
    for record in dataset.iter_patients(sorted(when)):
        seen += 1
        try:
            timeline = render_timeline(record, catalog, when[record.subject_id])
        except TimelineError as exc:
            raise ReportInputError(str(dataset_root), f"cannot render the timeline ({exc})",
                                   subject_id=record.subject_id) from None
        yield record.subject_id, when[record.subject_id], timeline
    if seen != len(when):
        raise ReportInputError(source, f"{len(when) - seen} labelled subject(s) are not in the MEDS dataset "
                               f"{dataset_root}", field=SID)


def token_counts(dataset_root: Path, labels: pl.DataFrame, *, source: str = "labels") -> pl.DataFrame:
    """``subject_id``, ``prediction_time``, ``xml_tokens``, ``n_blocks`` of every label row."""
    rows = [(sid, when, timeline.n_tokens(), len(timeline.blocks))
            for sid, when, timeline in iter_timelines(dataset_root, labels, source=source)]
    return pl.DataFrame(rows, schema={SID: pl.Int64, PT: pl.Datetime("us"), "xml_tokens": pl.Int64,
                                      "n_blocks": pl.Int64}, orient="row")


def truncation_windows(dataset_root: Path, labels: pl.DataFrame, budgets: Sequence[int], *,
                       source: str = "labels") -> pl.DataFrame:
    """Per label row and budget: ``window_start`` (None: nothing dropped), tokens kept and history length kept.

    Columns: subject_id, prediction_time, budget_tokens, window_start, full_tokens, kept_tokens, history_years
    (prediction time − first kept timestamp), full_history_years (the same for the whole timeline).
    """
    rows: list[tuple] = []
    for sid, when, timeline in iter_timelines(dataset_root, labels, source=source):
        full = timeline.n_tokens()
        full_history = _years(when, timeline.blocks[0].time if timeline.blocks else when)
        for budget in budgets:
            try:
                kept = truncate_left(timeline, budget)
            except TimelineError as exc:
                raise ReportError(f"subject {sid}: cannot left-truncate to {budget} tokens ({exc})") from None
            start = kept.root.truncated_before if kept is not timeline else None
            history = _years(when, kept.blocks[0].time if kept.blocks else when)
            rows.append((sid, when, budget, start, full, kept.n_tokens(), history, full_history))
    return pl.DataFrame(rows, schema={SID: pl.Int64, PT: pl.Datetime("us"), "budget_tokens": pl.Int64,
                                      WINDOW_START: pl.Datetime("us"), "full_tokens": pl.Int64,
                                      "kept_tokens": pl.Int64, "history_years": pl.Float64,
                                      "full_history_years": pl.Float64}, orient="row")


def _years(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds() / (86_400 * DAYS_PER_YEAR)


def truncate_events(events: pl.LazyFrame, windows: pl.DataFrame) -> pl.LazyFrame:
    """The MEDS rows of the windowed subjects left after truncation (static and birth rows always stay).

    ``windows`` has one row per subject with ``window_start`` (None keeps every row).

    >>> events = pl.LazyFrame({"subject_id": [1, 1, 1, 1, 2], "code": ["GENDER//F", "MEDS_BIRTH", "A", "B", "A"],
    ...     "time": [None, datetime(1950, 1, 1), datetime(2019, 1, 1), datetime(2020, 1, 1), datetime(2010, 1, 1)]})
    >>> windows = pl.DataFrame({"subject_id": [1, 2], "window_start": [datetime(2019, 6, 1), None]})
    >>> truncate_events(events, windows).collect()["code"].to_list()
    ['GENDER//F', 'MEDS_BIRTH', 'B', 'A']
    """
    time = pl.col(schema.TIME)
    starts = windows.lazy().select(pl.col(SID).cast(pl.Int64), pl.col(WINDOW_START).dt.cast_time_unit("us"))
    kept = (events.with_columns(pl.col(SID).cast(pl.Int64)).join(starts, on=SID, how="inner", maintain_order="left")
            .filter(time.is_null() | (pl.col(schema.CODE) == schema.BIRTH_CODE) | pl.col(WINDOW_START).is_null()
                    | (time >= pl.col(WINDOW_START))))
    return kept.drop(WINDOW_START)


def pick_subset(dataset_root: Path, labels: pl.DataFrame, per_role: int, *, max_tokens: int | None, seed: int,
                source: str = "labels") -> pl.DataFrame:
    """Up to ``per_role`` cases and controls whose timeline has at most ``max_tokens`` tokens, seeded.

    Candidates are a seeded sample of 25 per wanted patient; when a role has too few short enough timelines among
    them, its shortest candidates fill the gap (so a cohort of long records still gets its subset).
    """
    candidates = sample_per_role(labels, per_role * 25, seed)
    if max_tokens is None:
        return sample_per_role(candidates, per_role, seed)
    sizes = token_counts(dataset_root, candidates, source=source)
    ranked = candidates.join(sizes.select(SID, PT, "xml_tokens"), on=[SID, PT], how="left")
    parts = []
    for outcome in (True, False):
        role = ranked.filter(pl.col("boolean_value") == outcome)
        short = role.filter(pl.col("xml_tokens") <= max_tokens)
        chosen = short.sample(n=min(per_role, short.height), seed=seed, shuffle=False) if short.height else short
        if chosen.height < per_role:
            rest = role.join(chosen, on=[SID, PT], how="anti").sort("xml_tokens", SID)
            chosen = pl.concat([chosen, rest.head(per_role - chosen.height)])
        parts.append(chosen)
    return pl.concat(parts).drop("xml_tokens").sort(SID, PT)
