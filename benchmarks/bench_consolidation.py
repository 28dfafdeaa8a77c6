"""Benchmark: the predict driver's end-of-run work at 100,000 patients — part files vs one JSON per patient — and the
VISTA node indexes (the graph store's, one file rewritten at every checkpoint vs one part per checkpoint; the
build-graphs job's cohort index).

**Prediction rows.** ``--patients`` rows are simulated as the actors write them: a seeded `PatientResult` per
patient with realistically sized text (a 600-2,000 character summary, 300-1,200 characters of reasoning, 2-30
evidence events with 1-4 MEDS source rows each, one risk step per chunk, chains of 1 to ~90 chunks), turned into
its row by the job's own `trajonco.prediction_rows.row_from_result`/`part_record` and written by the job's own
`jobs.row_parts.PartWriter` (``--rows-per-part`` rows a part file; the job's default is 256, an actor whose
``--flush-seconds`` fires first writes smaller ones). A share of the patients (``--retry-share``) first gets a
transient failure row in run ``r1`` and its ``ok`` row in run ``r2`` (newest row wins), and some keep a transient
failure (the rerun's work). The same rows are also written the old way — ``patients/<bucket>/<task>.json`` in the
former per-patient format ``{"format": 1, "row": ..., "result": ..., "usage": ...}`` (without the fsync the job did)
— and read back by the old code path, `jobs.outputs.MarkerStore.scan` + `jobs.consolidate.consolidate`, which is
what the issue measured as "hours at 1M patients on a network filesystem".

Each measured step runs in a fresh process (the driver), which reports its wall time, CPU time and peak RSS (the
RSS after imports, then ``VmHWM`` reset to it before the step, so the peak is the step's own):

* plan a rerun: read the label file, the newest state of every task (`jobs.row_parts.latest_states` over the part
  files | `MarkerStore.scan` over the marker files) and `jobs.tasks.plan_tasks` with the retry policy;
* consolidate the predictions (`jobs.row_parts.consolidate_parts`: ``predictions.parquet`` and
  ``prediction_details.parquet`` | `jobs.consolidate.consolidate`: one ``predictions.parquet``);
* the bare cost of the old layout: open and ``json.loads`` every per-patient file one at a time.

The two layouts' rows are compared (same rows, same values; the new one read back by
`trajonco.prediction_files.read_predictions`). Files are in the page cache (just
written): a cold or network filesystem adds one round trip per file opened, which is what the part files save.

**VISTA node index.** ``--graphs`` patients of a `vista.synth` cohort:

* built into a `vista.graph.GraphStore` with ``checkpoint_every`` = ``--checkpoint-every``, every checkpoint's
  index write timed (and the manifest write). The former layout rewrote the whole ``index.parquet`` at each
  checkpoint (quadratic in the cohort; reproduced here by `legacy_flush`, the old code); the store now writes one
  part per checkpoint under ``index/`` and the manifest names each graph's part. A query is timed on both;
* the build-graphs job's cohort index: its output directory is a graph store, the actors write one index part per
  batch and the driver only appends the run's rows to the store manifest (`vista.graph.GraphStore.register_rows`).

    python -m benchmarks.bench_consolidation [--patients 100000] [--rows-per-part 256 16] [--graphs 2000]
        [--checkpoint-every 100] [--work DIR] [--keep] [--skip-vista | --skip-predictions]

Figures are printed, not asserted. The simulated files take ~1.5 GB per layout at 100,000 patients (removed at the
end unless ``--keep``). This benchmark imports ``jobs`` (it measures the job's own reader and writer).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

_WORDS = (
    "patient", "reports", "persistent", "cough", "weight", "loss", "of", "kg", "over", "months", "CT", "chest", "shows",
    "a", "new", "spiculated", "nodule", "in", "the", "right", "upper", "lobe", "mm", "smoker", "pack-years", "COPD",
    "exacerbation", "hemoptysis", "anemia", "ferritin", "low", "iron", "deficiency", "colonoscopy", "referred",
    "follow-up", "imaging", "stable", "increase", "since", "prior", "study", "with", "and", "no", "evidence", "of",
    "lymphadenopathy", "PSA", "rising", "biopsy", "ordered", "mammogram", "BI-RADS", "fatigue", "night", "sweats",
    "abdominal", "pain", "jaundice", "lipase", "elevated", "hematuria", "dysphagia", "hoarseness", "workup", "pending",
)
_SHARDS = tuple(f"data/train/{k}.parquet" for k in range(8))
_BASE_TIME = datetime(2021, 6, 1)


def _text(rng: random.Random, low: int, high: int) -> str:
    """Clinical-sounding words, ``low``..``high`` characters (random enough to compress like real text)."""
    target = rng.randint(low, high)
    words = rng.choices(_WORDS, k=target // 6 + 2)
    return " ".join(words)[:target]


def task_key_of(k: int):
    """The k-th simulated task (subject ids spread like a real cohort's; one prediction time each)."""
    from jobs.tasks import TaskKey

    return TaskKey(100_000 + 7 * k, _BASE_TIME + timedelta(days=k % 700, hours=k % 13))


def simulated_result(k: int, rng: random.Random, *, status: str = "ok"):
    """A seeded `PatientResult` of realistic size for task ``k`` (and its `TaskUsage`)."""
    from vista.llm.task_usage import TaskUsage
    from trajonco.agents.results import (AgentError, AgentUsage, ChunkRisk, ChunkStats, EvidenceEvent, Latency,
                                         PatientResult, SourceRow, Variant)
    from trajonco.agents.schemas import RiskLevel

    key = task_key_of(k)
    chunks = max(1, min(90, round(rng.lognormvariate(math.log(6), 0.9))))
    start = key.prediction_time - timedelta(days=365 * 6)
    span = (key.prediction_time - timedelta(days=365) - start) / chunks
    levels = list(RiskLevel)
    trajectory = tuple(
        ChunkRisk(chunk_index=i, start_time=start + span * i, end_time=start + span * (i + 1),
                  risk_level=None if status == "partial" and i == chunks - 1 else rng.choice(levels),
                  new_events=rng.randint(0, 6), stored_events=rng.randint(0, 4))
        for i in range(chunks))
    events = tuple(
        EvidenceEvent(timestamp=(start + timedelta(days=rng.randint(0, 365 * 5))).date(),
                      description=_text(rng, 60, 200),
                      sources=tuple(SourceRow(event_id=f"e{row}", shard=rng.choice(_SHARDS), row=row)
                                    for row in sorted(rng.sample(range(k * 400, k * 400 + 400), rng.randint(1, 4)))))
        for _ in range(rng.randint(2, min(30, 4 + 2 * chunks))))
    prompt = chunks * rng.randint(900, 1300)
    usage = {
        "worker": AgentUsage(calls=chunks, prompt_tokens=prompt, completion_tokens=chunks * rng.randint(150, 400),
                             attempts=chunks, model_seconds=chunks * 0.5),
        "manager": AgentUsage(calls=1, prompt_tokens=rng.randint(1500, 4000), completion_tokens=rng.randint(300, 700),
                              attempts=1, model_seconds=0.5),
    }
    errors = (AgentError(agent="worker", chunk_index=chunks - 1, kind="rate_limited",
                         message="HTTP 429 Too Many Requests: retry after 20 s (6 attempts)"),) if status == "partial" else ()
    score = rng.randint(1, 10)
    result = PatientResult(
        subject_id=key.subject_id, cancer="lung", variant=Variant.ONE_STAGE, model="gpt-4o-mini",
        prediction_time=key.prediction_time, horizon_days=365, status=status, risk_score=score,
        probability=score / 10, risk_trajectory=trajectory, summary=_text(rng, 600, 2000),
        reasoning=_text(rng, 300, 1200), events=events, memory_events=len(events) + rng.randint(0, 20),
        chunks=ChunkStats(timeline_events=chunks * 60, timeline_tokens=prompt, chunk_tokens=16_000, n_chunks=chunks),
        usage=usage, latency=Latency(workers=chunks * 0.5, manager=0.5, total=chunks * 0.5 + 0.5), errors=errors)
    task_usage = TaskUsage(calls=chunks + 1, attempts=chunks + 1, prompt_tokens=prompt,
                           completion_tokens=usage["worker"].completion_tokens + usage["manager"].completion_tokens,
                           cost_usd=round(prompt * 1.5e-7, 6))
    return result, task_usage


def old_patient_json(row, result, usage) -> bytes:
    """The per-patient file the predict job wrote before part files (jobs.prediction_rows.patient_json, git 29b602b)."""
    body = result.model_dump_json() if result is not None else "null"
    calls = json.dumps(dataclasses.asdict(usage)) if usage is not None else "null"
    return f'{{"format": 1, "row": {row.model_dump_json()}, "result": {body}, "usage": {calls}}}'.encode("utf-8")


def old_row_from_json(data: bytes, source: str):
    """How the old consolidation parsed a per-patient file (jobs.prediction_rows.row_from_json, git 29b602b)."""
    from trajonco.prediction_rows import PredictionRow

    try:
        return PredictionRow.model_validate(json.loads(data)["row"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{source}: not a per-patient prediction file ({type(exc).__name__}: {exc})") from None


# ------------------------------------------------------------------------------------------------ simulation
@dataclass(frozen=True, slots=True)
class Simulated:
    patients: int
    rows_written: int
    part_files: int
    parts_mb: float
    json_files: int
    json_mb: float
    seconds: float


def _rows(patients: int, seed: int, retry_share: float, left_share: float) -> Iterator[tuple[str, object, object, object]]:
    """(run id, row, result, usage) for every row the actors write, run r1 then run r2 (the retries)."""
    from trajonco.prediction_rows import RowContext, row_from_failure, row_from_result

    rng = random.Random(seed)
    contexts = {run: RowContext(cancer="lung", variant="one_stage", model="gpt-4o-mini", run_id=run) for run in ("r1", "r2")}
    retried: list[tuple[int, bool]] = []
    for k in range(patients):
        key = task_key_of(k)
        label = rng.random() < 0.5
        draw = rng.random()
        if draw < retry_share + left_share:  # a transient failure first: a rate-limited partial row or a timeout
            if k % 2:
                result, usage = simulated_result(k, rng, status="partial")
                row = row_from_result(key, label, result, usage, contexts["r1"], wall_s=30.0)
            else:
                result, usage = None, simulated_result(k, rng)[1]
                row = row_from_failure(key, label, TimeoutError(f"subject {key.subject_id}: not finished within 3600 s"),
                                       usage, contexts["r1"], wall_s=3600.0)
            yield "r1", row, result, usage
            if draw < retry_share:
                retried.append((k, label))
            continue
        result, usage = simulated_result(k, rng)
        yield "r1", row_from_result(key, label, result, usage, contexts["r1"], wall_s=result.latency.total + 0.2), result, usage
    for k, label in retried:  # the job's retry carries the task's label, as every row does
        result, usage = simulated_result(k, rng)
        yield "r2", row_from_result(task_key_of(k), label, result, usage, contexts["r2"], wall_s=result.latency.total), result, usage


def simulate(work: Path, patients: int, rows_per_part: int, *, seed: int, retry_share: float, left_share: float,
             writers: int = 8) -> Simulated:
    """Write the rows as ``writers`` actors would (part files under ``work/parts/rows``) and as per-patient JSON files
    (``work/json/patients``); the labels as ``work/labels.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.outputs import MarkerStore
    from trajonco.prediction_rows import PART_SCHEMA, part_record
    from jobs.row_parts import PartWriter, part_files

    started = time.perf_counter()
    keys = [task_key_of(k) for k in range(patients)]
    rng = random.Random(seed + 1)
    pq.write_table(pa.table({"subject_id": pa.array([k.subject_id for k in keys], pa.int64()),
                             "prediction_time": pa.array([k.prediction_time for k in keys], pa.timestamp("us")),
                             "boolean_value": pa.array([rng.random() < 0.5 for _ in keys])}), work / "labels.parquet")
    actors: dict[str, list[PartWriter]] = {}
    store = MarkerStore(work / "json", "patients")
    rows = 0
    for n, (run, row, result, usage) in enumerate(_rows(patients, seed, retry_share, left_share)):
        if run not in actors:  # a new run: the previous run's actors have written everything
            for writer in (w for ws in actors.values() for w in ws):
                writer.flush()
            actors[run] = [PartWriter(work / "parts", run_id=run, schema=PART_SCHEMA, flush_rows=rows_per_part)
                           for _ in range(writers)]
        writer = actors[run][n % writers]
        writer.add(part_record(row, result, usage))
        if writer.due():
            writer.flush()
        path = store.path(row.key, failed=not row.scored)  # MarkerStore.write without its fsync
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(old_patient_json(row, result, usage))
        store.path(row.key, failed=row.scored).unlink(missing_ok=True)
        rows += 1
    for writer in (w for ws in actors.values() for w in ws):
        writer.flush()
    files = part_files(work / "parts")
    markers = [p for p in (work / "json" / "patients").rglob("*.json")]
    return Simulated(patients, rows, len(files), sum(p.stat().st_size for p in files) / 1e6, len(markers),
                     sum(p.stat().st_size for p in markers) / 1e6, time.perf_counter() - started)


# ------------------------------------------------------------------------------------------------ measured steps
def _status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory figure (VmRSS, VmHWM) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise KeyError(field)


def _reset_peak() -> bool:
    """Reset the process's peak RSS to its current RSS (Linux >= 4.0), so the peak seen later is the step's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    try:
        return _status_mb("VmHWM")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _plan(work: Path, layout: str) -> str:
    from jobs.retry_policy import reruns
    from jobs.tasks import plan_tasks, read_label_tasks, task_keys

    keys = task_keys(read_label_tasks(work / "labels.parquet"))
    if layout == "parts":
        from jobs.row_parts import latest_states

        states = latest_states(work / "parts")
        plan = plan_tasks(keys, states, rerun=lambda state: reruns(state, "transient"))
    else:
        from jobs.outputs import MarkerStore

        states = MarkerStore(work / "json", "patients").scan()
        plan = plan_tasks(keys, states, retry_failed=True)  # a marker says done/failed only: no retry class
    return f"{len(states):,} tasks with a row, {len(plan.todo):,} to run again, {plan.skipped:,} skipped"


def _consolidate(work: Path, layout: str) -> str:
    from trajonco.prediction_rows import PREDICTION_SCHEMA, rows_to_table
    from jobs.tasks import read_label_tasks, task_keys

    tasks = read_label_tasks(work / "labels.parquet")
    keys = task_keys(tasks)
    if layout == "parts":
        from jobs.predict import prediction_outputs
        from jobs.row_parts import consolidate_parts

        outputs = prediction_outputs(work / "parts", labelled=tasks.column("boolean_value").null_count == 0)
        report = consolidate_parts(work / "parts", outputs, keys)
    else:
        from jobs.consolidate import consolidate
        from jobs.outputs import MarkerStore

        report = consolidate(MarkerStore(work / "json", "patients"), keys, work / "json" / "predictions.parquet",
                             parse=old_row_from_json, to_table=rows_to_table, schema=PREDICTION_SCHEMA,
                             status_of=lambda row: row.status)
    return f"{report.rows:,} rows, {len(report.missing):,} missing, statuses {dict(sorted(report.statuses.items()))}"


def _json_load_only(work: Path, layout: str) -> str:
    count = 0
    for path in sorted((work / "json" / "patients").rglob("*.json")):
        json.loads(path.read_bytes())
        count += 1
    return f"{count:,} files parsed"


STEPS: dict[str, Callable[[Path, str], str]] = {"plan": _plan, "consolidate": _consolidate, "json_load": _json_load_only}


def _child(step: str, work: str, layout: str, queue) -> None:
    import polars  # noqa: F401 - imports outside the measurement (both layouts pay them)
    import pyarrow.parquet  # noqa: F401

    import jobs.consolidate  # noqa: F401
    import jobs.predict  # noqa: F401
    import jobs.row_parts  # noqa: F401

    base = _status_mb("VmRSS")
    _reset_peak()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        info = STEPS[step](Path(work), layout)
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})
        return
    queue.put({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "base_mb": base,
               "peak_mb": _peak_mb(), "info": info})


@dataclass(frozen=True, slots=True)
class Measured:
    step: str
    layout: str
    wall: float
    cpu: float
    base_mb: float
    peak_mb: float
    info: str


def measure_step(step: str, work: Path, layout: str) -> Measured:
    """Run one step in a fresh (spawned) process: its wall/CPU seconds and its peak RSS."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(step, str(work), layout, queue))
    process.start()
    answer = queue.get()
    process.join()
    if "error" in answer:
        raise RuntimeError(f"{step} ({layout}): {answer['error']}")
    return Measured(step, layout, answer["wall"], answer["cpu"], answer["base_mb"], answer["peak_mb"], answer["info"])


def same_predictions(work: Path) -> str:
    import polars as pl

    from trajonco.prediction_files import read_predictions

    new = pl.from_arrow(read_predictions(work / "parts"))  # predictions.parquet + prediction_details.parquet
    old = pl.read_parquet(work / "json" / "predictions.parquet")  # the legacy layout: one file with every column
    keys = ["subject_id", "prediction_time"]
    equal = new.sort(keys).equals(old.sort(keys))
    return f"same rows and values in both predictions.parquet: {equal} ({new.height:,} vs {old.height:,} rows)"


def run_predictions(args: argparse.Namespace, work: Path) -> None:
    print(f"== predict rows: {args.patients:,} patients, retry share {args.retry_share:.1%} (r1 failure, r2 ok), "
          f"{args.left_share:.1%} left failed (transient)", flush=True)
    for per_part in args.rows_per_part:
        folder = work / f"rows_{per_part}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        sim = simulate(folder, args.patients, per_part, seed=args.seed, retry_share=args.retry_share,
                       left_share=args.left_share)
        print(f"-- {per_part} rows per part file: simulated {sim.rows_written:,} rows in {sim.seconds:.0f} s -> "
              f"{sim.part_files:,} part files ({sim.parts_mb:,.0f} MB) | {sim.json_files:,} JSON files "
              f"({sim.json_mb:,.0f} MB, {sim.json_mb * 1e3 / max(sim.json_files, 1):.1f} kB each)", flush=True)
        print(f"   load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
        results: list[Measured] = []
        steps = [("plan", "parts"), ("plan", "json"), ("consolidate", "parts"), ("consolidate", "json"),
                 ("json_load", "json")]
        if per_part != args.rows_per_part[0]:  # the JSON layout does not depend on the part size
            steps = [s for s in steps if s[1] == "parts"]
        print(f"   {'step':<52}{'wall s':>8}{'CPU s':>8}{'RSS before MB':>15}{'peak RSS MB':>13}   result")
        for step, layout in steps:
            m = measure_step(step, folder, layout)
            results.append(m)
            label = {"plan": "plan a rerun", "consolidate": "consolidate predictions.parquet",
                     "json_load": "json.loads every file, one by one"}[step]
            name = f"{label} ({'part files' if layout == 'parts' else 'per-patient JSON'})"
            print(f"   {name:<52}{m.wall:8.2f}{m.cpu:8.2f}{m.base_mb:15.0f}{m.peak_mb:13.0f}   {m.info}", flush=True)
        by = {(m.step, m.layout): m for m in results}
        for step in ("plan", "consolidate"):
            if (step, "json") in by:
                new, old = by[(step, "parts")], by[(step, "json")]
                print(f"   {step}: per-patient JSON / part files = {old.wall / new.wall:.1f}x wall, "
                      f"{old.cpu / new.cpu:.1f}x CPU, peak RSS {old.peak_mb:.0f} vs {new.peak_mb:.0f} MB")
        if ("consolidate", "json") in by:
            print(f"   {same_predictions(folder)}")
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ VISTA index
def legacy_flush(store, pending) -> str:
    """The GraphStore index write before partitioning (vista/graph/store.py at git c6e6245): merge the pending graphs'
    rows into the one ``index.parquet``, rewriting it whole."""
    import polars as pl
    import pyarrow as pa

    from vista.atomic import atomic_path

    fresh = pa.concat_tables(pending.values())
    path = store.root / "index.parquet"
    frame = pl.from_arrow(fresh)
    if path.exists():
        kept = pl.scan_parquet(path).filter(~pl.col("subject_id").is_in(list(pending))).collect()
        frame = pl.concat([kept, frame], how="vertical_relaxed")
    with atomic_path(path) as tmp:
        frame.sort("subject_id", maintain_order=True).write_parquet(tmp)
    return "index.parquet"  # every graph's rows are in the one file


def _store_index(args: argparse.Namespace, work: Path, records, catalog) -> None:
    import polars as pl

    from vista.graph.store import GraphStore

    class Timed(GraphStore):
        """The store with its index and manifest writes timed (``legacy``: the former single-file rewrite)."""

        legacy = False

        def __init__(self, *a, **k):
            self.index_s: list[float] = []
            self.manifest_s: list[float] = []
            super().__init__(*a, **k)

        def _write_index(self, pending):
            started = time.perf_counter()
            part = legacy_flush(self, pending) if self.legacy else super()._write_index(pending)
            self.index_s.append(time.perf_counter() - started)
            return part

        def _write_manifest(self):
            started = time.perf_counter()
            super()._write_manifest()
            self.manifest_s.append(time.perf_counter() - started)

    print(f"-- vista.graph.GraphStore: {len(records):,} graphs, checkpoint every {args.checkpoint_every}", flush=True)
    figures = {}
    for legacy in (True, False):
        root = work / ("store_legacy" if legacy else "store_parts")
        shutil.rmtree(root, ignore_errors=True)
        Timed.legacy = legacy
        store = Timed(root, checkpoint_every=args.checkpoint_every)
        report = store.build_records(records, catalog)
        started = time.perf_counter()
        hits = (store.scan_index().filter(pl.col("code").str.starts_with("CPT//7")).select("subject_id").unique()
                .collect().height)
        query_s = time.perf_counter() - started
        rows = store.scan_index().select(pl.len()).collect().item()
        files = [p for p in root.rglob("*.parquet") if p.name != "manifest.parquet"]
        figures[legacy] = (report, store.index_s, store.manifest_s, query_s, hits, rows, files)
    print(f"   built {figures[False][0].built:,} graphs, {figures[False][0].nodes_built:,} nodes: build "
          f"{figures[True][0].seconds:.1f} s with the legacy index, {figures[False][0].seconds:.1f} s with parts")
    print(f"   {'index layout':<40}{'writes':>7}{'index s':>9}{'first':>8}{'last':>8}{'manifest s':>11}{'files':>7}"
          f"{'MB':>7}{'query s':>9}")
    for legacy, name in ((True, "one index.parquet rewritten (legacy)"), (False, "one part per checkpoint (now)")):
        report, index_s, manifest_s, query_s, hits, rows, files = figures[legacy]
        print(f"   {name:<40}{len(index_s):7d}{sum(index_s):9.2f}{index_s[0]:8.3f}{index_s[-1]:8.3f}"
              f"{sum(manifest_s):11.2f}{len(files):7d}{sum(p.stat().st_size for p in files) / 1e6:7.1f}{query_s:9.3f}"
              f"   {rows:,} rows, {hits} patients with imaging")
    legacy_s, parts_s = figures[True][1], figures[False][1]
    if len(legacy_s) >= 4:
        def quarters(times: list[float]) -> str:
            n = len(times)
            return " / ".join(f"{statistics.mean(times[q * n // 4:(q + 1) * n // 4]) * 1e3:.0f}" for q in range(4))

        print(f"   ms per index write, by quarter of the build: legacy {quarters(legacy_s)} (each rewrites every row "
              f"so far); parts {quarters(parts_s)}")
        tail = statistics.mean(legacy_s[-max(1, len(legacy_s) // 4):])
        per_graph = tail / len(records)  # seconds to rewrite one graph's rows, at the end of the build
        for cohort in (100_000,):
            flushes = cohort // 500
            quadratic = per_graph * 500 * flushes * (flushes + 1) / 2
            linear = statistics.mean(parts_s) / args.checkpoint_every * cohort
            manifest = figures[False][2][-1] / len(records) * 500 * flushes * (flushes + 1) / 2  # rewritten whole
            print(f"   extrapolated to {cohort:,} graphs at the default checkpoint_every=500: legacy index writes "
                  f"~{quadratic / 60:.0f} min, parts ~{linear:.0f} s (plus the manifest, rewritten whole at each "
                  f"checkpoint: ~{manifest:.0f} s)")
    if not args.keep:
        for name in ("store_legacy", "store_parts"):
            shutil.rmtree(work / name, ignore_errors=True)


def _job_index(args: argparse.Namespace, work: Path, records, catalog) -> None:
    """The build-graphs job's index: actors write one part per batch of 16 tasks (`vista.graph.task_graphs.persist_task_graph`,
    `vista.graph.store.write_index_part`); the driver only registers the graphs in the store manifest
    (`vista.graph.GraphStore.register_rows`) — no consolidated copy of the index is written any more."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vista.graph.store import GraphStore, write_index_part
    from vista.graph.task_graphs import meds_source, persist_task_graph
    from vista.meds.task_key import TaskKey

    out = work / "vista_job"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    rows = []
    for start in range(0, len(records), 16):
        outcomes = [persist_task_graph(meds_source(r, catalog, None), out, TaskKey(r.subject_id), need_graph=False)
                    for r in records[start:start + 16]]
        part = write_index_part(out, (o.index for o in outcomes))
        rows += [{"task": str(o.facts.subject_id), "subject_id": o.facts.subject_id, "prediction_time": None,
                  "content_hash": o.facts.content_hash, "graph_file": o.file, "n_nodes": o.facts.n_nodes,
                  "n_edges": o.facts.n_edges, "source": o.facts.source, "finished_at": None, "index_file": part}
                 for o in outcomes]
    persist_s = time.perf_counter() - started
    patients = out / "patients.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([
        ("task", pa.string()), ("subject_id", pa.int64()), ("prediction_time", pa.timestamp("us")),
        ("content_hash", pa.string()), ("graph_file", pa.string()), ("n_nodes", pa.int64()), ("n_edges", pa.int64()),
        ("source", pa.string()), ("finished_at", pa.timestamp("us", tz="UTC")), ("index_file", pa.string())])), patients)
    print(f"-- build-graphs: {len(rows):,} graphs and {len(rows) // 16 + 1} index parts written in {persist_s:.0f} s "
          "(as the actors do); the driver's last step registers them", flush=True)
    for attempt in ("first run", "rerun (nothing changed)"):
        wall = time.perf_counter()
        report = GraphStore(out).register_rows(patients)
        print(f"   register_rows,   {attempt:<24} {time.perf_counter() - wall:6.2f} s  {report.graphs:,} graphs, "
              f"{report.nodes:,} nodes, {report.changed:,} manifest rows appended")
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


