"""Latency and cost profile of the agents from their prediction files (and usage records), and model selection.

From each ``jobs.predict`` prediction file: runtime per patient (``latency_total_s``: timeline to final answer;
``wall_s`` adds reading the record) overall, per stage (preprocessor / workers / manager / single agent) and by EHR
length (XML tokens, chunks); tokens and dollars per patient. Per agent role, calls and tokens come from the
part files next to the prediction file (``rows/``, or ``patients/`` JSON of older runs) or from `vista.shared.llm.usage.UsageLedger` files.

Model selection puts each run on AUROC vs median runtime vs median cost and marks the Pareto front: the runs no
other run beats on all three (higher AUROC, lower runtime, lower cost) at once. A run evaluated on too few cases or
controls (`baselines.metrics.MIN_CASES`) is shown with its n but never put on the front: its AUROC is too uncertain
to beat anything.

>>> pareto_front([(0.80, 10.0, 0.010), (0.78, 5.0, 0.002), (0.75, 6.0, 0.003), (0.80, 12.0, 0.010)])
[True, True, False, False]
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from baselines import Interval

from benchmarks.report.errors import ReportInputError
from benchmarks.report.predictions import LoadedPredictions
from benchmarks.report.results import ModelResult, Quantiles, SmallSampleGuarded
from vista.shared.llm.usage import UsageLedger

STAGES = {"preprocess": "latency_preprocess_s", "workers": "latency_workers_s", "manager": "latency_manager_s",
          "single_agent": "latency_single_agent_s"}
USAGE_COLUMNS = ("latency_total_s", "wall_s", "prompt_tokens", "completion_tokens", "cost_usd", "llm_calls",
                 "cache_hits", "status", "timeline_tokens", "n_chunks")
TOKEN_BINS = (0, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000)
CHUNK_BINS = (1, 2, 3, 5, 9, 17, 33)


def pareto_front(points: Sequence[tuple[float, float, float]]) -> list[bool]:
    """Which (AUROC, runtime, cost) points no other point dominates (≥ AUROC, ≤ runtime, ≤ cost, one strictly)."""
    values = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    oriented = values * np.array([-1.0, 1.0, 1.0])  # all three: lower is better
    on_front = []
    for i in range(len(values)):
        others = np.delete(oriented, i, axis=0)
        dominated = np.any(np.all(others <= oriented[i], axis=1) & np.any(others < oriented[i], axis=1))
        on_front.append(not bool(dominated))
    return on_front


class LengthBin(BaseModel):
    """Runtime of the patients whose EHR length falls in one bin."""

    label: str
    low: int
    high: int | None
    n: int
    runtime_s: Quantiles


class AgentRole(BaseModel):
    """Calls and tokens of one agent role over a run (from per-patient results or a usage ledger)."""

    run: str
    agent: str
    patients: int | None = Field(None, description="patients with a call of this role (per-patient files only)")
    calls: int
    cache_hits: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    model_seconds: float = Field(description="summed latency of the calls")


class RunProfile(BaseModel):
    """Latency, tokens and cost per patient of one prediction run."""

    name: str
    llm_model: str | None
    variant: str | None
    source: str
    patients: int
    statuses: dict[str, int]
    profiled: int = Field(description="patients in the runtime figures (those with no cached call)")
    cached_patients: int = Field(description="patients answered at least partly from the LLM response cache")
    runtime_s: Quantiles = Field(description="latency_total_s: timeline → final answer")
    wall_s: Quantiles = Field(description="the task's wall time in its actor, reading the record included")
    stages: dict[str, Quantiles] = Field(description="seconds per stage the variant runs")
    prompt_tokens: Quantiles
    completion_tokens: Quantiles
    total_tokens: Quantiles
    cost_usd: Quantiles
    total_cost_usd: float
    unpriced_calls: int
    llm_calls: Quantiles
    timeline_tokens: Quantiles
    chunks: Quantiles
    by_tokens: list[LengthBin]
    by_chunks: list[LengthBin]
    agents: list[AgentRole] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class SelectionPoint(SmallSampleGuarded):
    """One run in the model-selection view (results.json: AUROC and CI under ``too_few_raw`` when too few)."""

    _guarded: ClassVar[tuple[str, ...]] = ("auroc", "auroc_ci")

    name: str
    llm_model: str | None
    variant: str | None
    auroc: float
    auroc_ci: Interval | None = Field(None, description="the run's AUROC with its stratified bootstrap 95% CI")
    n_positive: int = Field(0, description="cases the AUROC was computed on")
    n_negative: int = Field(0, description="controls the AUROC was computed on")
    median_runtime_s: float
    median_cost_usd: float
    on_pareto_front: bool = Field(description="never for a run with too few cases or controls")

    def counts(self) -> tuple[int, int]:
        return self.n_positive, self.n_negative


def _quantiles(frame: pl.DataFrame, column: str) -> Quantiles:
    return Quantiles.of(frame[column].cast(pl.Float64).to_numpy()) if column in frame.columns else Quantiles(n=0)


def _bins(frame: pl.DataFrame, column: str, edges: Sequence[int], unit: str, *,
          counts: bool = False) -> list[LengthBin]:
    """Runtime quantiles per bin [low, high) of ``column``; empty bins are left out. ``counts``: integer labels."""
    out = []
    values = frame[column].cast(pl.Float64).to_numpy()
    runtime = frame["latency_total_s"].cast(pl.Float64).to_numpy()
    bounds = list(edges) + [None]
    for low, high in zip(bounds[:-1], bounds[1:]):
        inside = (values >= low) & (values < high if high is not None else True)
        if not inside.any():
            continue
        if high is None:
            label = f"≥ {low:,} {unit}"
        elif counts:
            single = unit.removesuffix("s") if low == 1 else unit
            label = f"{low} {single}" if high == low + 1 else f"{low}–{high - 1} {unit}"
        else:
            label = f"{low:,}–{high:,} {unit}"
        out.append(LengthBin(label=label, low=int(low), high=high, n=int(inside.sum()),
                             runtime_s=Quantiles.of(runtime[inside])))
    return out


def has_usage(frame: pl.DataFrame) -> bool:
    """Whether a prediction file carries the agents' usage and latency columns (``jobs.predict`` output)."""
    return all(column in frame.columns for column in USAGE_COLUMNS)


