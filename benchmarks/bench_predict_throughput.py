"""Benchmark: the predict job's throughput against an endpoint with a fixed latency, versus the ideal bound.

For each variant (one-stage, two-stage) and each LLM budget (``--in-flight``), it runs ``python -m jobs.predict`` on
the same patients against the synthetic OpenAI-compatible endpoint (``python -m vista.shared.testing.synthetic_server --latency-ms``,
answers after a fixed delay) and prints, from the job's ``summary.json`` and ``predictions.parquet``:

* calls, wall time, start-up (first task started / first row), and the mean number of requests in flight
  (calls x latency / time after start-up);
* the ideal bound: total calls x latency / budget, plus the longest chain of the run (its sequential calls x
  latency: one-stage, every call of the patient; two-stage, one filter round + the reduced chunks + the manager),
  and bound / wall, with and without start-up (above 1.0: faster than that bound, which a schedule can beat);
* the lower bound no schedule can beat, max(calls x latency / budget, longest chain x latency), and lower / wall
  (1.0 = as fast as the budget and the longest chain allow).

Every run has its own output directory (and so its own, cold, LLM cache). One Ray head is started for all runs, in
its own temp dir, and stopped at the end; the endpoint runs in its own process. Figures are printed, not asserted.

    python -m benchmarks.bench_predict_throughput [--patients 100] [--budgets 16 64 256] [--latency 0.5]
        [--variants one_stage two_stage] [--chunk-tokens 1200] [--subjects 1500] [--work DIR] [--results FILE]
    python -m benchmarks.bench_predict_throughput --patients 1000          # the full figure (long)
    python -m benchmarks.bench_predict_throughput --patients 1000 --budgets 256 --max-concurrency 32 128
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from trajonco.prediction_files import read_predictions

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}


@dataclass(frozen=True)
class Figure:
    """One run: a variant at a budget."""

    variant: str
    in_flight: int
    patients: int
    calls: int
    wall_s: float
    startup_s: float
    first_row_s: float
    longest_chain_calls: int
    bound_s: float
    lower_s: float
    mean_in_flight: float
    exit_code: int
    per_actor: int | None = None  # --max-concurrency given to the job (None: the job's default)

    @property
    def ratio(self) -> float:
        return self.bound_s / self.wall_s if self.wall_s else 0.0

    @property
    def efficiency(self) -> float:
        return self.lower_s / self.wall_s if self.wall_s else 0.0

    @property
    def ratio_after_startup(self) -> float:
        busy = self.wall_s - self.startup_s
        return self.bound_s / busy if busy > 0 else 0.0


# ------------------------------------------------------------------------------------------------ processes
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _end(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(2)


class RayHead:
    """A Ray head of this benchmark (its own temp dir and ports), stopped by ending exactly its processes."""

    def __init__(self, cpus: int):
        self.temp_dir = Path(tempfile.mkdtemp(prefix="bench_ray_", dir="/tmp"))
        self.port = _free_port()
        ray = Path(sys.executable).with_name("ray")
        cmd = [str(ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}", f"--num-cpus={cpus}",
               "--include-dashboard=false", f"--temp-dir={self.temp_dir}", "--disable-usage-stats",
               f"--ray-client-server-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
               f"--dashboard-agent-grpc-port={_free_port()}", f"--metrics-export-port={_free_port()}",
               f"--runtime-env-agent-port={_free_port()}"]
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | RAY_ENV
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start failed: {done.stderr[-2000:]}")
        self.address = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        _end(_processes_mentioning(str(self.temp_dir)))
        shutil.rmtree(self.temp_dir, ignore_errors=True)


class Endpoint:
    """``python -m vista.shared.testing.synthetic_server`` with a fixed latency, in its own process."""

    def __init__(self, latency_s: float, context_window: int = 32768, record_bodies: Path | None = None):
        self.port = _free_port()
        record = ["--record-bodies", str(record_bodies)] if record_bodies is not None else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vista.shared.testing.synthetic_server", "--port", str(self.port), "--latency-ms", str(latency_s * 1000),
             "--context-window", str(context_window), *record], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the synthetic endpoint did not start")

    def stats(self) -> dict[str, int]:
        """Requests answered so far, the most held at once (``max_in_flight``), and when the first one arrived
        (``first_arrival``, a ``time.time()``; absent before any)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as answer:
            return {k: v for k, v in json.load(answer).items() if v is not None}

    def requests(self) -> int:
        return self.stats()["requests"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


# ------------------------------------------------------------------------------------------------ inputs
def make_inputs(work: Path, subjects: int, patients: int) -> tuple[Path, Path]:
    """A synthetic MEDS dataset and a label file of ``patients`` subjects, each at the end of its whole record."""
    from vista.shared.synth import SynthConfig, generate

    dataset = work / f"meds_{subjects}"
    if not (dataset / "data").is_dir():
        generate(SynthConfig(n_subjects=subjects, seed=11, workers=1), dataset, progress=False)
    rows = pl.scan_parquet(str(dataset / "data" / "**" / "*.parquet")).select("subject_id", "time")
    ends = (rows.group_by("subject_id").agg(pl.col("time").max()).drop_nulls().sort("subject_id")
            .collect().head(patients))
    if ends.height < patients:
        raise SystemExit(f"the dataset has {ends.height} subjects with events; ask for more --subjects")
    labels = ends.select(pl.col("subject_id"), (pl.col("time") + pl.duration(days=1)).cast(pl.Datetime("us"))
                         .alias("prediction_time"), pl.lit(None, pl.Boolean).alias("boolean_value"))
    path = work / f"labels_{subjects}_{patients}.parquet"
    pq.write_table(labels.to_arrow(), path)
    return dataset, path


# ------------------------------------------------------------------------------------------------ runs
def job_argv(*, labels: Path, dataset: Path, out: Path, variant: str, base_url: str, budget: int, chunk_tokens: int,
             address: str | None = None, per_actor: int | None = None) -> list[str]:
    """``python -m jobs.predict`` against ``base_url`` at ``budget`` in flight (on its own local Ray without
    ``address``)."""
    argv = [sys.executable, "-m", "jobs.predict", "--labels", str(labels), "--dataset", str(dataset), "--out", str(out),
            "--variant", variant, "--backend", "openai", "--base-url", base_url, "--model", "synthetic",
            "--context-tokens", "32768", "--chunk-tokens", str(chunk_tokens), "--in-flight", str(budget),
            "--progress-every", "30"]
    if address is not None:
        argv += ["--address", address]
    if per_actor is not None:
        argv += ["--max-concurrency", str(per_actor)]
    return argv


def longest_chain(out: Path, variant: str) -> tuple[int, int]:
    """Rows of a finished run and its longest chain of sequential calls (one-stage: every call of the patient;
    two-stage: one filter round + the reduced chunks + the manager)."""
    frame = pl.from_arrow(read_predictions(out))  # the run's rows with their prediction_details.parquet columns
    if variant == "two_stage":
        chains = (frame["n_chunks_reduced"].fill_null(0) + 2).to_list()
    else:
        chains = frame["llm_calls"].to_list()
    return frame.height, int(max(chains)) if chains else 0


def run_one(args: argparse.Namespace, head: RayHead, endpoint: Endpoint, dataset: Path, labels: Path, variant: str,
            budget: int, per_actor: int | None = None) -> Figure:
    out = args.work / f"out_{variant}_{budget}_{per_actor or 'default'}_{args.patients}"
    shutil.rmtree(out, ignore_errors=True)
    argv = job_argv(labels=labels, dataset=dataset, out=out, variant=variant, base_url=endpoint.base_url, budget=budget,
                    chunk_tokens=args.chunk_tokens, address=head.address, per_actor=per_actor)
    env = os.environ | RAY_ENV | {"RAY_ADDRESS": head.address}
    before = endpoint.requests()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - started
    calls = endpoint.requests() - before
    plan = next((line for line in done.stdout.splitlines() if line.startswith("[predict] run ")), "")
    print(f"  {plan}", flush=True)
    if done.returncode != 0 or not (out / "summary.json").is_file():
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        return Figure(variant, budget, args.patients, calls, wall, 0, 0, 0, 0, 0, 0, done.returncode, per_actor)
    summary = json.loads((out / "summary.json").read_text())
    rows, longest = longest_chain(out, variant)
    bound = calls * args.latency / budget + longest * args.latency
    lower = max(calls * args.latency / budget, longest * args.latency)
    startup = summary.get("startup_s") or 0.0
    wall = summary["wall_s"]  # the job's own clock (from planning to the consolidated file), as startup_s
    busy = max(wall - startup, 1e-9)
    return Figure(variant, budget, rows, calls, round(wall, 1), round(startup, 1),
                  round(summary.get("first_row_s") or 0.0, 1), longest, round(bound, 1), round(lower, 1),
                  round(calls * args.latency / busy, 1), done.returncode, per_actor)


def print_table(figures: list[Figure]) -> None:
    head = (f"{'variant':<10} {'budget':>6} {'per actor':>9} {'patients':>8} {'calls':>6} {'wall s':>7} {'start s':>7} {'1st row':>7} "
            f"{'longest':>7} {'bound s':>7} {'bound/wall':>10} {'after start':>11} {'lower s':>7} {'lower/wall':>10} "
            f"{'in flight':>9}")
    print(head)
    print("-" * len(head))
    for f in figures:
        print(f"{f.variant:<10} {f.in_flight:>6} {f.per_actor or 'default':>9} {f.patients:>8} {f.calls:>6} {f.wall_s:>7.1f} {f.startup_s:>7.1f} "
              f"{f.first_row_s:>7.1f} {f.longest_chain_calls:>7} {f.bound_s:>7.1f} {f.ratio:>10.2f} "
              f"{f.ratio_after_startup:>11.2f} {f.lower_s:>7.1f} {f.efficiency:>10.2f} {f.mean_in_flight:>9.1f}"
              + ("" if f.exit_code == 0 else
                                                                           f"  (exit {f.exit_code})"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=100, help="patients per run (default 100; 1000 for the full "
                        "figure)")
    parser.add_argument("--subjects", type=int, default=1500, help="subjects of the generated dataset (default 1500)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 64, 256], help="LLM budgets (--in-flight)")
    parser.add_argument("--variants", nargs="+", default=["one_stage", "two_stage"], choices=["one_stage", "two_stage"])
    parser.add_argument("--max-concurrency", type=int, nargs="+", default=[None], metavar="N",
                        help="requests in flight per patient actor, each value a run (default: the job's own, "
                             "min(budget, 32)); on a small machine fewer, busier actors leave more CPU to the rest")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the endpoint waits before each answer")
    parser.add_argument("--chunk-tokens", type=int, default=1200, help="chunk limit of the agents (default 1200)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs of the benchmark's Ray head")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one job may take")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_predict_throughput",
                        help="working directory (dataset, labels, job outputs; kept for reuse)")
    parser.add_argument("--results", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.subjects < args.patients:
        args.subjects = 2 * args.patients
    dataset, labels = make_inputs(args.work, args.subjects, args.patients)
    print(f"predict throughput: {args.patients} patients, endpoint latency {args.latency:g} s, chunks of "
          f"{args.chunk_tokens} tokens, Ray head with {args.cpus} CPUs", flush=True)
    head = RayHead(args.cpus)
    endpoint = Endpoint(args.latency)
    figures: list[Figure] = []
    try:
        for variant in args.variants:
            for budget in args.budgets:
                for per_actor in args.max_concurrency:
                    each = f", {per_actor} per actor" if per_actor else ""
                    print(f"{variant} at {budget} in flight{each} ...", flush=True)
                    figures.append(run_one(args, head, endpoint, dataset, labels, variant, budget, per_actor))
    finally:
        endpoint.stop()
        head.stop()
    print()
    print_table(figures)
    print("\nbound = calls x latency / budget + longest chain x latency ('after start': the wall time from the first "
          "task started); lower = max(calls x latency / budget, longest chain x latency): lower/wall 1.00 is ideal; "
          "in flight = calls x latency / time after start-up")
    if args.results is not None:
        args.results.write_text(json.dumps([asdict(f) | {"ratio": round(f.ratio, 3), "efficiency": round(f.efficiency, 3)}
                                            for f in figures], indent=2))


if __name__ == "__main__":
    main()
