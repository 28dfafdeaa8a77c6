"""Benchmark: the predict job beside the plain-asyncio anchor, on the same endpoint, requests and call count.

For each setting (``--in-flight`` at an endpoint latency: 64 at 0.5 s and 256 at 2 s by default, so that two cores
can sustain the load), it runs

* **the job**: ``python -m jobs.predict`` (one-stage, on its own local Ray, cold cache) against the synthetic
  endpoint (``python -m vista.shared.testing.synthetic_server --latency-ms ... --record-bodies``), which records every request
  body it answers;
* **the anchor**: ``python -m benchmarks.anchor_asyncio`` (`openai.AsyncOpenAI` + ``asyncio.Semaphore(N)``) sending
  exactly those recorded bodies to a fresh endpoint of the same latency;
* with ``--in-process``, **the same chains in one process** (`benchmarks.chains_in_process`: the job's patients,
  prompts, validation and cache, on one event loop without Ray), which splits the job's CPU into its own Python and
  Ray's share;

each under `benchmarks.tree_cpu` (a cpuacct cgroup where it can make one), so the CPU of the whole process tree is counted — for the job
its driver, actors and every Ray process (raylet, GCS, workers, agents). It prints, for both: CPU ms per call, wall
time (launch to exit, start-up included) and wall / ideal bound, and the most requests the endpoint held at once.
The ideal bound of the job is max(calls x latency / N, longest chain x latency) (a patient's calls are sequential);
the anchor's is ceil(calls / N) x latency. Then, unless ``--no-faults``, the job once more at the first setting
behind `vista.shared.testing.fault_proxy` (8% 429 with Retry-After 1 s, 5% 500, 4% garbage body, 3% truncated answer), and its
wall / the same job's fault-free wall. Figures are printed, never asserted.

    python -m benchmarks.bench_anchor                  # 200 patients (about 8 minutes on 2 cores)
    python -m benchmarks.bench_anchor --quick          # 20 patients, shorter chains: under 3 minutes
    python -m benchmarks.bench_anchor --patients 1000 --settings 64:0.5 256:2 512:4
    python -m benchmarks.bench_anchor --patients 1000 --settings 64:0.5 --in-process --no-faults
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.bench_predict_throughput import RAY_ENV, Endpoint, job_argv, longest_chain, make_inputs
from benchmarks.tree_cpu import TreeUsage, run_counted
from vista.shared.testing.fault_proxy import FaultPlan, FaultProxy

FAULT_MIX = FaultPlan(rate_limit=0.08, server_error=0.05, garbage_body=0.04, truncated=0.03, retry_after_s=1.0)


@dataclass(frozen=True)
class Run:
    """One measured run."""

    who: str  # anchor, job, job+faults
    in_flight: int
    latency_s: float
    calls: int  # requests the endpoint answered
    cpu_s: float  # whole process tree
    wall_s: float  # launch to exit
    bound_s: float
    server_max_in_flight: int
    exit_code: int
    startup_s: float | None = None  # the job's own start-up (summary.json)
    first_request_s: float | None = None  # launch to the endpoint's first chat request
    last_answer_s: float | None = None  # launch to the endpoint's last answer (the rest of the wall is the tail)
    failed: int = 0  # anchor: answers that did not parse; job: rows not ok
    method: str = "subreaper"  # how the tree's CPU was counted (`benchmarks.tree_cpu`)

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000 * self.cpu_s / self.calls if self.calls else 0.0

    @property
    def wall_over_bound(self) -> float:
        return self.wall_s / self.bound_s if self.bound_s else 0.0


class ProxyThread:
    """A `FaultProxy` on its own event loop thread (in this process: its CPU is not the job's)."""

    def __init__(self, upstream: str, plan: FaultPlan, seed: int = 18):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.proxy = FaultProxy(upstream, plan, seed=seed)
        asyncio.run_coroutine_threadsafe(self.proxy.__aenter__(), self.loop).result(timeout=30)
        self.base_url = self.proxy.base_url

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.__aexit__(None, None, None), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def job_env(ray_dir: str) -> dict[str, str]:
    """The job starts its own local Ray (a descendant of the counter), in ``ray_dir`` (short: Ray's socket paths
    must fit AF_UNIX's limit)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | RAY_ENV
    env["RAY_TMPDIR"] = ray_dir
    return env


def since_launch(stats: dict, launched: float, moment: str = "first_arrival") -> float | None:
    """Seconds from ``launched`` (a ``time.time()``) to the endpoint's ``moment``: its first chat request
    (``first_arrival``) or its last answer (``last_answered``); None when it had none."""
    at = stats.get(moment)
    return round(at - launched, 2) if at is not None else None


def run_job(args: argparse.Namespace, dataset: Path, labels: Path, budget: int, latency: float, *, who: str,
            record: Path | None = None, faults: FaultPlan | None = None) -> Run:
    out = args.work / f"out_{who.replace('+', '_')}_{budget}"
    shutil.rmtree(out, ignore_errors=True)
    endpoint = Endpoint(latency, record_bodies=record)
    proxy = ProxyThread(endpoint.base_url, faults) if faults is not None else None
    try:
        argv = job_argv(labels=labels, dataset=dataset, out=out, variant="one_stage",
                        base_url=proxy.base_url if proxy else endpoint.base_url, budget=budget,
                        chunk_tokens=args.chunk_tokens)
        ray_dir = tempfile.mkdtemp(prefix="ray_anchor_", dir="/tmp")
        launched = time.time()
        try:
            counted = run_counted(argv, env=job_env(ray_dir), timeout_s=args.timeout)
        finally:
            shutil.rmtree(ray_dir, ignore_errors=True)
        stats = endpoint.stats()
    finally:
        if proxy is not None:
            print(f"  fault proxy: {dict(proxy.proxy.counts)}", flush=True)
            proxy.stop()
        endpoint.stop()
    usage = counted.usage
    if usage.leftovers:
        print(f"  note: {usage.leftovers} process(es) of the job were still alive after it ended (then stopped)")
    plan = next((line for line in counted.stdout.splitlines() if line.startswith("[predict] run ")), "")
    print(f"  {plan}", flush=True)
    if usage.returncode != 0 or not (out / "summary.json").is_file():
        print(counted.stdout[-2000:], counted.stderr[-2000:], sep="\n")
        return Run(who, budget, latency, stats["requests"], usage.cpu_s, usage.wall_s, 0.0, stats["max_in_flight"],
                   usage.returncode)
    summary = json.loads((out / "summary.json").read_text())
    _, longest = longest_chain(out, "one_stage")
    calls = stats["requests"]
    bound = max(calls * latency / budget, longest * latency)
    not_ok = sum(n for status, n in (summary.get("by_status") or {}).items() if status != "ok")
    return Run(who, budget, latency, calls, usage.cpu_s, usage.wall_s, round(bound, 1), stats["max_in_flight"],
               usage.returncode, summary.get("startup_s"), since_launch(stats, launched),
               since_launch(stats, launched, "last_answered"), not_ok, usage.method)


@dataclass(frozen=True)
class _Counted:
    """A plain script's run against a fresh endpoint: its whole-tree usage, its last JSON line, the endpoint's stats."""

    usage: TreeUsage
    result: dict
    stats: dict
    launched: float

    def run(self, who: str, budget: int, latency: float, bound_s: float) -> Run:
        return Run(who, budget, latency, self.stats["requests"], self.usage.cpu_s, self.usage.wall_s, round(bound_s, 1),
                   self.stats["max_in_flight"], self.usage.returncode, None, since_launch(self.stats, self.launched),
                   since_launch(self.stats, self.launched, "last_answered"), int(self.result.get("failed", 0)),
                   self.usage.method)


def run_script(args: argparse.Namespace, module: str, options: list[str], latency: float) -> _Counted:
    """``python -m module --base-url URL options`` under `benchmarks.tree_cpu`, against a fresh endpoint."""
    endpoint = Endpoint(latency)
    try:
        launched = time.time()
        counted = run_counted([sys.executable, "-m", module, "--base-url", endpoint.base_url, *options],
                              timeout_s=args.timeout)
        stats = endpoint.stats()
    finally:
        endpoint.stop()
    lines = counted.stdout.strip().splitlines()
    if counted.usage.returncode != 0 or not lines:
        print(counted.stdout[-2000:], counted.stderr[-2000:], sep="\n")
    result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return _Counted(counted.usage, result, stats, launched)


def run_anchor(args: argparse.Namespace, bodies: Path, budget: int, latency: float) -> Run:
    """The plain-asyncio anchor replaying the job's recorded requests (`benchmarks.anchor_asyncio`)."""
    counted = run_script(args, "benchmarks.anchor_asyncio", ["--bodies", str(bodies), "--in-flight", str(budget)],
                         latency)
    bound = math.ceil(counted.result["calls"] / budget) * latency if "calls" in counted.result else 0.0
    return counted.run("anchor", budget, latency, bound)


def run_in_process(args: argparse.Namespace, dataset: Path, labels: Path, job: Run) -> Run:
    """The job's chains in one process without Ray (`benchmarks.chains_in_process`), at the job's setting and against
    the job's bound (the same chains)."""
    counted = run_script(args, "benchmarks.chains_in_process", ["--labels", str(labels), "--dataset", str(dataset),
                         "--in-flight", str(job.in_flight), "--chunk-tokens", str(args.chunk_tokens)], job.latency_s)
    bound = job.bound_s or counted.stats["requests"] * job.latency_s / job.in_flight
    return counted.run("in-process", job.in_flight, job.latency_s, bound)


def say(run: Run) -> Run:
    """One line as soon as a run ends (a long benchmark stopped early still told its figures)."""
    print(f"  {run.who}: {run.calls} calls, {run.cpu_ms_per_call:.1f} ms CPU/call, wall {run.wall_s:.1f} s = "
          f"{run.wall_over_bound:.2f} x bound {run.bound_s:.1f} s, server max in flight {run.server_max_in_flight}",
          flush=True)
    return run


def print_table(runs: list[Run]) -> None:
    head = (f"{'setting':<14} {'who':<10} {'calls':>6} {'CPU s':>7} {'CPU ms/call':>11} {'wall s':>7} {'start s':>7} "
            f"{'1st req s':>9} {'tail s':>6} {'bound s':>7} {'wall/bound':>10} {'server max':>10} {'failed':>6}")
    print(head)
    print("-" * len(head))
    for r in runs:
        setting = f"{r.in_flight} @ {r.latency_s:g} s"
        start = f"{r.startup_s:.1f}" if r.startup_s is not None else "-"
        first = f"{r.first_request_s:.1f}" if r.first_request_s is not None else "-"
        tail = f"{r.wall_s - r.last_answer_s:.1f}" if r.last_answer_s is not None else "-"
        print(f"{setting:<14} {r.who:<10} {r.calls:>6} {r.cpu_s:>7.1f} {r.cpu_ms_per_call:>11.1f} {r.wall_s:>7.1f} "
              f"{start:>7} {first:>9} {tail:>6} {r.bound_s:>7.1f} {r.wall_over_bound:>10.2f} {r.server_max_in_flight:>10} {r.failed:>6}"
              + ("" if r.exit_code == 0 else f"  (exit {r.exit_code})"))


def compare(runs: list[Run]) -> list[str]:
    """The ratios the issue asks for: job / anchor CPU per call per setting, and the faulted wall / fault-free wall."""
    lines = []

    def beside(job: Run, who: str) -> Run | None:  # the run of ``who`` at the job's setting
        return next((r for r in runs if r.who == who and (r.in_flight, r.latency_s) == (job.in_flight, job.latency_s)),
                    None)

    for job in (r for r in runs if r.who == "job"):
        anchor = beside(job, "anchor")
        if anchor is not None and anchor.cpu_ms_per_call:
            lines.append(f"{job.in_flight} @ {job.latency_s:g} s: job CPU per call = "
                         f"{job.cpu_ms_per_call / anchor.cpu_ms_per_call:.1f} x the anchor's; server saw at most "
                         f"{job.server_max_in_flight} of {job.in_flight} from the job")
        alone = beside(job, "in-process")
        if alone is not None and alone.calls:
            lines.append(f"{job.in_flight} @ {job.latency_s:g} s: the same chains in one process without Ray cost "
                         f"{alone.cpu_ms_per_call:.1f} ms per call; Ray's share of the job: {job.cpu_s - alone.cpu_s:.1f} "
                         f"CPU-s ({(job.cpu_s - alone.cpu_s) / job.cpu_s:.0%})")
    faulted = next((r for r in runs if r.who == "job+faults"), None)
    clean = beside(faulted, "job") if faulted is not None else None
    if faulted is not None and clean is not None:
        lines.append(f"{faulted.in_flight} @ {faulted.latency_s:g} s under the fault mix: job wall {faulted.wall_s:.1f} s"
                     f" = {faulted.wall_s / clean.wall_s:.2f} x its fault-free wall ({clean.wall_s:.1f} s)")
    return lines


def setting(text: str) -> tuple[int, float]:
    """``N:LATENCY_S``, e.g. ``256:2``."""
    budget, _, latency = text.partition(":")
    try:
        return int(budget), float(latency or 0.5)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IN_FLIGHT:LATENCY_S (e.g. 256:2), not {text!r}") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=200, help="patients of the job (default 200)")
    parser.add_argument("--subjects", type=int, default=400, help="subjects of the generated dataset (default 400)")
    parser.add_argument("--settings", type=setting, nargs="+", default=[(64, 0.5), (256, 2.0)], metavar="N:LATENCY",
                        help="in-flight budgets with their endpoint latency in seconds (default 64:0.5 256:2)")
    parser.add_argument("--quick", action="store_true", help="20 patients in chunks of 4000 tokens (shorter chains): "
                        "under 3 minutes")
    parser.add_argument("--no-faults", action="store_true", help="skip the run under the fault mix")
    parser.add_argument("--in-process", action="store_true", help="also run the job's chains in one process without "
                        "Ray (benchmarks.chains_in_process) at each setting: the job's CPU less that is Ray's share")
    parser.add_argument("--chunk-tokens", type=int, help="chunk limit of the agents (default 1200; --quick 4000)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one run may take")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_anchor",
                        help="working directory (dataset, labels, outputs, recorded bodies; kept for reuse)")
    parser.add_argument("--results", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.patients, args.subjects = 20, 60
    args.chunk_tokens = args.chunk_tokens or (4000 if args.quick else 1200)
    args.subjects = max(args.subjects, 2 * args.patients)
    args.work.mkdir(parents=True, exist_ok=True)
    dataset, labels = make_inputs(args.work, args.subjects, args.patients)
    print(f"anchor vs job: {args.patients} patients, one-stage, chunks of {args.chunk_tokens} tokens, "
          f"{os.cpu_count()} CPUs", flush=True)
    runs: list[Run] = []
    for budget, latency in args.settings:
        bodies = args.work / f"bodies_{budget}.jsonl"
        bodies.unlink(missing_ok=True)
        print(f"job at {budget} in flight, {latency:g} s latency ...", flush=True)
        job = say(run_job(args, dataset, labels, budget, latency, who="job", record=bodies))
        runs.append(job)
        if bodies.is_file():
            print(f"anchor at {budget} in flight, {latency:g} s latency ...", flush=True)
            runs.append(say(run_anchor(args, bodies, budget, latency)))
        bodies.unlink(missing_ok=True)  # the job's prompts: not kept
        if args.in_process:
            print(f"the job's chains in one process (no Ray) at {budget} in flight, {latency:g} s latency ...", flush=True)
            runs.append(say(run_in_process(args, dataset, labels, job)))
    if not args.no_faults:
        budget, latency = args.settings[0]
        print(f"job at {budget} in flight, {latency:g} s latency, under the fault mix ...", flush=True)
        runs.append(say(run_job(args, dataset, labels, budget, latency, who="job+faults", faults=FAULT_MIX)))
    print()
    print_table(runs)
    methods = sorted({r.method for r in runs})
    print(f"\nCPU: user + system of the whole process tree (the job's driver, actors and every Ray process; counted by "
          f"{' and '.join(methods)}{'' if methods == ['cgroup'] else ': a subreaper count is a lower bound'}); wall: "
          "launch to exit, start-up included; bound: job and its chains in one process max(calls x latency / N, "
          "longest chain x latency), anchor ceil(calls / N) x latency; start: the job's own start-up (its first task started, summary.json); 1st "
          "req: launch to the endpoint's first chat request; tail: the endpoint's last answer to exit; server max: most requests the endpoint held at once")
    for line in compare(runs):
        print(line)
    if args.results is not None:
        args.results.write_text(json.dumps([asdict(r) | {"cpu_ms_per_call": round(r.cpu_ms_per_call, 2),
                                                          "wall_over_bound": round(r.wall_over_bound, 3)} for r in runs],
                                           indent=2))


if __name__ == "__main__":
    main()