def run_profile(loaded: LoadedPredictions) -> RunProfile:
    """The latency/cost profile of one ``jobs.predict`` prediction file."""
    frame = loaded.frame
    source = str(loaded.source.path)
    missing = [c for c in USAGE_COLUMNS if c not in frame.columns]
    if missing:
        raise ReportInputError(source, f"has no usage/latency columns {missing}: not a jobs.predict file",
                               field=missing[0])
    statuses = dict(sorted(frame.group_by("status").len().iter_rows()))
    ran = frame.filter(pl.col("latency_total_s").is_not_null())
    fresh = ran.filter(pl.col("cache_hits") == 0)
    notes = []
    cached = ran.height - fresh.height
    if cached:
        notes.append(f"{cached} of {ran.height} patients were answered at least partly from the LLM response cache; "
                     "their runtimes are left out (tokens of cached calls count 0)")
    errors = frame.height - ran.height
    if errors:
        notes.append(f"{errors} patients have no latency (their task raised: see the status column)")
    stages = {}
    for stage, column in STAGES.items():
        if column in fresh.columns and fresh[column].fill_null(0.0).max() not in (None, 0.0):
            stages[stage] = _quantiles(fresh, column)
    total = fresh.with_columns(total_tokens=pl.col("prompt_tokens") + pl.col("completion_tokens"))
    return RunProfile(
        name=loaded.name, llm_model=loaded.llm_model, variant=loaded.variant, source=source, patients=frame.height,
        statuses={str(k): int(v) for k, v in statuses.items()}, profiled=fresh.height, cached_patients=cached,
        runtime_s=_quantiles(fresh, "latency_total_s"), wall_s=_quantiles(fresh, "wall_s"), stages=stages,
        prompt_tokens=_quantiles(total, "prompt_tokens"), completion_tokens=_quantiles(total, "completion_tokens"),
        total_tokens=_quantiles(total, "total_tokens"), cost_usd=_quantiles(fresh, "cost_usd"),
        total_cost_usd=float(frame["cost_usd"].fill_null(0.0).sum()),
        unpriced_calls=int(frame["unpriced_calls"].fill_null(0).sum()) if "unpriced_calls" in frame.columns else 0,
        llm_calls=_quantiles(fresh, "llm_calls"), timeline_tokens=_quantiles(ran, "timeline_tokens"),
        chunks=_quantiles(ran, "n_chunks"),
        by_tokens=_bins(fresh.drop_nulls("timeline_tokens"), "timeline_tokens", TOKEN_BINS, "tokens"),
        by_chunks=_bins(fresh.drop_nulls("n_chunks"), "n_chunks", CHUNK_BINS, "chunks", counts=True),
        agents=agent_roles_from_outputs(loaded.name, Path(loaded.source.path).parent),
        notes=notes,
    )


