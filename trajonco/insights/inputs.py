"""Read a prediction run (``predictions.parquet`` and ``prediction_details.parquet`` of ``jobs.predict``) into typed
per-patient inputs.

Only what the population insights need is kept: the label, the manager's final score, the workers' per-chunk risk
trajectory and the final events the agents extracted. The nested columns are JSON written by
``trajonco.prediction_rows`` from `trajonco.agents.results` models, so they are parsed back into those same models;
a malformed value is one `InsightsInputError` naming the file, the patient and the column.

Rows without a score (``failed``/``error``) or without a label cannot be placed as case or control: they are
counted in `RunInputs.excluded` (the insights report them) rather than silently dropped.

>>> from datetime import datetime
>>> records = [{"subject_id": 1, "prediction_time": datetime(2020, 1, 1), "boolean_value": True, "risk_score": 7,
...             "status": "ok", "cancer": "lung", "variant": "one_stage", "model": "m",
...             "risk_trajectory": '[{"chunk_index": 0, "start_time": null, "end_time": null, "risk_level": "High"}]',
...             "events": '[{"timestamp": "2019-05-02", "description": "chronic cough"}]'},
...            {"subject_id": 2, "prediction_time": None, "boolean_value": None, "risk_score": 3, "status": "ok"}]
>>> run = inputs_from_records(records, source="example")
>>> [p.subject_id for p in run.patients], [str(r) for r in run.patients[0].trajectory], run.excluded
([1], ['High'], {'no_label': 1})
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from trajonco.agents.results import ChunkRisk, EvidenceEvent
from trajonco.agents.schemas import RiskLevel
from trajonco.insights.errors import InsightsInputError
from trajonco.prediction_files import (
    DETAILS_FILE,
    PredictionFilesError,
    details_file,
    prediction_file,
    read_predictions,
)

UNSCORED_STATUSES = frozenset({"failed", "error"})
_COLUMNS = ("subject_id", "prediction_time", "boolean_value", "risk_score", "status", "cancer", "variant", "model",
            "risk_trajectory", "events")
_REQUIRED = ("subject_id", "boolean_value", "risk_score", "risk_trajectory", "events")
_TRAJECTORY = TypeAdapter(list[ChunkRisk])
_EVENTS = TypeAdapter(list[EvidenceEvent])


class PatientInsightInput(BaseModel):
    """One scored, labelled patient of a run, as the insights see it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_id: int
    prediction_time: datetime | None
    case: bool = Field(description="the label: True for a case, False for a control")
    risk_score: int = Field(ge=1, le=10, description="the manager's (or single agent's) final score")
    trajectory: tuple[RiskLevel | None, ...] = Field(description="the workers' risk per chunk, in chunk order "
                                                     "(None where the worker's call failed)")
    events: tuple[str, ...] = Field(description="descriptions of the final events the agents extracted")


class RunInputs(BaseModel):
    """The patients of one run and what was left out, and why."""

    model_config = ConfigDict(frozen=True)

    source: str
    run_label: str = Field(description="cancer · variant · model of the run, as far as the file says")
    patients: tuple[PatientInsightInput, ...]
    excluded: dict[str, int] = Field(description="rows left out per reason (no_label, unscored)")

    @property
    def n_cases(self) -> int:
        return sum(p.case for p in self.patients)

    @property
    def n_controls(self) -> int:
        return sum(not p.case for p in self.patients)


def _parse_json(adapter: TypeAdapter, text: object, source: str, subject: int, field: str) -> list:
    if text is None:
        return []
    try:
        return adapter.validate_python(json.loads(str(text)))
    except json.JSONDecodeError as exc:
        problem = f"not JSON ({exc.msg} at character {exc.pos})"
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = f"{exc.error_count()} invalid value(s), first at {list(first['loc'])}: {first['msg']}"
    raise InsightsInputError(source, f"not a valid JSON list of {field} entries: {problem}", subject_id=subject,
                             field=field)


def _distinct(records: list[Mapping[str, object]], column: str) -> str | None:
    values = sorted({str(r[column]) for r in records if r.get(column) is not None})
    return ", ".join(values) if values else None


def inputs_from_records(records: Iterable[Mapping[str, object]], *, source: str) -> RunInputs:
    """Typed inputs from prediction rows given as mappings (``PredictionRow.model_dump()`` or parquet rows)."""
    rows = list(records)
    patients: list[PatientInsightInput] = []
    excluded: Counter[str] = Counter()
    for record in rows:
        if record.get("subject_id") is None:
            raise InsightsInputError(source, "a row has no subject_id", field="subject_id")
        subject = int(record["subject_id"])  # type: ignore[arg-type]
        if record.get("status") in UNSCORED_STATUSES or record.get("risk_score") is None:
            excluded["unscored"] += 1
            continue
        if record.get("boolean_value") is None:
            excluded["no_label"] += 1
            continue
        trajectory = _parse_json(_TRAJECTORY, record.get("risk_trajectory"), source, subject, "risk_trajectory")
        events = _parse_json(_EVENTS, record.get("events"), source, subject, "events")
        score = int(record["risk_score"])  # type: ignore[arg-type]
        if not 1 <= score <= 10:
            raise InsightsInputError(source, f"risk_score {score} is outside 1-10", subject_id=subject,
                                     field="risk_score")
        ordered = sorted(trajectory, key=lambda step: step.chunk_index)
        patients.append(PatientInsightInput(
            subject_id=subject, prediction_time=record.get("prediction_time"), case=bool(record["boolean_value"]),
            risk_score=score, trajectory=tuple(step.risk_level for step in ordered),
            events=tuple(e.description for e in events)))
    keys = [(p.subject_id, p.prediction_time) for p in patients]
    if len(set(keys)) != len(keys):
        twice = next(k for k, n in Counter(keys).items() if n > 1)
        raise InsightsInputError(source, "the run holds this patient and prediction time more than once (mixed "
                                 "cancers or variants? give one run)", subject_id=twice[0], field="subject_id")
    label = " · ".join(v for v in (_distinct(rows, "cancer"), _distinct(rows, "variant"), _distinct(rows, "model"))
                       if v) or Path(source).parent.name or source
    patients.sort(key=lambda p: (not p.case, p.subject_id, p.prediction_time or datetime.min))
    return RunInputs(source=source, run_label=label, patients=tuple(patients), excluded=dict(excluded))


def resolve_run(path: Path) -> Path:
    """The prediction file of a run: ``path`` itself, or ``path/predictions.parquet`` for a run folder."""
    candidate = prediction_file(path)
    if not candidate.is_file():
        raise InsightsInputError(str(path), "no prediction file here (expected a predictions.parquet file or a "
                                 "jobs.predict output folder holding one)")
    return candidate


def read_run(path: Path | str) -> RunInputs:
    """The typed inputs of a run's ``predictions.parquet`` (or of the run folder holding it), with the
    ``prediction_details.parquet`` beside it (`trajonco.prediction_files.read_predictions`)."""
    file = resolve_run(Path(path))
    try:
        table = read_predictions(file, columns=_COLUMNS)
    except PredictionFilesError as exc:
        raise InsightsInputError(exc.source, exc.problem, subject_id=exc.subject_id, field=exc.field) from None
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise InsightsInputError(str(file), "not a jobs.predict prediction file (the insights need the agents' "
                                 f"columns, from the {DETAILS_FILE} beside it)", field=missing[0])
    return inputs_from_records(table.to_pylist(), source=str(details_file(file) or file))  # where the columns are
