"""Benchmark: the LLM answer cache's CPU per put and per lookup (hit, miss), per-key files vs one file per patient.

Writes ``--entries`` answers spread over ``--patients`` patients into a temporary folder, once with no patient
(one file per answer, created and renamed) and once with the patient (one line appended to the patient's file),
then looks every answer up and as many absent keys. Prints CPU µs per operation (the process's user + system
time, what an actor's event loop pays), side by side. Figures only, no assertions on time.

    python -m benchmarks.bench_llm_cache [--entries 5000] [--patients 300]
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable

from vista.shared.llm.cache import CachedAnswer, ResponseCache

ANSWER = CachedAnswer('{"summary": "' + "stable disease, no new lesions; " * 12 + '", "risk": "Low"}',
                      "gpt-4.1-mini", "WorkerAnswer", 3200, 180, served_model="gpt-4.1-mini-2025-04-14")


def _cpu_us(run: Callable[[], None], count: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / count * 1e6


def measure(root: str, entries: int, patients: int, *, per_patient: bool) -> dict[str, float]:
    """CPU µs per put, hit and miss for one layout."""
    cache = ResponseCache(root)
    calls = [(hashlib.sha256(f"call {n}".encode()).hexdigest(), f"patient-{n % patients}") for n in range(entries)]
    absent = [(hashlib.sha256(f"absent {n}".encode()).hexdigest(), p) for n, (_, p) in enumerate(calls)]

    def patient(p: str) -> str | None:
        return p if per_patient else None

    figures = {
        "put": _cpu_us(lambda: [cache.put(k, ANSWER, patient(p)) for k, p in calls], entries),
        "get (hit)": _cpu_us(lambda: [cache.get(k, patient(p)) for k, p in calls], entries),
        "get (miss)": _cpu_us(lambda: [cache.get(k, patient(p)) for k, p in absent], entries),
    }
    assert all(cache.get(k, patient(p)) == ANSWER for k, p in calls[:50])
    cache.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--patients", type=int, default=300)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as old, tempfile.TemporaryDirectory() as new:
        per_key = measure(old, args.entries, args.patients, per_patient=False)
        appended = measure(new, args.entries, args.patients, per_patient=True)
    print(f"LLM cache, {args.entries:,} answers over {args.patients:,} patients: CPU µs per operation")
    print(f"{'':<12}{'file per answer':>17}{'file per patient':>18}")
    for name in per_key:
        print(f"{name:<12}{per_key[name]:>17.1f}{appended[name]:>18.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
