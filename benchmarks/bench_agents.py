"""Benchmark: short synthetic patients through the agent chain on the embedded model, cold and then cached.

For each variant it prints calls and tokens per agent, wall time per stage, the time the model was busy and the
orchestration overhead (wall time not spent inside the model backend: timeline rendering, chunking, prompts,
gateway bookkeeping, validation, memory), then runs the same patients again with a fresh gateway on the same
response cache: every call must be a cache hit and every result the same. Patients run one after another so
the overhead is not hidden behind model time (``--concurrent`` runs them together, as a batch job would).

Patients come from the synthetic generator (`vista.shared.synth`): each record is cut at the first visit where its
timeline reaches ``--target-tokens``, so every patient spans a few chunks of ``--chunk-tokens``.

    python -m benchmarks.bench_agents [--patients 20] [--variants one_stage two_stage] [--chunk-tokens 400]
                                      [--target-tokens 700] [--llm key=value ...] [--concurrent] [--results FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from trajonco.agents.results import PatientResult, Variant
from trajonco.pipeline import PipelineConfig, run_patient
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.llm.backend import Backend, ChatReply, ChatRequest
from vista.shared.llm.gateway import build_backend
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import CodeCatalog, PatientRecord
from vista.shared.synth import SynthConfig, generate
from vista.shared.timeline import render_timeline


class TimedBackend:
    """A backend wrapper recording when the model is busy, so overhead = wall time outside those intervals."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.name = inner.name
        self.context_window = getattr(inner, "context_window", None)
        self.intervals: list[tuple[float, float]] = []

    async def complete(self, request: ChatRequest) -> ChatReply:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request)
        finally:
            self.intervals.append((started, time.perf_counter()))

    async def discover_context_window(self) -> int | None:
        return await self.inner.discover_context_window()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def busy_seconds(self) -> float:
        """Length of the union of the busy intervals (overlapping calls count once)."""
        total, end = 0.0, float("-inf")
        for start, stop in sorted(self.intervals):
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total


@dataclass(frozen=True, slots=True)
class ShortPatient:
    record: PatientRecord
    prediction_time: datetime
    tokens: int


def short_patients(n: int, target_tokens: int, seed: int, work_dir: Path) -> tuple[list[ShortPatient], CodeCatalog]:
    """``n`` synthetic patients, each cut at the first visit where its timeline reaches ``target_tokens``."""
    generate(SynthConfig(n_subjects=max(60, 4 * n), seed=seed, workers=1), work_dir, progress=False)
    dataset = MedsDataset(work_dir)
    catalog = dataset.code_catalog()
    chosen: list[ShortPatient] = []
    for record in dataset.iter_patients():
        for visit in record.visit_dates()[1:25]:  # at least two visits before the cut
            cutoff = datetime.combine(visit + timedelta(days=1), datetime.min.time())
            tokens = render_timeline(record, catalog, cutoff).n_tokens()
            if tokens >= target_tokens:
                if tokens <= 2 * target_tokens:
                    chosen.append(ShortPatient(record, cutoff, tokens))
                break
        if len(chosen) == n:
            return chosen, catalog
    raise SystemExit(f"only {len(chosen)} synthetic patients reach {target_tokens} tokens within 2x; lower --target-tokens")


@dataclass(frozen=True, slots=True)
class RunFigures:
    results: list[PatientResult]
    wall: float
    busy: float
    backend_calls: int


async def run_all(patients: Sequence[ShortPatient], catalog: CodeCatalog, config: PipelineConfig, llm: LLMConfig,
                  *, concurrent: bool) -> RunFigures:
    backend = TimedBackend(build_backend(llm))
    async with open_gateway(llm, backend=backend) as gateway:
        started = time.perf_counter()
        if concurrent:
            results = list(await asyncio.gather(*(
                run_patient(p.record, catalog, gateway, config, prediction_time=p.prediction_time) for p in patients)))
        else:
            results = [await run_patient(p.record, catalog, gateway, config, prediction_time=p.prediction_time) for p in patients]
        wall = time.perf_counter() - started
    return RunFigures(results, wall, backend.busy_seconds(), len(backend.intervals))


def _sum(results: Sequence[PatientResult], agent: str, field: str) -> float:
    return sum(getattr(r.usage[agent], field) for r in results if agent in r.usage)


