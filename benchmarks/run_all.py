"""Run every benchmark one after another and print their measured figures (``make bench``).

Each benchmark is its own module (``python -m benchmarks.<name> --help`` for its options); this runner only
sequences them with their defaults, so figures are not disturbed by each other. ``--only NAME ...`` picks some.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

BENCHMARKS = {
    "synth": "generator rows/s and peak memory (100k subjects)",
    "chunking": "render + chunk a ~256k-token patient vs a naive per-event tiktoken loop",
    "cohort": "cohort build on ~10M rows",
    "features": "summary features of 100k patients, polars vs pandas",
    "graph": "MEDS Graph of a 10k-node patient vs a plain networkx build",
    "xml_ingest": "one 200 MB <eventstream> XML file: reader alone and vista graph, wall time and peak memory",
    "graph_in_actor": "graph build in the predict actor: cost per patient vs render+chunk and the chain's wall time",
    "one_pass": "jobs.predict --graphs (one read for both systems) vs jobs.predict + jobs.build_graphs: wall and "
                "whole-process-tree CPU, 2,000 patients",
    "consolidation": "predict driver's end of run at 100k patients over its part files: plan a rerun, "
                     "consolidate, LLM accounting (wall, CPU, peak memory)",
    "similarity": "vista similar: precision@10 for same cancer / stage / first line vs a Jaccard baseline",
    "serve": "vista serve: server time of a 10k-node patient's page and of a 100k-patient cohort page (CPU ms)",
    "cli_help": "--help of every command in a fresh process (target < 2 s each)",
    "anchor": "predict job vs a plain asyncio script on the same requests: CPU ms per call (whole process tree), "
              "wall / bound at 64 and 256 in flight, wall under a fault mix",
    "reader": "read every patient of 20k synthetic subjects: MedsDataset vs meds-reader 0.2.0, CPU-s and patients/s",
    "llm_cache": "LLM answer cache: CPU µs per put and lookup, a file per answer vs one file per patient",
    "agents": "agent chain on the embedded model: calls, tokens, cache hits, overhead",
    "vista_eval": "VISTA vs BM25 RAG on synthetic lung cases, LLM-judge accuracy with CIs (embedded model: ~20 min)",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks")
    args = parser.parse_args(argv)
    failed = []
    for name in args.only or list(BENCHMARKS):
        print(f"\n=== benchmarks.bench_{name}: {BENCHMARKS[name]}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, "-m", f"benchmarks.bench_{name}"])
        print(f"=== {name}: exit {code} after {time.perf_counter() - started:.1f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
