"""Test helpers for the judge and human-evaluation tests: small prediction runs written like `jobs.predict`'s."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from trajonco.prediction_files import write_prediction_files
from trajonco.prediction_rows import PredictionRow, rows_to_table

PREDICTION = datetime(2021, 6, 1)


def prediction_row(subject_id: int, *, variant: str, model: str = "scripted-model", risk: int | None = 5,
                   status: str = "ok", label: bool = True, summary: str | None = None,
                   events: list[dict] | None = None, reasoning: str | None = None) -> PredictionRow:
    scored = status in ("ok", "partial")
    events = events if events is not None else [
        {"timestamp": "2020-03-02", "description": f"Chronic cough noted ({variant})",
         "sources": [{"event_id": "e3", "shard": "data/0.parquet", "row": 103}]},
        {"timestamp": "2020-11-20", "description": "Weight loss of 5 kg", "sources": []},
    ]
    return PredictionRow(
        subject_id=subject_id, prediction_time=PREDICTION, boolean_value=label,
        predicted_boolean_value=(risk >= 5) if scored else None,
        predicted_boolean_probability=risk / 10 if scored else None, cancer="lung", variant=variant, model=model,
        status=status, risk_score=risk if scored else None,
        risk_trajectory=json.dumps([{"chunk_index": 0, "start_time": None, "end_time": None, "risk_level": "Low",
                                     "new_events": 1, "stored_events": 1},
                                    {"chunk_index": 1, "start_time": None, "end_time": None, "risk_level": "High",
                                     "new_events": 1, "stored_events": 1}]),
        events=json.dumps(events if scored else []),
        summary=(summary or f"Patient {subject_id} summary by {variant}: cough since 2020, weight loss.") if scored
        else None,
        reasoning=(reasoning or f"{variant} reasoning for {subject_id}.") if scored else None,
        n_chunks=2, timeline_events=20, timeline_tokens=1000 + subject_id, run_id="r1",
        finished_at=datetime(2026, 1, 1, tzinfo=timezone.utc))


def write_run(folder: Path, rows: list[PredictionRow], *, horizon_days: int = 365,
              dataset: Path | None = None) -> Path:
    """A jobs.predict-like output folder: predictions.parquet, prediction_details.parquet and a job.json with the
    pipeline settings."""
    write_prediction_files(rows_to_table(rows), folder)
    settings = {"pipeline": {"horizon_days": horizon_days, "variant": rows[0].variant},
                "dataset": str(dataset) if dataset else None, "coding_profile": None}
    (folder / "job.json").write_text(json.dumps({"job": "predict", "settings": settings}), encoding="utf-8")
    return folder