def report(variant: Variant, cold: RunFigures, warm: RunFigures) -> None:
    results = cold.results
    agents = sorted({a for r in results for a in r.usage})
    print(f"\n== {variant.value}: {len(results)} patients ==")
    statuses = Counter(r.status for r in results)
    print(f"status: {dict(statuses)}; risk scores: {sorted(Counter(r.risk_score for r in results).items(), key=str)}")
    chunks = [r.chunks.n_chunks for r in results]
    line = f"chunks C: mean {statistics.mean(chunks):.2f} (min {min(chunks)}, max {max(chunks)})"
    if variant is Variant.TWO_STAGE:
        reduced = [r.chunks.n_chunks_reduced or 0 for r in results]
        line += f"; C_new: mean {statistics.mean(reduced):.2f} (min {min(reduced)}, max {max(reduced)})"
    print(line)
    print(f"{'agent':<14}{'calls':>7}{'failed':>8}{'attempts':>10}{'prompt tok':>12}{'compl. tok':>12}")
    for agent in agents:
        print(f"{agent:<14}{int(_sum(results, agent, 'calls')):>7}{int(_sum(results, agent, 'failed')):>8}"
              f"{int(_sum(results, agent, 'attempts')):>10}{int(_sum(results, agent, 'prompt_tokens')):>12}"
              f"{int(_sum(results, agent, 'completion_tokens')):>12}")
    stages = {name: sum(getattr(r.latency, name) for r in results) for name in ("preprocess", "workers", "manager", "single_agent")}
    print("wall time per stage (s, summed over patients): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items() if v))
    per_patient = [r.latency.total for r in results]
    print(f"per patient (s): mean {statistics.mean(per_patient):.1f}, median {statistics.median(per_patient):.1f}, "
          f"max {max(per_patient):.1f}")
    overhead = cold.wall - cold.busy
    print(f"cold run: wall {cold.wall:.1f} s, model busy {cold.busy:.1f} s over {cold.backend_calls} requests, "
          f"orchestration overhead {overhead:.2f} s = {100 * overhead / cold.wall:.2f}% of wall (target < 2%)")
    calls = sum(u.calls for r in warm.results for u in r.usage.values())
    hits = sum(u.cache_hits for r in warm.results for u in r.usage.values())
    same = [a.model_dump(exclude={"usage", "latency"}) for a in cold.results] == [
        b.model_dump(exclude={"usage", "latency"}) for b in warm.results]
    print(f"second run: {hits}/{calls} calls from the cache ({100 * hits / max(calls, 1):.1f}%), "
          f"{warm.backend_calls} model requests, wall {warm.wall:.2f} s, results identical: {same}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patients", type=int, default=20)
    parser.add_argument("--variants", nargs="+", default=["one_stage", "two_stage"], choices=[v.value for v in Variant])
    parser.add_argument("--chunk-tokens", type=int, default=400, help="chunk limit l (cl100k tokens)")
    parser.add_argument("--target-tokens", type=int, default=700, help="cut each patient's record near this timeline size")
    parser.add_argument("--cancer", default="lung")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--concurrent", action="store_true", help="run the patients concurrently through one gateway")
    parser.add_argument("--results", type=Path, help="write the cold run's PatientResults here as JSON lines")
    LLMConfig.add_cli_argument(parser)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_agents_") as tmp:
        t0 = time.perf_counter()
        patients, catalog = short_patients(args.patients, args.target_tokens, args.seed, Path(tmp) / "meds")
        tokens = [p.tokens for p in patients]
        print(f"{len(patients)} synthetic patients in {time.perf_counter() - t0:.1f} s; timeline tokens mean "
              f"{statistics.mean(tokens):.0f} (min {min(tokens)}, max {max(tokens)})")
        llm = LLMConfig.from_cli(args.llm).with_overrides({"cache_dir": str(Path(tmp) / "llm-cache")})
        print(f"model {llm.model} ({llm.backend}), max_tokens {llm.max_tokens}, concurrency {llm.max_concurrency}")
        for name in args.variants:
            variant = Variant(name)
            config = PipelineConfig(variant=variant, cancer=args.cancer, chunk_tokens=args.chunk_tokens)
            cold = asyncio.run(run_all(patients, catalog, config, llm, concurrent=args.concurrent))
            warm = asyncio.run(run_all(patients, catalog, config, llm, concurrent=args.concurrent))
            report(variant, cold, warm)
            if args.results is not None:
                with args.results.open("a", encoding="utf-8") as out:
                    out.writelines(r.model_dump_json() + "\n" for r in cold.results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
