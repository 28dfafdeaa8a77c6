"""Prediction runs of `jobs.predict` as judge candidates, and the pairing of two runs on the same patients.

A run is a ``predictions.parquet`` file or the output folder holding it, read with the ``prediction_details.parquet``
beside it (`trajonco.prediction_files.read_predictions`; its ``job.json``, when present, gives the
horizon, dataset and coding profile). A patient is a task key: (subject_id, prediction_time, cancer). Only patients
present in both runs with a usable answer (status ok or partial and a summary) in both are compared; the others are
counted by reason in `Pairing`, never dropped silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trajonco.agents.results import EvidenceFlag
from trajonco.judge.errors import EvaluationInputError
from trajonco.prediction_files import DETAILS_FILE, PredictionFilesError, prediction_file, read_predictions

REQUIRED_COLUMNS = ("subject_id", "prediction_time", "cancer", "status", "boolean_value", "risk_score", "summary",
                    "reasoning", "events", "risk_trajectory", "model", "variant")
USABLE_STATUSES = frozenset({"ok", "partial"})
DEFAULT_HORIZON_DAYS = 365


class RunFileError(EvaluationInputError):
    """A prediction run that cannot be compared (names the file, the row's subject and the field)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class SourceRef(_Frozen):
    """Where an event came from: the timeline element id and its MEDS row."""

    event_id: str
    shard: str
    row: int


class CandidateEvent(_Frozen):
    """One final event of an answer, with its provenance and its flags (`trajonco.agents.results.EvidenceFlag`)."""

    timestamp: date
    description: str
    sources: tuple[SourceRef, ...] = ()
    flags: tuple[EvidenceFlag, ...] = ()


class CandidateStep(_Frozen):
    """One worker's step of the per-chunk risk trajectory."""

    chunk_index: int
    risk_level: str | None = None


class Candidate(_Frozen):
    """One run's answer for one patient: what a judge or a reviewer reads (the run's identity kept apart)."""

    subject_id: int
    prediction_time: datetime | None
    cancer: str
    label: bool | None = Field(description="the patient's outcome (boolean_value)")
    status: str
    risk_score: int | None
    summary: str | None
    reasoning: str | None
    events: tuple[CandidateEvent, ...] = ()
    trajectory: tuple[CandidateStep, ...] = ()
    timeline_tokens: int | None = None

    @property
    def key(self) -> tuple[int, datetime | None, str]:
        return (self.subject_id, self.prediction_time, self.cancer)

    @property
    def usable(self) -> bool:
        return self.status in USABLE_STATUSES and bool(self.summary and self.summary.strip())


@dataclass(frozen=True)
class Run:
    """One prediction run: its name, file, settings and one candidate per patient."""

    name: str
    path: Path
    horizon_days: int
    dataset: Path | None
    coding_profile: str | None
    candidates: dict[tuple[int, datetime | None, str], Candidate]


def _job_settings(folder: Path) -> dict:
    job = folder / "job.json"
    if not job.is_file():
        return {}
    try:
        return json.loads(job.read_text(encoding="utf-8")).get("settings", {})
    except (json.JSONDecodeError, AttributeError) as exc:
        raise RunFileError(f"{job}: not a jobs.predict job.json ({exc})") from None


def _parsed(path: Path, column: str, text: object, subject_id: int) -> list:
    if text is None:
        return []
    try:
        value = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}: subject {subject_id}: column {column!r} is not JSON ({exc})") from None
    if not isinstance(value, list):
        raise RunFileError(f"{path}: subject {subject_id}: column {column!r} must hold a JSON list")
    return value


