"""Benchmark: the predict driver's end-of-run work over its part files at 100,000 patients — plan a rerun,
consolidate the outputs, add up the run's LLM accounting — with wall time, CPU time and peak memory.

``--patients`` rows are simulated as the actors write them: a seeded `PatientResult` per patient with realistically
sized text (a 600-2,000 character summary, 300-1,200 characters of reasoning, 2-30 evidence events with 1-4 MEDS
source rows each, one risk step per chunk, chains of 1 to ~90 chunks), turned into its row by the job's own
`trajonco.prediction_rows.row_from_result`/`part_record` and written by the job's own `vista.shared.runs.parts.PartWriter`
(``--rows-per-part`` rows a part file; the job's default is 256, an actor whose ``--flush-seconds`` fires first
writes smaller ones). A share of the patients (``--retry-share``) first gets a transient failure row in run ``r1``
and its ``ok`` row in run ``r2`` (newest row wins), and some keep a transient failure (the rerun's work).

Each measured step runs in a fresh process (the driver), which reports its wall time, CPU time and peak RSS (the
RSS after imports, then ``VmHWM`` reset to it before the step, so the peak is the step's own):

* plan a rerun: read the label file (`vista.shared.meds.tasks.read_label_tasks`), the newest state of every task
  (`vista.shared.runs.parts.latest_states`, four small columns) and `vista.shared.runs.plan.plan_tasks` with the retry policy;
* consolidate: `vista.shared.runs.parts.consolidate_parts` into the job's own outputs (`jobs.predict.prediction_outputs`:
  ``prediction_details.parquet`` and ``predictions.parquet``), read back by `trajonco.prediction_files.read_predictions`
  and checked (one row per task, the retried tasks ``ok``);
* the run's LLM accounting: `vista.shared.runs.parts.run_llm_rows` (who answered run ``r2``, what its kept rows spent).

    python -m benchmarks.bench_consolidation [--patients 100000] [--rows-per-part 256 16] [--work DIR] [--keep]

Figures are printed, not asserted. The simulated part files take ~0.8 GB at 100,000 patients (removed at the end
unless ``--keep``); files are in the page cache (just written). This benchmark imports ``jobs`` (it measures the
job's own reader and writer).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import random
import resource
import shutil
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
    from vista.shared.meds.task_key import TaskKey

    return TaskKey(100_000 + 7 * k, _BASE_TIME + timedelta(days=k % 700, hours=k % 13))


def simulated_result(k: int, rng: random.Random, *, status: str = "ok"):
    """A seeded `PatientResult` of realistic size for task ``k`` (and its `TaskUsage`)."""
    from vista.shared.llm.task_usage import TaskUsage
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


# ------------------------------------------------------------------------------------------------ simulation
@dataclass(frozen=True, slots=True)
class Simulated:
    patients: int
    rows_written: int
    part_files: int
    parts_mb: float
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
    """Write the rows as ``writers`` actors would (part files under ``work/parts/rows``); the labels as
    ``work/labels.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajonco.prediction_rows import PART_SCHEMA, part_record
    from vista.shared.runs.parts import PartWriter, part_files

    started = time.perf_counter()
    keys = [task_key_of(k) for k in range(patients)]
    rng = random.Random(seed + 1)
    pq.write_table(pa.table({"subject_id": pa.array([k.subject_id for k in keys], pa.int64()),
                             "prediction_time": pa.array([k.prediction_time for k in keys], pa.timestamp("us")),
                             "boolean_value": pa.array([rng.random() < 0.5 for _ in keys])}), work / "labels.parquet")
    actors: dict[str, list[PartWriter]] = {}
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
        rows += 1
    for writer in (w for ws in actors.values() for w in ws):
        writer.flush()
    files = part_files(work / "parts")
    return Simulated(patients, rows, len(files), sum(p.stat().st_size for p in files) / 1e6,
                     time.perf_counter() - started)


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


def _plan(work: Path) -> str:
    from vista.shared.meds.tasks import read_label_tasks, task_keys

    from vista.shared.runs.retry import reruns
    from vista.shared.runs.parts import latest_states
    from vista.shared.runs.plan import plan_tasks

    keys = task_keys(read_label_tasks(work / "labels.parquet").table)
    states = latest_states(work / "parts")
    plan = plan_tasks(keys, states, rerun=lambda state: reruns(state, "transient"))
    return f"{len(states):,} tasks with a row, {len(plan.todo):,} to run again, {plan.skipped:,} skipped"


