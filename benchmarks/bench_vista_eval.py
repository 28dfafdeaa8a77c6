"""Benchmark: VISTA vs the BM25 RAG baseline on a small synthetic lung cohort, scored against the ground truth.

Generates a seeded synthetic cohort, picks incident lung-cancer cases (the smallest records first, so the default run
stays short), keeps each record's events from ``--days-before-diagnosis`` to ``--days-after-diagnosis`` around the
clinical diagnosis (the work-up, diagnosis, staging and first treatment; or whole with ``--full-record``), builds the
MEDS Graph, the TOA timeline (`vista.toa.build_timeline`) and VISTA's display (`vista.display.build_display`), the
RAG display (`vista.rag.generate_rag_display`) with the same LLM, then evaluates both (`vista.evaluation.evaluate`)
with the judge LLM. Prints the retrieval speed, the time and calls of every stage, and accuracy per variable for
VISTA and RAG with patient-bootstrap 95% CIs, naming the LLM that wrote the displays and the judge LLM.

Default: the embedded SmolLM2-135M model for everything (it proves the machinery; its clinical answers are poor).
An OpenAI-compatible endpoint: ``--base-url http://HOST:8000/v1 --model NAME`` (key in ``--api-key-env``), and a
separate judge with ``--judge-base-url/--judge-model``; any other gateway setting with ``--llm key=value``.

    python -m benchmarks.bench_vista_eval [--patients 3] [--days-before-diagnosis 90] [--days-after-diagnosis 45]
                                          [--full-record] [--base-url URL --model NAME] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from vista.display import DisplayConfig, TumorBoardDisplay, build_display, load_variables
from vista.evaluation import EvaluationReport, TruthCase, evaluate, load_oncology_truths
from vista.graph import PatientGraph, build_graph
from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import PatientRecord
from vista.rag import RagConfig, build_index, generate_rag_display, query_text
from vista.shared.synth import SynthConfig, generate
from vista.shared.synth.ground_truth import OncologyRecord
from vista.toa import TOAConfig, build_timeline, serialize_text
from vista.shared.tokens import count_tokens

NOW = dt.datetime(2030, 1, 1)


@dataclass(frozen=True, slots=True)
class Case:
    truth: OncologyRecord
    graph: PatientGraph
    as_of: dt.date
    record_tokens: int


EMBEDDED_TIMEOUT_S = 900.0
"""Time limit per call on the embedded model unless ``--llm timeout_s=...`` says otherwise: a 3k-token prompt takes
≈15 s on an idle core but minutes when the machine is shared (measured: a 4.8k-token prompt timed out at 120 s
with a load average of 12 on 2 CPUs)."""


def writer_config(args: argparse.Namespace) -> LLMConfig:
    base = LLMConfig.from_cli(args.llm)
    if args.base_url or args.model:
        base = base.with_overrides({"backend": "openai", "base_url": args.base_url, "model": args.model or base.model,
                                    "api_key_env": args.api_key_env})
    if base.backend == "embedded" and not any(item.split("=", 1)[0].strip() == "timeout_s" for item in args.llm):
        base = base.with_overrides({"timeout_s": EMBEDDED_TIMEOUT_S})
    return base


def judge_config(args: argparse.Namespace, writer: LLMConfig) -> LLMConfig:
    if not (args.judge_base_url or args.judge_model):
        return writer
    return writer.with_overrides({"backend": "openai", "base_url": args.judge_base_url or writer.base_url,
                                  "model": args.judge_model or writer.model, "api_key_env": args.api_key_env})


def window(record: PatientRecord, start: dt.date, end: dt.date) -> PatientRecord:
    """The record's static rows and the events dated within [start, end] (event ids and provenance unchanged)."""
    kept = [e for e in record.events if e.time is None or start <= e.time.date() <= end]
    return PatientRecord(record.subject_id, record.shard, record.first_row, kept)


def lung_cases(root: Path, n: int, days_before: int | None, days_after: int | None) -> list[Case]:
    """The ``n`` incident lung cases with the smallest serialized records, each cut to the window around diagnosis."""
    dataset = MedsDataset(root, now=NOW)
    catalog = dataset.code_catalog()
    truths = {sid: t for sid, t in load_oncology_truths(root).items() if t.cancer == "lung" and t.is_incident_case}
    cases = []
    for record in dataset.iter_patients():
        truth = truths.get(record.subject_id)
        if truth is None:
            continue
        diagnosis = truth.clinical_diagnosis_date
        as_of = truth.record_end_date if days_after is None else min(truth.record_end_date,
                                                                      diagnosis + dt.timedelta(days=days_after))
        start = truth.record_start_date if days_before is None else diagnosis - dt.timedelta(days=days_before)
        graph = build_graph(window(record, start, as_of), catalog)
        cases.append(Case(truth, graph, as_of, count_tokens(serialize_text(graph))))
    if len(cases) < n:
        raise SystemExit(f"the cohort has {len(cases)} incident lung cases, fewer than --patients {n}; raise --subjects")
    return sorted(cases, key=lambda c: (c.record_tokens, c.truth.subject_id))[:n]