def load_run(path: str | Path, name: str | None = None) -> Run:
    """Read a run (``predictions.parquet`` or its folder); errors name the file, the subject and the column."""
    import polars as pl

    path = Path(path)
    file = prediction_file(path)
    if not file.is_file():
        raise RunFileError(f"{path}: no predictions.parquet (give a jobs.predict output folder or its parquet file)")
    file = file.resolve()  # one spelling per file: the judge report and the review key name runs by path
    try:
        frame = pl.from_arrow(read_predictions(file))  # with the run's prediction_details.parquet
    except PredictionFilesError as exc:
        raise RunFileError(str(exc)) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise RunFileError(f"{file}: missing column(s) {', '.join(missing)} (is it a jobs.predict predictions file, "
                           f"with its {DETAILS_FILE} beside it?)")
    settings = _job_settings(file.parent)
    pipeline = settings.get("pipeline", {}) if isinstance(settings, dict) else {}
    candidates: dict[tuple[int, datetime | None, str], Candidate] = {}
    for row in frame.select(*REQUIRED_COLUMNS, *([c] if (c := "timeline_tokens") in frame.columns else [])).iter_rows(
            named=True):
        sid = row["subject_id"]
        try:
            candidate = Candidate(
                subject_id=sid, prediction_time=row["prediction_time"], cancer=row["cancer"],
                label=row["boolean_value"], status=row["status"], risk_score=row["risk_score"],
                summary=row["summary"], reasoning=row["reasoning"],
                events=_parsed(file, "events", row["events"], sid),
                trajectory=_parsed(file, "risk_trajectory", row["risk_trajectory"], sid),
                timeline_tokens=row.get("timeline_tokens"))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise RunFileError(f"{file}: subject {sid}: field {where}: {err['msg']}") from None
        if candidate.key in candidates:
            raise RunFileError(f"{file}: subject {sid}: more than one row for prediction time "
                               f"{candidate.prediction_time} and cancer {candidate.cancer!r}")
        candidates[candidate.key] = candidate
    variants = sorted({str(v) for v in frame["variant"].drop_nulls()})
    models = sorted({str(v) for v in frame["model"].drop_nulls()})
    default_name = " · ".join(x for x in (", ".join(variants), ", ".join(models)) if x) or file.parent.name
    dataset = settings.get("dataset") if isinstance(settings, dict) else None
    return Run(name=name or default_name, path=file, horizon_days=int(pipeline.get("horizon_days") or
                                                                        DEFAULT_HORIZON_DAYS),
               dataset=Path(dataset) if dataset else None,
               coding_profile=settings.get("coding_profile") if isinstance(settings, dict) else None,
               candidates=candidates)


class Pairing(BaseModel):
    """How many patients two runs share, and why the others were left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_a: int = Field(description="patients in run A")
    n_b: int = Field(description="patients in run B")
    n_paired: int = Field(description="patients compared: in both runs with a usable answer in both")
    only_in_a: int
    only_in_b: int
    unusable_a: int = Field(description="in both runs, but run A's answer failed or has no summary")
    unusable_b: int = Field(description="in both runs, but run B's answer failed or has no summary (and A's did not)")
    not_sampled: int = Field(0, description="paired patients left out by --limit")

    @property
    def dropped(self) -> int:
        return self.only_in_a + self.only_in_b + self.unusable_a + self.unusable_b

    def sentence(self) -> str:
        parts = [f"{n} {what}" for n, what in ((self.only_in_a, "only in run A"), (self.only_in_b, "only in run B"),
                                               (self.unusable_a, "without a usable answer in run A"),
                                               (self.unusable_b, "without a usable answer in run B"),
                                               (self.not_sampled, "not sampled (--limit)")) if n]
        return (f"{self.n_paired} patients compared ({self.n_a} in run A, {self.n_b} in run B)"
                + (f"; left out: {', '.join(parts)}" if parts else "; none left out") + ".")


@dataclass(frozen=True)
class Pair:
    """The two answers for one patient."""

    a: Candidate
    b: Candidate


@dataclass(frozen=True)
class PairedRuns:
    run_a: Run
    run_b: Run
    pairs: list[Pair]
    pairing: Pairing
    horizon_days: int = DEFAULT_HORIZON_DAYS


def pair_runs(run_a: Run, run_b: Run, *, limit: int | None = None, seed: int = 0) -> PairedRuns:
    """The patients both runs answered (a seeded sample of ``limit`` of them when given), in key order.

    The runs' labels must agree (they are the same cohort); their horizons too.
    """
    if run_a.horizon_days != run_b.horizon_days:
        raise RunFileError(f"{run_a.path} and {run_b.path} predict different horizons ({run_a.horizon_days} vs "
                           f"{run_b.horizon_days} days): compare runs of the same task")
    shared = sorted(set(run_a.candidates) & set(run_b.candidates), key=lambda k: (k[0], k[1] or datetime.min, k[2]))
    pairs, unusable_a, unusable_b = [], 0, 0
    for key in shared:
        a, b = run_a.candidates[key], run_b.candidates[key]
        if a.label is not None and b.label is not None and a.label != b.label:
            raise RunFileError(f"{run_a.path} and {run_b.path}: subject {key[0]}: field boolean_value differs "
                               f"({a.label} vs {b.label}): the runs are not on the same labels")
        if not a.usable:
            unusable_a += 1
        elif not b.usable:
            unusable_b += 1
        else:
            pairs.append(Pair(a, b))
    not_sampled = 0
    if limit is not None and limit < len(pairs):
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), size=limit, replace=False))
        not_sampled = len(pairs) - limit
        pairs = [pairs[i] for i in keep]
    pairing = Pairing(n_a=len(run_a.candidates), n_b=len(run_b.candidates), n_paired=len(pairs),
                      only_in_a=len(set(run_a.candidates) - set(run_b.candidates)),
                      only_in_b=len(set(run_b.candidates) - set(run_a.candidates)),
                      unusable_a=unusable_a, unusable_b=unusable_b, not_sampled=not_sampled)
    return PairedRuns(run_a, run_b, pairs, pairing, run_a.horizon_days)