def _consolidate(work: Path) -> str:
    import pyarrow.compute as pc

    from trajonco.prediction_files import read_predictions
    from vista.shared.meds.tasks import read_label_tasks, task_keys

    from jobs.predict import prediction_outputs
    from vista.shared.runs.parts import consolidate_parts

    tasks = read_label_tasks(work / "labels.parquet").table
    keys = task_keys(tasks)
    outputs = prediction_outputs(work / "parts", labelled=tasks.column("boolean_value").null_count == 0)
    report = consolidate_parts(work / "parts", outputs, keys)
    back = read_predictions(work / "parts", columns=["status"])
    once = back.num_rows == len(keys) == report.rows
    ok = pc.sum(pc.equal(back.column("status"), "ok")).as_py()
    return (f"{report.rows:,} rows, {len(report.missing):,} missing, statuses {dict(sorted(report.statuses.items()))}; "
            f"read back: one row per task {once}, {ok:,} ok")


def _accounting(work: Path) -> str:
    from vista.shared.runs.parts import run_llm_rows

    rows = run_llm_rows(work / "parts", "r2")
    return (f"run r2 answered by {rows.answered_by['backend'] or 'no backend recorded'}; its kept rows: "
            f"{rows.kept.calls:,} calls, {rows.kept.prompt_tokens:,} prompt tokens")


STEPS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "plan": ("plan a rerun", _plan),
    "consolidate": ("consolidate both output files", _consolidate),
    "accounting": ("LLM accounting of the run's rows", _accounting),
}


def _child(step: str, work: str, queue) -> None:
    import polars  # noqa: F401 - imports outside the measurement
    import pyarrow.parquet  # noqa: F401

    import jobs.predict  # noqa: F401
    import vista.shared.runs.parts  # noqa: F401

    base = _status_mb("VmRSS")
    _reset_peak()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        info = STEPS[step][1](Path(work))
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})
        return
    queue.put({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "base_mb": base,
               "peak_mb": _peak_mb(), "info": info})


@dataclass(frozen=True, slots=True)
class Measured:
    step: str
    wall: float
    cpu: float
    base_mb: float
    peak_mb: float
    info: str


def measure_step(step: str, work: Path) -> Measured:
    """Run one step in a fresh (spawned) process: its wall/CPU seconds and its peak RSS."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(step, str(work), queue))
    process.start()
    answer = queue.get()
    process.join()
    if "error" in answer:
        raise RuntimeError(f"{step}: {answer['error']}")
    return Measured(step, answer["wall"], answer["cpu"], answer["base_mb"], answer["peak_mb"], answer["info"])


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
              f"{sim.part_files:,} part files ({sim.parts_mb:,.0f} MB)", flush=True)
        print(f"   load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
        print(f"   {'step':<40}{'wall s':>8}{'CPU s':>8}{'RSS before MB':>15}{'peak RSS MB':>13}   result")
        for step, (label, _) in STEPS.items():
            m = measure_step(step, folder)
            print(f"   {label:<40}{m.wall:8.2f}{m.cpu:8.2f}{m.base_mb:15.0f}{m.peak_mb:13.0f}   {m.info}", flush=True)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=100_000)
    parser.add_argument("--rows-per-part", type=int, nargs="+", default=[256, 16],
                        help="part file sizes to measure (the job's --flush-rows default is 256; an actor that "
                             "finishes few patients per --flush-seconds writes smaller ones)")
    parser.add_argument("--retry-share", type=float, default=0.02, help="patients failed in r1 and retried in r2")
    parser.add_argument("--left-share", type=float, default=0.005, help="patients left with a transient failure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the simulated files")
    args = parser.parse_args(argv)
    if args.patients < 1 or min(args.rows_per_part) < 1:
        parser.error("--patients and --rows-per-part must be at least 1")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_consolidation_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"working directory {work} (started {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)", flush=True)
    try:
        run_predictions(args, work)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