def _results_of_part_files(output: Path) -> Iterator[tuple[str, dict | None]]:
    """(source, result dict) of the newest row of each task in a ``jobs.predict`` output's part files
    (``rows/run=*/part-*.parquet``, column ``result_json``)."""
    files = sorted((output / "rows").glob("run=*/part-*.parquet"))
    if not files:
        return
    try:
        frame = (pl.scan_parquet(files).sort("finished_at")
                 .group_by("subject_id", "prediction_time", maintain_order=True).agg(pl.col("result_json").last())
                 .collect())
    except pl.exceptions.PolarsError as exc:
        raise ReportInputError(str(output / "rows"), f"unreadable part files ({' '.join(str(exc).split())})") from None
    for text in frame["result_json"].to_list():
        try:
            yield str(output / "rows"), json.loads(text) if text else None
        except ValueError as exc:
            raise ReportInputError(str(output / "rows"), f"a result_json value is not JSON ({exc})") from None


def _results_of_json_files(folder: Path) -> Iterator[tuple[str, dict | None]]:
    """(file, result dict) of each per-patient JSON of a ``jobs.predict`` output written before the part files."""
    for path in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
        try:
            yield str(path), json.loads(path.read_bytes()).get("result")
        except (ValueError, OSError) as exc:
            raise ReportInputError(str(path), f"not a per-patient result file ({exc})") from None


def agent_roles_from_outputs(run: str, output: Path) -> list[AgentRole]:
    """Per-role calls and tokens summed over the per-patient results of a ``jobs.predict`` output folder (its part
    files, or the per-patient JSON of older outputs)."""
    totals: dict[str, dict[str, float]] = {}
    patients: dict[str, int] = {}
    results = list(_results_of_part_files(output)) or list(_results_of_json_files(output / "patients"))
    for _, result in results:
        if not isinstance(result, dict):
            continue
        parts = result.get("results") if "results" in result else [result]  # any-cancer: one result per cancer
        seen = set()
        for part in parts or []:
            for agent, usage in (part.get("usage") or {}).items():
                t = totals.setdefault(agent, {})
                for key in ("calls", "cache_hits", "failed", "prompt_tokens", "completion_tokens", "model_seconds"):
                    t[key] = t.get(key, 0.0) + float(usage.get(key, 0))
                seen.add(agent)
        for agent in seen:
            patients[agent] = patients.get(agent, 0) + 1
    return [AgentRole(run=run, agent=agent, patients=patients[agent], calls=int(t["calls"]),
                      cache_hits=int(t["cache_hits"]), failed=int(t["failed"]), prompt_tokens=int(t["prompt_tokens"]),
                      completion_tokens=int(t["completion_tokens"]), model_seconds=round(t["model_seconds"], 3))
            for agent, t in sorted(totals.items())]


def agent_roles_from_ledger(path: Path) -> list[AgentRole]:
    """Per-role totals of a `vista.shared.llm.usage.UsageLedger` saved as parquet or JSON."""
    try:
        ledger = UsageLedger.from_json(path) if path.suffix == ".json" else UsageLedger.from_parquet(path)
    except (ValueError, OSError, TypeError, KeyError, pl.exceptions.PolarsError) as exc:
        raise ReportInputError(str(path), f"not a usage ledger ({' '.join(str(exc).split())})") from None
    return [AgentRole(run=path.name, agent=s.group, calls=s.calls, cache_hits=s.cache_hits, failed=s.failed_calls,
                      prompt_tokens=s.prompt_tokens, completion_tokens=s.completion_tokens,
                      model_seconds=round(s.latency_s_total, 3)) for s in ledger.summarise("agent")]


def selection_view(profiles: Sequence[RunProfile], results: Sequence[ModelResult],
                   baselines: Sequence[ModelResult] = ()) -> list[SelectionPoint]:
    """AUROC vs median runtime vs median cost of each profiled run that was evaluated, plus the ``baselines`` (their
    fit + scoring time shared over the rows they scored; no token cost), with the Pareto front over the runs with
    enough cases and controls (the others are listed, never on the front)."""
    evaluated = {r.source: r for r in results if r.source is not None}
    usable = [p for p in profiles if p.source in evaluated and p.runtime_s.median is not None]
    named = [(p.name, p.llm_model, p.variant, evaluated[p.source], float(p.runtime_s.median),
              float(p.cost_usd.median or 0.0)) for p in usable]
    named += [(b.model, None, None, b, b.seconds / max(b.evaluation.n, 1), 0.0)
              for b in baselines if b.kind == "baseline"]
    competing = [i for i, (*_, r, _, _) in enumerate(named) if not r.too_few]
    front = pareto_front([(named[i][3].evaluation.auroc.value, named[i][4], named[i][5]) for i in competing])
    on_front = dict(zip(competing, front))
    return [SelectionPoint(name=name, llm_model=llm, variant=variant, auroc=r.evaluation.auroc.value,
                           auroc_ci=r.evaluation.auroc, n_positive=r.evaluation.n_positive,
                           n_negative=r.evaluation.n_negative,
                           median_runtime_s=runtime, median_cost_usd=cost, on_pareto_front=on_front.get(i, False))
            for i, (name, llm, variant, r, runtime, cost) in enumerate(named)]
