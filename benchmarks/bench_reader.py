"""Reading every patient: `MedsDataset` beside PyPI ``meds-reader`` 0.2.0 on the same synthetic MEDS dataset.

Generates (or reuses, under ``--work``) a ``trajonco synth`` dataset of ``--subjects`` subjects, converts it once
with ``meds_reader_convert IN OUT --num_threads 2`` (timed, reused afterwards), then runs each reading in a fresh
process, ``--repeats`` times, interleaved, and prints the median CPU seconds (the process's own user + system time
from the moment the dataset is opened: imports are left out on both sides), patients/s and events/s by CPU, peak
RSS, and the ratio to meds-reader. CPU is the figure to judge: the machine is shared, wall time is shown only
for reference.

The readings:

* ``meds-reader, every event``: open the database, and for every subject every event's ``time``, ``code``,
  ``numeric_value`` and ``text_value`` (meds-reader makes an event's fields when they are asked for).
* ``MedsDataset.iter_patients, every event``: the same four fields of every event of every patient, records
  streamed in dataset order. Our events also carry the respelled code, source code, unit, visit id, kind and event
  id (provenance), all made while reading: what the project's steps use.
* ``MedsDataset.load_patients(all)``: every record kept in one dict, events not touched (the issue's measure).
* ``meds-reader, subjects only``: ``len(subject.events)`` of every subject, for scale (it reads no event).

meds-reader is looked for in this interpreter's environment (``pip install meds-reader==0.2.0``), then in a side
virtualenv under ``--work`` that this benchmark creates with pip; if neither works the benchmark says so and prints
our figures alone.

    python -m benchmarks.bench_reader                  # 20,000 subjects, 3 repeats
    python -m benchmarks.bench_reader --subjects 2000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEDS_READER = "meds-reader==0.2.0"
FIELDS = ("time", "code", "numeric_value", "text_value")


# ================================================================================================ in the child process
def _child(kind: str, path: str) -> dict[str, float | int]:
    """Read ``path`` one way (see the module docstring); CPU and wall from the opening of the dataset."""
    if kind.startswith("meds_reader"):
        import meds_reader

        cpu0, wall0 = time.process_time(), time.perf_counter()
        db = meds_reader.SubjectDatabase(path)
        patients = events = 0
        if kind == "meds_reader_events":
            for subject_id in db:
                for event in db[subject_id].events:
                    event.time, event.code, event.numeric_value, event.text_value
                    events += 1
                patients += 1
        else:
            for subject_id in db:
                events += len(db[subject_id].events)
                patients += 1
    else:
        from vista.shared.meds.reader import MedsDataset

        cpu0, wall0 = time.process_time(), time.perf_counter()
        dataset = MedsDataset(path)
        patients = events = 0
        if kind == "ours_events":
            for record in dataset.iter_patients():
                for event in record.events:
                    event.time, event.code, event.numeric_value, event.text_value
                    events += 1
                patients += 1
        else:
            records = dataset.load_patients(dataset.subject_ids())
            patients, events = len(records), sum(len(r.events) for r in records.values())
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"cpu_s": cpu, "wall_s": wall, "patients": patients, "events": events, "rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> float:
    """This process's peak resident memory since its exec (``VmHWM``; ``ru_maxrss`` would carry the parent's
    peak over the fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ================================================================================================ in the parent
def _dataset(work: Path, subjects: int, seed: int) -> Path:
    root = work / f"synth-{subjects}-seed{seed}"
    if (root / "metadata" / "dataset.json").exists():
        print(f"dataset: reusing {root}")
        return root
    from vista.shared.synth import SynthConfig, generate

    print(f"dataset: generating {subjects:,} subjects (seed {seed}) in {root}", flush=True)
    generate(SynthConfig(n_subjects=subjects, seed=seed), root, progress=False, overwrite=True)
    return root