def query_latency(graph: PatientGraph, config: RagConfig, repeats: int) -> tuple[int, float, float, float, float]:
    """(chunks, chunking+index seconds, BM25 index seconds, median and best seconds per query) for one patient."""
    queries = [query_text(s) for s in load_variables()]
    began = time.perf_counter()
    index = build_index(graph, config)
    total = time.perf_counter() - began
    index.search(queries[0], config.top_k)  # the first query pays one-time setup
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        for query in queries:
            index.search(query, config.top_k)
        times.append((time.perf_counter() - began) / len(queries))
    return len(index), total, index.build_seconds, statistics.median(times), min(times)


def retrieval_speed(cases: list[Case], config: RagConfig, repeats: int = 20) -> None:
    """Chunking, index build and per-query BM25 latency on the cases' records and on a ~10,000-node patient."""
    from benchmarks.bench_graph import large_patient

    record, catalog = large_patient(10_000)
    large = build_graph(record, catalog)
    rows = [(f"subject {c.truth.subject_id}", c.graph, c.record_tokens) for c in cases]
    rows.append((f"large ({large.n_nodes} nodes)", large, count_tokens(serialize_text(large))))
    print(f"  {'patient':<22}{'tokens':>8}{'chunks':>8}{'chunk+index ms':>16}{'index ms':>10}{'query ms':>10}{'best ms':>9}")
    for name, graph, tokens in rows:
        chunks, total, index_s, median, best = query_latency(graph, config, repeats)
        print(f"  {name:<22}{tokens:>8}{chunks:>8}{total * 1e3:>16.1f}{index_s * 1e3:>10.1f}{median * 1e3:>10.2f}"
              f"{best * 1e3:>9.2f}")
    print(f"  (query ms: median and best over {repeats} rounds of the {len(load_variables())} variable queries, top-{config.top_k})")


async def run_cases(cases: list[Case], writer: LLMGateway, judge: LLMGateway, args: argparse.Namespace,
                    rag_config: RagConfig) -> tuple[list[TumorBoardDisplay], EvaluationReport]:
    displays: list[TumorBoardDisplay] = []
    toa_config = TOAConfig(max_tokens=args.max_tokens)
    display_config = DisplayConfig(max_tokens=args.max_tokens)
    print(f"{'subject':>8}{'as of':>12}{'tokens':>8}{'TOA s':>8}{'events':>8}{'VISTA s':>9}{'calls':>6}"
          f"{'RAG s':>8}{'calls':>6}{'failed V/R':>11}{'uncited V/R':>12}")
    for case in cases:
        began = time.perf_counter()
        timeline = await build_timeline(case.graph, writer, toa_config)
        toa_s = time.perf_counter() - began
        began = time.perf_counter()
        vista = await build_display(case.graph, timeline, writer, display_config)
        vista_s = time.perf_counter() - began
        began = time.perf_counter()
        rag = (await generate_rag_display(case.graph, writer, rag_config)).display
        rag_s = time.perf_counter() - began
        failed = [sum(v.origin == "failed" for v in d.values) for d in (vista, rag)]
        print(f"{case.truth.subject_id:>8}{case.as_of.isoformat():>12}{case.record_tokens:>8}{toa_s:>8.1f}"
              f"{len(timeline.events):>8}{vista_s:>9.1f}{vista.calls:>6}{rag_s:>8.1f}{rag.calls:>6}"
              f"{failed[0]:>6}/{failed[1]:<4}{vista.uncited_values:>7}/{rag.uncited_values}")
        displays.extend([vista, rag])
    truths = {c.truth.subject_id: TruthCase(c.truth, demographics=c.graph.info.demographics, as_of=c.as_of)
              for c in cases}
    began = time.perf_counter()
    report = await evaluate(displays, truths, judge, threshold=args.threshold, n_resamples=args.resamples,
                            seed=args.seed)
    print(f"judge: {report.judge_calls} calls in {time.perf_counter() - began:.1f} s")
    return displays, report