def run_vista(args: argparse.Namespace, work: Path) -> None:
    from vista.meds.reader import MedsDataset
    from vista.synth import SynthConfig, generate

    print(f"\n== VISTA node index: {args.graphs:,} patients of a vista.synth cohort", flush=True)
    dataset_root = work / "synth"
    if not (dataset_root / "metadata").is_dir():
        generate(SynthConfig(n_subjects=args.graphs, seed=args.seed, workers=1), dataset_root, progress=False,
                 overwrite=True)
    dataset = MedsDataset(dataset_root)
    catalog = dataset.code_catalog()
    records = list(dataset.iter_patients())[: args.graphs]
    _store_index(args, work, records, catalog)
    _job_index(args, work, records, catalog)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=100_000)
    parser.add_argument("--rows-per-part", type=int, nargs="+", default=[256, 16],
                        help="part file sizes to measure (the job's --flush-rows default is 256; an actor that "
                             "finishes few patients per --flush-seconds writes smaller ones)")
    parser.add_argument("--retry-share", type=float, default=0.02, help="patients failed in r1 and retried in r2")
    parser.add_argument("--left-share", type=float, default=0.005, help="patients left with a transient failure")
    parser.add_argument("--graphs", type=int, default=2000)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the simulated files")
    parser.add_argument("--skip-predictions", action="store_true")
    parser.add_argument("--skip-vista", action="store_true")
    args = parser.parse_args(argv)
    if args.patients < 1 or args.graphs < 1 or args.checkpoint_every < 1 or min(args.rows_per_part) < 1:
        parser.error("--patients, --graphs, --checkpoint-every and --rows-per-part must be at least 1")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_consolidation_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"working directory {work} (started {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)", flush=True)
    try:
        if not args.skip_predictions:
            run_predictions(args, work)
        if not args.skip_vista:
            run_vista(args, work)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
