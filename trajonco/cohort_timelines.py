"""Render and chunk the XML timelines of a labelled cohort, and summarise their sizes (tokens, chunks) by role.

Patients are fetched from the MEDS dataset only for the subjects in the label file (streamed, not the whole
dataset); each timeline holds only events strictly before the label's prediction time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
from rich.table import Table
from tqdm import tqdm

from trajonco.chunking import chunk_timeline
from vista.shared.meds.labels import LabelFileError, read_label_table
from vista.shared.meds.reader import MedsDataset
from vista.shared.timeline import Timeline, render_timeline

LABEL_COLUMNS = ("subject_id", "prediction_time", "boolean_value")


@dataclass(frozen=True, slots=True)
class LabelRow:
    """One labelled patient: who, when the prediction is made, and whether they are a case."""

    subject_id: int
    prediction_time: datetime
    is_case: bool


@dataclass(frozen=True, slots=True)
class TimelineStats:
    """Size of one patient's timeline and of its chunking."""

    subject_id: int
    is_case: bool
    n_events: int
    n_tokens: int
    n_chunks: int
    span_years: float


def read_labels(path: Path, limit: int | None = None) -> list[LabelRow]:
    """Label rows of a label parquet (MEDS labels or ACES output, see `vista.shared.meds.labels`), by subject and time.

    Every row needs a label: a clear `LabelFileError` names the file, the first subject and the field otherwise.
    """
    frame = pl.from_arrow(read_label_table(path).select(list(LABEL_COLUMNS))).sort("subject_id", "prediction_time")
    unlabelled = frame.filter(pl.col("boolean_value").is_null())
    if unlabelled.height:
        raise LabelFileError(str(path), f"{unlabelled.height} of {frame.height} rows have no label (an ACES task config "
                             "needs `label:` on its target window)", subject_id=int(unlabelled["subject_id"][0]),
                             field="boolean_value")
    if limit is not None:
        frame = frame.head(limit)
    return [LabelRow(int(s), t, bool(b)) for s, t, b in frame.iter_rows()]


def iter_cohort_timelines(dataset: MedsDataset, labels: list[LabelRow]) -> Iterator[tuple[LabelRow, Timeline]]:
    """(label, timeline) pairs, one per label row (a subject may have several, e.g. one per ACES trigger), in subject
    order, reading only the labelled subjects from the dataset."""
    catalog = dataset.code_catalog()
    by_subject: dict[int, list[LabelRow]] = {}
    for row in labels:
        by_subject.setdefault(row.subject_id, []).append(row)
    for record in dataset.iter_patients(by_subject):
        for label in by_subject[record.subject_id]:
            yield label, render_timeline(record, catalog, label.prediction_time)


def timeline_stats(dataset_root: Path, labels_path: Path, *, max_tokens: int = 16_000, limit: int | None = None,
                   progress: bool = True, profile: str | Path | None = None) -> list[TimelineStats]:
    """Render and chunk every labelled patient's timeline; return their sizes."""
    dataset = MedsDataset(dataset_root, profile=profile)
    labels = read_labels(labels_path, limit)
    stats: list[TimelineStats] = []
    pairs = iter_cohort_timelines(dataset, labels)
    for label, timeline in tqdm(pairs, total=len(labels), desc="timelines", unit="patient", disable=not progress):
        chunks = chunk_timeline(timeline, max_tokens, verify=False)
        times = [b.time for b in timeline.blocks]
        span = (times[-1] - times[0]).days / 365.25 if times else 0.0
        stats.append(TimelineStats(label.subject_id, label.is_case, len(timeline.event_ids()),
                                   timeline.n_tokens(), len(chunks), span))
    return stats


def _median_iqr(values: list[float], fmt: str = "{:,.0f}") -> str:
    if not values:
        return "–"
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{fmt.format(med)} [{fmt.format(q1)}–{fmt.format(q3)}]"


def summary_table(stats: list[TimelineStats], title: str = "Timelines") -> Table:
    """Cases vs controls: patients, events, XML tokens and chunks as median [IQR], EHR span in years."""
    table = Table(title=title)
    table.add_column("")
    for name in ("cases", "controls", "all"):
        table.add_column(name, justify="right")
    groups = {"cases": [s for s in stats if s.is_case], "controls": [s for s in stats if not s.is_case], "all": stats}
    rows = [
        ("patients", lambda g: f"{len(g):,}"),
        ("events, median [IQR]", lambda g: _median_iqr([s.n_events for s in g])),
        ("XML tokens, median [IQR]", lambda g: _median_iqr([s.n_tokens for s in g])),
        ("chunks, median [IQR]", lambda g: _median_iqr([s.n_chunks for s in g])),
        ("EHR span (years), median [IQR]", lambda g: _median_iqr([s.span_years for s in g], "{:.1f}")),
        ("total XML tokens", lambda g: f"{sum(s.n_tokens for s in g):,}"),
    ]
    for name, cell in rows:
        table.add_row(name, *(cell(groups[k]) for k in ("cases", "controls", "all")))
    return table


def render_patient_timeline(dataset_root: Path, subject_id: int, prediction_time: datetime | None,
                            profile: str | Path | None = None) -> str:
    """The XML timeline of one subject (events strictly before ``prediction_time`` when given)."""
    dataset = MedsDataset(dataset_root, profile=profile)
    record = dataset.load_patients([subject_id])[subject_id]
    return render_timeline(record, dataset.code_catalog(), prediction_time).to_xml()