async def main_async(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    writer_cfg = writer_config(args)
    judge_cfg = judge_config(args, writer_cfg)
    rag_config = RagConfig(top_k=args.top_k, chunk_size=args.chunk_size, overlap=args.overlap, max_tokens=args.max_tokens)
    with tempfile.TemporaryDirectory(prefix="bench-vista-eval-") as tmp:
        root = Path(tmp) / "ds"
        began = time.perf_counter()
        generate(SynthConfig(n_subjects=args.subjects, seed=args.seed, workers=1, case_fraction=0.6,
                             cancer_weights={"lung": 1.0}), root, progress=False)
        cases = lung_cases(root, args.patients, None if args.full_record else args.days_before_diagnosis,
                           None if args.full_record else args.days_after_diagnosis)
    cut = ("not cut (full records)" if args.full_record else f"cut to {args.days_before_diagnosis} days before to "
           f"{args.days_after_diagnosis} days after the clinical diagnosis (the truth taken as of the last day)")
    print(f"cohort: {args.subjects} subjects (seed {args.seed}) generated and graphed in {time.perf_counter() - began:.1f} s; "
          f"{len(cases)} incident lung cases with the smallest records, {cut}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"retrieval (bm25s, chunk {rag_config.chunk_size} {rag_config.chunk_unit}, overlap {rag_config.overlap}, "
          f"top-k {rag_config.top_k}, stemmer {rag_config.stemmer}):")
    retrieval_speed(cases, rag_config)
    async with open_gateway(writer_cfg, job_id="bench-vista-eval") as writer:
        judge = writer if judge_cfg == writer_cfg else open_gateway(judge_cfg, job_id="bench-vista-eval-judge")
        try:
            print(f"display LLM: {writer_cfg.model} ({writer.backend.name}); judge LLM: {judge_cfg.model} "
                  f"({judge.backend.name})")
            displays, report = await run_cases(cases, writer, judge, args, rag_config)
            print("LLM calls by agent:")
            for ledger in [writer.ledger] + ([judge.ledger] if judge is not writer else []):
                for s in ledger.summarise("agent"):
                    print(f"  {s.group:>20}: {s.calls} calls ({s.failed_calls} failed, {s.cache_hits} cached), "
                          f"{s.prompt_tokens} prompt + {s.completion_tokens} completion tokens, "
                          f"{s.latency_s_total:.1f} s total, {s.latency_s_mean:.1f} s mean")
        finally:
            if judge is not writer:
                await judge.aclose()
    console = Console(width=max(160, Console().width))
    console.print(report.to_table())
    print(f"wall time {time.perf_counter() - started:.1f} s")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.md").write_text(report.to_markdown())
        (out / "evaluation.json").write_text(report.model_dump_json(indent=1))
        (out / "displays.jsonl").write_text("".join(d.model_dump_json() + "\n" for d in displays))
        print(f"wrote {out}/evaluation.md, evaluation.json, displays.jsonl")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=3, help="incident lung cases evaluated (default 3)")
    parser.add_argument("--subjects", type=int, default=40, help="subjects generated to find them (default 40)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the cohort and of the bootstrap")
    parser.add_argument("--days-before-diagnosis", type=int, default=90,
                        help="drop events more than this many days before the clinical diagnosis (default 90)")
    parser.add_argument("--days-after-diagnosis", type=int, default=45,
                        help="drop events more than this many days after the clinical diagnosis (default 45; the truth "
                        "is taken as of that day)")
    parser.add_argument("--full-record", action="store_true", help="keep whole records (slow on the embedded model)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for the display LLM (default: embedded model)")
    parser.add_argument("--model", help="model name at --base-url")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--judge-base-url", help="endpoint of the judge LLM (default: the display LLM)")
    parser.add_argument("--judge-model", help="judge model name (default: the display LLM)")
    LLMConfig.add_cli_argument(parser)
    parser.add_argument("--max-tokens", type=int, default=None, help="answer token cap of every call")
    parser.add_argument("--top-k", type=int, default=RagConfig().top_k, help="chunks retrieved per variable")
    parser.add_argument("--chunk-size", type=int, default=RagConfig().chunk_size, help="RAG chunk size in tokens")
    parser.add_argument("--overlap", type=int, default=RagConfig().overlap, help="RAG chunk overlap in tokens")
    parser.add_argument("--threshold", type=int, default=8, help="score (of 10) counted as correct")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of every CI")
    parser.add_argument("--out", help="directory for evaluation.md, evaluation.json and displays.jsonl")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
