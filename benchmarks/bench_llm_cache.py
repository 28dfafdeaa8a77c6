"""Benchmark: the LLM answer cache's CPU per put and per lookup (hit, miss) and its file count, for each layout.

Writes ``--entries`` answers spread over ``--patients`` patients into a temporary folder: with no patient (one file
per answer, created and renamed), with the patient (one line appended to the patient's bucket file, 4,096 buckets),
and — the layout before the buckets — one file of lines per patient, written as that code wrote it and read as an
older cache is read now (bucket first, then the patient's file). Then looks every answer up and as many absent keys,
in a fresh cache (as a rerun's process would). Prints CPU µs per operation (the process's user + system time, what
an actor's event loop pays) and the files each layout made, side by side. Figures only, no assertions on time.

    python -m benchmarks.bench_llm_cache [--entries 5000] [--patients 300]
    python -m benchmarks.bench_llm_cache --entries 200000 --patients 100000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from vista.shared.llm.cache import CachedAnswer, ResponseCache

ANSWER = CachedAnswer('{"summary": "' + "stable disease, no new lesions; " * 12 + '", "risk": "Low"}',
                      "gpt-4.1-mini", "WorkerAnswer", 3200, 180, served_model="gpt-4.1-mini-2025-04-14")
LAYOUTS = ("file per answer", "file per patient", "bucket files")


def _cpu_us(run: Callable[[], None], count: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / count * 1e6


def _write_per_patient(root: str, calls: list[tuple[str, str]]) -> None:
    """The cache as the code before the buckets wrote it: ``patients/<h[:2]>/<h[:32]>.jsonl``, a line per answer."""
    lines: dict[Path, list[bytes]] = {}
    for key, patient in calls:
        digest = hashlib.sha256(patient.encode()).hexdigest()
        path = Path(root) / "patients" / digest[:2] / f"{digest[:32]}.jsonl"
        lines.setdefault(path, []).append(f"{key}\t{ANSWER.to_json()}\n".encode())
    for path, chunk in lines.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(chunk))


def measure(root: str, entries: int, patients: int, layout: str) -> dict[str, float]:
    """CPU µs per put, hit and miss, and the files written, for one layout."""
    calls = [(hashlib.sha256(f"call {n}".encode()).hexdigest(), f"patient-{n % patients}") for n in range(entries)]
    absent = [(hashlib.sha256(f"absent {n}".encode()).hexdigest(), p) for n, (_, p) in enumerate(calls)]
    by_patient = layout != "file per answer"

    def patient(p: str) -> str | None:
        return p if by_patient else None

    figures = {"put": float("nan")}
    if layout == "file per patient":
        _write_per_patient(root, calls)
    else:
        writer = ResponseCache(root)
        figures["put"] = _cpu_us(lambda: [writer.put(k, ANSWER, patient(p)) for k, p in calls], entries)
        writer.close()
    cache = ResponseCache(root)  # a rerun's process: nothing indexed yet
    figures["get (hit)"] = _cpu_us(lambda: [cache.get(k, patient(p)) for k, p in calls], entries)
    figures["get (miss)"] = _cpu_us(lambda: [cache.get(k, patient(p)) for k, p in absent], entries)
    assert all(cache.get(k, patient(p)) == ANSWER for k, p in calls[:50])
    figures["files"] = sum(len(names) for _, _, names in os.walk(root))
    cache.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--patients", type=int, default=300)
    args = parser.parse_args(argv)
    figures = {}
    for layout in LAYOUTS:
        with tempfile.TemporaryDirectory() as root:
            figures[layout] = measure(root, args.entries, args.patients, layout)
    print(f"LLM cache, {args.entries:,} answers over {args.patients:,} patients: CPU µs per operation, files")
    print(f"{'':<12}" + "".join(f"{layout:>18}" for layout in LAYOUTS))
    for name in figures[LAYOUTS[0]]:
        print(f"{name:<12}" + "".join(f"{figures[layout][name]:>18,.1f}" if name != "files" else
                                      f"{figures[layout][name]:>18,.0f}" for layout in LAYOUTS))
    print("(file per patient: written as the code before the buckets wrote it; its put is not measured)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
