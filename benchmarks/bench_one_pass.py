"""Benchmark: one pass for both systems — ``jobs.predict --graphs STORE`` — against the two jobs it replaces,
``jobs.predict`` then ``jobs.build_graphs --stages graph`` (the VISTA job without its LLM stages), on one cohort.

The cohort is a generated synthetic MEDS dataset of ``--patients`` subjects (`vista.shared.synth`, as the other job
benchmarks make it) and a label row per subject a day after its record ends, so both arms read every patient and
store every patient's whole-record graph. The predictions (``--variant``, default single-agent: one call per patient,
the same in both arms) are asked of the synthetic OpenAI-compatible endpoint
(``python -m vista.shared.testing.synthetic_server --latency-ms``, in its own process, not counted), as in
`benchmarks.bench_predict_throughput`. Every job runs under `benchmarks.tree_cpu` on its own local Ray, so its CPU is
that of its whole process tree (driver, actors, raylet, GCS, workers); every job has a fresh output directory and
LLM cache. It prints, for each arm, wall time (launch to exit, Ray start-up included) and CPU seconds, the jobs'
parts, the LLM calls and the graphs in the store (the two stores must hold the same subjects). Figures are printed,
not asserted.

    python -m benchmarks.bench_one_pass                       # 2,000 patients (about 10 minutes on 2 quiet cores)
    python -m benchmarks.bench_one_pass --patients 200        # a quick check
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_anchor import job_env
from benchmarks.bench_predict_throughput import Endpoint, job_argv, make_inputs
from benchmarks.tree_cpu import TreeUsage, run_counted


@dataclass(frozen=True, slots=True)
class Job:
    """One counted job of an arm."""

    name: str
    usage: TreeUsage
    calls: int
    not_ok: int  # rows of the run whose status is not ok


def counted_job(name: str, argv: list[str], out: Path, endpoint: Endpoint, timeout_s: float) -> Job:
    """``argv`` under the tree counter, on its own local Ray (in a short temp dir: Ray's socket paths are limited)."""
    ray_dir = tempfile.mkdtemp(prefix="ray_onepass_", dir="/tmp")
    before = endpoint.requests()
    try:
        counted = run_counted(argv, env=job_env(ray_dir), timeout_s=timeout_s)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    usage = counted.usage
    plan = next((line for line in counted.stdout.splitlines() if " run " in line and line.startswith("[")), "")
    print(f"  {name}: exit {usage.returncode}, {usage.wall_s:.1f} s wall, {usage.cpu_s:.1f} s CPU; {plan}", flush=True)
    if usage.returncode != 0:
        print(counted.stdout[-2000:], counted.stderr[-2000:], sep="\n")
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    by_status = summary.get("by_status") or {}
    return Job(name, usage, endpoint.requests() - before, sum(n for status, n in by_status.items() if status != "ok"))


def stored_subjects(store: Path) -> list[int]:
    from vista.graph import GraphStore

    return GraphStore(store).subject_ids()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=2000, help="patients (and subjects of the dataset; default 2000)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the endpoint waits before each answer "
                        "(default 0.05: the LLM part stays small beside the reads and graphs being compared)")
    parser.add_argument("--variant", choices=["single_agent", "one_stage", "two_stage"], default="single_agent",
                        help="the agents (default single_agent: one call per patient, the same in both arms, so the "
                             "reads and graphs being compared are not drowned out by the chain)")
    parser.add_argument("--in-flight", type=int, default=64, help="the jobs' LLM budget (default 64)")
    parser.add_argument("--chunk-tokens", type=int, default=6000, help="chunk limit of the agents (default 6000: "
                        "within a fifth of the endpoint's 32,768-token context)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one job may take")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_one_pass",
                        help="working directory (dataset and labels are kept for reuse; job outputs are redone)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    dataset, labels = make_inputs(args.work, args.patients, args.patients)
    outs = {name: args.work / name for name in ("one_pass", "one_pass_graphs", "predict", "build_graphs")}
    for out in outs.values():
        shutil.rmtree(out, ignore_errors=True)
    print(f"one pass vs two jobs: {args.patients} patients, {args.variant}, endpoint latency {args.latency:g} s, "
          f"{args.in_flight} in flight, chunks of {args.chunk_tokens} tokens; every job on its own local Ray", flush=True)

    def predict(out: Path, *extra: str) -> list[str]:
        return [*job_argv(labels=labels, dataset=dataset, out=out, variant=args.variant, base_url=endpoint.base_url,
                          budget=args.in_flight, chunk_tokens=args.chunk_tokens), *extra]

    endpoint = Endpoint(args.latency)
    try:
        print("one pass: jobs.predict --graphs", flush=True)
        one = [counted_job("predict --graphs", predict(outs["one_pass"], "--graphs", str(outs["one_pass_graphs"])),
                           outs["one_pass"], endpoint, args.timeout)]
        print("two jobs: jobs.predict, then jobs.build_graphs --stages graph", flush=True)
        two = [counted_job("predict", predict(outs["predict"]), outs["predict"], endpoint, args.timeout),
               counted_job("build_graphs", [sys.executable, "-m", "jobs.build_graphs", "--dataset", str(dataset),
                                            "--out", str(outs["build_graphs"]), "--stages", "graph",
                                            "--progress-every", "30"], outs["build_graphs"], endpoint, args.timeout)]
    finally:
        endpoint.stop()

    graphs = {"one pass": stored_subjects(outs["one_pass_graphs"]), "two jobs": stored_subjects(outs["build_graphs"])}
    print()
    head = f"{'arm':<10} {'jobs (wall s/CPU s)':<36} {'wall s':>8} {'CPU s':>8} {'LLM calls':>9} {'not ok':>6} {'graphs':>7}"
    print(head)
    print("-" * len(head))
    totals = {}
    for arm, jobs in (("one pass", one), ("two jobs", two)):
        wall, cpu = sum(j.usage.wall_s for j in jobs), sum(j.usage.cpu_s for j in jobs)
        totals[arm] = (wall, cpu)
        parts = " + ".join(f"{j.name} {j.usage.wall_s:.0f}/{j.usage.cpu_s:.0f}" for j in jobs)
        failed = [j.name for j in jobs if j.usage.returncode != 0]
        print(f"{arm:<10} {parts:<36} {wall:>8.1f} {cpu:>8.1f} {sum(j.calls for j in jobs):>9} "
              f"{sum(j.not_ok for j in jobs):>6} {len(graphs[arm]):>7}"
              + (f"  (failed: {', '.join(failed)})" if failed else ""))
    (wall_1, cpu_1), (wall_2, cpu_2) = totals["one pass"], totals["two jobs"]
    if wall_2 and cpu_2:
        print(f"\none pass / two jobs: wall {wall_1 / wall_2:.2f}, CPU {cpu_1 / cpu_2:.2f}")
    if graphs["one pass"] != graphs["two jobs"]:
        print(f"note: the stores differ ({len(graphs['one pass'])} vs {len(graphs['two jobs'])} subjects)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
