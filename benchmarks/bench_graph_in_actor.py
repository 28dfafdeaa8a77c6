"""Benchmark: should the predict actor build the patient's MEDS Graph before the agent chain (one actor for both systems)?

What the actor does now: read the patient's `PatientRecord` from the MEDS dataset, render the XML timeline from it
(`vista.shared.timeline.render_timeline`) and chunk it (`trajonco.chunking.chunk_timeline`); the chain's evidence events
carry their MEDS provenance through the timeline's event ids (``e<k>`` -> shard and row), no graph needed. There is
no graph -> TrajOnco-timeline path (`vista.toa.serialize` writes VISTA's encounter text, a different format for a
different prompt), so building the graph in the predict actor means *also* building it: its cost is pure overhead
for the chain. Measured per patient, on a `vista.shared.synth` cohort (its smallest, median, 90th-percentile and largest
records) plus one ~10,000-node patient (`benchmarks.bench_graph.large_patient`), median of ``--repeats`` runs:

* ``render``: `render_timeline` (events before the prediction time) and ``+ chunk``: `chunk_timeline`, what the
  actor does now (the chunk count gives the chain's length: chunks + 1 calls, one-stage);
* ``graph``: `vista.graph.build_graph` of the same events (`source_from_record(record.before(t))`, as the VISTA
  job does), and ``+ persist``: content hash, GraphML write and node index, as `vista.graph.task_graphs.persist_task_graph`;
* ``load``: `vista.graph.read_graph` of the persisted GraphML (the "or loads" variant: a graph built earlier);
* peak traced memory (tracemalloc) of render+chunk and of the graph build;
* the chain's wall time at ``--latency`` seconds a call (its lower bound: calls x latency), and the graph build as
  a share of it.

Then the whole cohort once through each (CPU seconds per patient, extrapolated to 100,000 patients). Figures are
printed, not asserted; the decision line states which way they point.

    python -m benchmarks.bench_graph_in_actor [--subjects 2000] [--repeats 5] [--latency 0.5] [--chunk-tokens 16000]
        [--dataset MEDS_DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trajonco.chunking import chunk_timeline
from trajonco.pipeline import default_prediction_time
from vista.graph import build_graph, content_hash, index_table, read_graph, source_from_record, write_graph
from vista.shared.records import CodeCatalog, PatientRecord
from vista.shared.timeline import render_timeline


@dataclass(frozen=True, slots=True)
class Timing:
    wall_ms: float
    cpu_ms: float


def timed(fn: Callable[[], object], repeats: int) -> Timing:
    """Median wall and process-CPU milliseconds over ``repeats`` runs."""
    walls, cpus = [], []
    for _ in range(repeats):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return Timing(statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3)


def peak_mb(fn: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


@dataclass(frozen=True, slots=True)
class PatientFigures:
    label: str
    events: int
    nodes: int
    chunks: int
    render: Timing
    render_chunk: Timing
    graph: Timing
    persist: Timing
    load: Timing
    render_mb: float
    graph_mb: float


def measure_patient(label: str, record: PatientRecord, catalog: CodeCatalog, chunk_tokens: int, repeats: int,
                    folder: Path) -> PatientFigures:
    when = default_prediction_time(record)  # the whole record: the largest timeline the patient gives
    before = record.before(when)

    def render():
        return render_timeline(record, catalog, when)

    def render_chunk():
        return chunk_timeline(render_timeline(record, catalog, when), chunk_tokens)

    def graph():
        return build_graph(source_from_record(before, catalog))

    path = folder / f"{record.subject_id}.graphml"

    def persist():
        source = source_from_record(before, catalog)
        digest = content_hash(source)
        built = build_graph(source)
        write_graph(built, path)
        return digest, index_table(built)

    render_chunk()  # warm caches (token encoder, code lookups) outside the measurement
    built = graph()
    persist()
    chunks = len(render_chunk())
    return PatientFigures(
        label, len(record.events), built.n_nodes, chunks, timed(render, repeats), timed(render_chunk, repeats),
        timed(graph, repeats), timed(persist, repeats), timed(lambda: read_graph(path), repeats),
        peak_mb(render_chunk), peak_mb(graph))


def cohort_pass(records: list[PatientRecord], catalog: CodeCatalog, chunk_tokens: int) -> tuple[float, float]:
    """CPU seconds of render+chunk and of the graph build over every record (one pass each)."""
    cpu = time.process_time()
    for record in records:
        chunk_timeline(render_timeline(record, catalog, default_prediction_time(record)), chunk_tokens)
    render_s = time.process_time() - cpu
    cpu = time.process_time()
    for record in records:
        build_graph(source_from_record(record.before(default_prediction_time(record)), catalog))
    return render_s, time.process_time() - cpu


def pick(records: list[PatientRecord]) -> list[tuple[str, PatientRecord]]:
    """The smallest (with at least two timed events), median, 90th-percentile and largest records."""
    usable = sorted((r for r in records if sum(e.time is not None for e in r.events) >= 2), key=lambda r: len(r.events))
    n = len(usable)
    return [("smallest", usable[0]), ("median", usable[n // 2]), ("p90", usable[min(n - 1, n * 9 // 10)]),
            ("largest", usable[-1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", type=int, default=2000, help="size of the vista.shared.synth cohort to generate")
    parser.add_argument("--dataset", type=Path, default=None, help="an existing MEDS dataset instead of vista.shared.synth")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per LLM call, for the chain's wall time")
    parser.add_argument("--chunk-tokens", type=int, default=16_000, help="chunk limit l (the paper's default 16000)")
    parser.add_argument("--large-nodes", type=int, default=10_000, help="nodes of the extra large patient (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.subjects < 10 or args.repeats < 1 or args.latency <= 0:
        parser.error("--subjects must be at least 10, --repeats at least 1 and --latency positive")

    from vista.shared.meds.reader import MedsDataset

    work = Path(tempfile.mkdtemp(prefix="bench_graph_in_actor_"))
    try:
        root = args.dataset
        if root is None:
            from vista.shared.synth import SynthConfig, generate

            root = work / "synth"
            generate(SynthConfig(n_subjects=args.subjects, seed=args.seed, workers=1), root, progress=False)
        dataset = MedsDataset(root)
        catalog = dataset.code_catalog()
        started = time.perf_counter()
        records = list(dataset.iter_patients())
        read_s = time.perf_counter() - started
        chosen = pick(records)
        if args.large_nodes:
            from benchmarks.bench_graph import large_patient

            large, large_catalog = large_patient(args.large_nodes, args.seed)
            chosen.append((f"~{args.large_nodes // 1000}k nodes", large))
        print(f"cohort: {len(records):,} patients from {root} (read in {read_s:.1f} s); events per patient: median "
              f"{statistics.median(len(r.events) for r in records):.0f}, max {max(len(r.events) for r in records):,}; "
              f"chunk limit {args.chunk_tokens:,} tokens; LLM latency {args.latency:g} s a call")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (CPU ms are the steadier figure)")
        header = (f"{'patient':<14}{'events':>7}{'nodes':>7}{'chunks':>7}{'render':>9}{'+chunk':>9}{'graph':>9}"
                  f"{'+persist':>9}{'load':>9}{'graph/':>8}{'chain s':>9}{'graph/':>8}{'MB r+c':>8}{'MB graph':>9}")
        print("per patient, CPU ms (median of repeats); graph/ = graph build over render+chunk, and over the chain's "
              "wall time (calls x latency)")
        print(header)
        figures = []
        for label, record in chosen:
            use = large_catalog if label.startswith("~") else catalog
            f = measure_patient(label, record, use, args.chunk_tokens, args.repeats, work)
            figures.append(f)
            chain_s = (f.chunks + 1) * args.latency
            print(f"{f.label:<14}{f.events:7,}{f.nodes:7,}{f.chunks:7d}{f.render.cpu_ms:9.1f}{f.render_chunk.cpu_ms:9.1f}"
                  f"{f.graph.cpu_ms:9.1f}{f.persist.cpu_ms:9.1f}{f.load.cpu_ms:9.1f}"
                  f"{f.graph.cpu_ms / f.render_chunk.cpu_ms:7.1f}x{chain_s:9.1f}"
                  f"{f.graph.cpu_ms / 1e3 / chain_s:8.1%}{f.render_mb:8.1f}{f.graph_mb:9.1f}", flush=True)
        print("(wall ms of the same, for reference: " + "; ".join(
            f"{f.label} render+chunk {f.render_chunk.wall_ms:.1f}, graph {f.graph.wall_ms:.1f}, load {f.load.wall_ms:.1f}"
            for f in figures) + ")")

        render_s, graph_s = cohort_pass(records, catalog, args.chunk_tokens)
        n = len(records)
        print(f"whole cohort, one pass, CPU: render+chunk {render_s:.1f} s ({render_s / n * 1e3:.1f} ms/patient), graph "
              f"build {graph_s:.1f} s ({graph_s / n * 1e3:.1f} ms/patient) = {graph_s / render_s:.1f}x; at 100,000 "
              f"patients the graph adds ~{graph_s / n * 1e5 / 3600:.1f} CPU-hours to the predict job "
              f"(render+chunk: {render_s / n * 1e5 / 3600:.1f})")
        median, largest = figures[1], figures[3]
        share = median.graph.cpu_ms / 1e3 / ((median.chunks + 1) * args.latency)
        print(f"graph build per patient: +{graph_s / render_s:.0%} of the actor's CPU before the LLM (cohort), "
              f"{share:.2%} of a median chain's wall time at {args.latency:g} s a call "
              f"({largest.graph.cpu_ms / 1e3 / ((largest.chunks + 1) * args.latency):.2%} for the largest); with the "
              f"GraphML write {median.persist.cpu_ms:.0f} ms (median); loading a stored graph costs "
              f"{median.load.cpu_ms / median.graph.cpu_ms:.1f}x (median) to "
              f"{figures[-1].load.cpu_ms / figures[-1].graph.cpu_ms:.1f}x (largest) a fresh build")
        print("what the graph would give the chain: nothing it uses. The workers and the manager read the XML "
              "timeline, which is rendered from the record either way (there is no graph -> timeline renderer; one "
              "could only reproduce the same elements from the same rows); evidence events already cite MEDS shard and row through the "
              "timeline's event ids. The graph's own additions (encounter grouping, note sections, code ancestors, "
              "mentions) feed VISTA's TOA prompt, not TrajOnco's.")
        cost = "small" if share < 0.01 and graph_s < render_s else "not small"
        slower = "slower still" if median.load.cpu_ms > median.graph.cpu_ms else "cheaper, but needs a VISTA run first"
        print(f"decision: keep the predict actor as it is (record -> timeline -> chain) and build graphs in the VISTA "
              f"job (build-graphs): the cost is {cost} and buys the chain nothing; loading a stored graph instead of "
              f"building one is {slower}.")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
