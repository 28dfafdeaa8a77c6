"""The agents' evidence as the report counts it: final events kept in the rows but flagged, not facts of the record.

A jobs.predict row counts its flagged final events (`trajonco.agents.evidence`): ``evidence_unsourced`` (citing no
record element the agents read) and ``evidence_out_of_record`` (dated before the record's first event, birth
included, or after its last event before the prediction time). `evidence_table` sums them per prediction file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl

from trajonco.report_document import Table
from benchmarks.report.predictions import LoadedPredictions

COUNT_COLUMNS = ("evidence_unsourced", "evidence_out_of_record")
PARAGRAPH = ("Evidence events the agents give that cite no record element, or are dated outside the patient's record "
             "(before its first event, birth included, or after its last event before the prediction time), are kept "
             "in the rows, marked as flagged, and counted here: they are what the agents said, not facts of the "
             "record.")


def _events_total(frame: pl.DataFrame) -> str:
    if "events" not in frame.columns:
        return "n/a"
    return str(sum(len(json.loads(text)) for text in frame["events"].drop_nulls().to_list()))


def evidence_row(loaded: LoadedPredictions) -> list[str] | None:
    """[run, rows, final events, unsourced, dated outside the record] of one agents' file (None: not an agents run).

    >>> frame = pl.DataFrame({"events": ['[{"timestamp": "2020-01-01", "description": "x"}]', "[]"],
    ...                       "evidence_unsourced": [1, 0], "evidence_out_of_record": [1, 0]})
    >>> evidence_row(LoadedPredictions(None, "one_stage · m", "m", "one_stage", frame))
    ['one_stage · m', '2', '1', '1', '1']
    """
    frame = loaded.frame
    if "events" not in frame.columns and not set(COUNT_COLUMNS) & set(frame.columns):
        return None
    counts = [str(int(frame[c].fill_null(0).sum())) if c in frame.columns else "not recorded" for c in COUNT_COLUMNS]
    return [loaded.name, str(frame.height), _events_total(frame), *counts]


def evidence_table(predictions: Sequence[LoadedPredictions]) -> Table | None:
    """Flagged evidence per agents' prediction file (None when no file is an agents run)."""
    rows = [row for loaded in predictions if (row := evidence_row(loaded)) is not None]
    if not rows:
        return None
    return Table("table-evidence", "Agents' evidence flagged as not resting on the record",
                 ["run", "rows", "final events", "unsourced", "dated outside the record"], rows,
                 note="'not recorded': a file written before the flags existed.")