def _meds_reader_python(work: Path) -> tuple[str | None, str]:
    """An interpreter that imports meds_reader (this one, else a side venv made here), or None and why not."""
    probe = [sys.executable, "-c", "import meds_reader"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return sys.executable, f"{MEDS_READER} from this environment"
    venv = work / "meds-reader-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"meds-reader: not importable here; creating a side venv in {venv}", flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode:
            return None, f"cannot create a venv ({made.stderr.strip()[-200:]})"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", MEDS_READER],
                               capture_output=True, text=True)
    if installed.returncode:
        return None, f"pip install {MEDS_READER} failed ({installed.stderr.strip()[-300:]})"
    return str(python), f"{MEDS_READER} from the side venv {venv}"


def _converted(python: str, dataset: Path, work: Path) -> tuple[Path, str]:
    out = work / f"{dataset.name}-meds_reader"
    if (out / "meds_reader.version").exists() or (out / "subject_id").exists():
        return out, "reused"
    convert = Path(python).parent / "meds_reader_convert"
    if out.exists():
        shutil.rmtree(out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(convert), str(dataset), str(out), "--num_threads", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, f"converted once: {time.perf_counter() - started:.1f} s wall, {cpu:.1f} CPU-s"


def _run(python: str, kind: str, path: Path) -> dict[str, float | int]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([python, "-m", "benchmarks.bench_reader", "--child", kind, str(path)],
                          capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1])
    if done.returncode:
        raise SystemExit(f"bench_reader: the {kind} reading failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


LABELS = {
    "meds_reader_events": "meds-reader, every event",
    "ours_events": "MedsDataset.iter_patients, every event",
    "ours_load": "MedsDataset.load_patients(all)",
    "meds_reader_subjects": "meds-reader, subjects only",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_reader",
                        help="where the dataset, its meds-reader database and the side venv are kept")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    args.work.mkdir(parents=True, exist_ok=True, mode=0o700)
    dataset = _dataset(args.work, args.subjects, args.seed)
    python, source = _meds_reader_python(args.work)
    runs: dict[str, tuple[str, Path]] = {"ours_events": (sys.executable, dataset),
                                         "ours_load": (sys.executable, dataset)}
    if python is None:
        print(f"meds-reader UNAVAILABLE: {source}; printing MedsDataset's figures alone")
    else:
        database, how = _converted(python, dataset, args.work)
        print(f"meds-reader: {source}; database {database} ({how})")
        runs = {"meds_reader_events": (python, database), **runs, "meds_reader_subjects": (python, database)}
    results: dict[str, list[dict[str, float | int]]] = {kind: [] for kind in runs}
    for _ in range(args.repeats):  # interleaved, so a burst of load on the shared machine hits every reading
        for kind, (interpreter, path) in runs.items():
            results[kind].append(_run(interpreter, kind, path))
    print(f"\n{args.subjects:,} subjects, median of {args.repeats} run(s), CPU = the reading process's user+system")
    print(f"{'reading':42}{'CPU-s':>8}{'patients/s':>12}{'events/s':>12}{'wall s':>8}{'RSS MB':>8}{'× meds-reader':>15}")
    base = statistics.median(r["cpu_s"] for r in results["meds_reader_events"]) if python else None
    for kind, rows in results.items():
        cpu = statistics.median(r["cpu_s"] for r in rows)
        patients, events = rows[0]["patients"], rows[0]["events"]
        ratio = f"{base / cpu:14.2f}×" if base else f"{'n/a':>15}"
        print(f"{LABELS[kind]:42}{cpu:8.2f}{patients / cpu:12,.0f}{events / cpu:12,.0f}"
              f"{statistics.median(r['wall_s'] for r in rows):8.2f}{max(r['rss_mb'] for r in rows):8.0f}{ratio}")
    if base:
        ours = statistics.median(r["cpu_s"] for r in results["ours_events"])
        verdict = "met" if base / ours >= 0.5 else "NOT met"
        print(f"\nevery event, patients/s by CPU: MedsDataset {base / ours:.2f}× meds-reader "
              f"(target ≥ 0.5×: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
