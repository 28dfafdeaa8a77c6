"""Benchmark: the query bridge against reading text, on questions whose answers the generator knows.

A synthetic cohort is generated (seeded) and its MEDS Graphs built into a store. Questions come from the
generator's ground truth (`vista.shared.synth` ``ground_truth/oncology.jsonl``):

- **lab**: the lowest or highest hemoglobin, white cell or platelet count within a treatment line's dates;
- **line start**: when a treatment line started (the first row of the line's drugs or procedures in its dates);
- **progression**: when progression on a line was first documented (the first note reporting progressive or
  recurrent disease from the line's start);
- **imaging**: how many imaging studies (CPT imaging codes) in the first 180 days after diagnosis.

Each question's truth is computed from the MEDS rows themselves (polars over the parquet shards, not the graph),
and the agreement of the line-start and progression truths with the generator's own dates is printed. Each
question is answered four ways: **gold plans** written from the truth (run by `vista.query.execute`, no model);
**the bridge** (`vista.query.bridge`: one model call makes the plan); **`vista ask`** (one call reads the
patient's TOA timeline; the timelines are built first, for ``--ask-patients`` patients, with the same model); and
**BM25 RAG** (`vista.rag`: the record's chunks retrieved for the question, one call answers). Printed per method:
accuracy with a patient-bootstrap 95% CI, median latency, model calls and tokens per answer. Then the plan
latency: the median `run_plan` over the gold plans on the largest patient of the store and on a 10,000-node patient
(the largest record repeated over later years), with its one-off index build, beside the same lab minimum computed
with polars over the patient's node table (the honest no-index alternative). CPU seconds come from getrusage; the
machine is shared, so wall times are noisy.

    python -m benchmarks.bench_query_bridge [--subjects 120] [--seed 7] [--model-questions 24] [--ask-patients 2]
    python -m benchmarks.bench_query_bridge --llm base_url=http://HOST:8000/v1 --llm model=NAME   # a real endpoint

The embedded model (SmolLM2-135M) is the default: its figures are reported as they are.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import re
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from vista.shared.bootstrap import patient_interval
from vista.graph import GraphStore
from vista.graph.build import build_graph
from vista.query.bridge import answer_question
from vista.query.entry import PatientEntry, open_entry
from vista.query.execute import run_plan
from vista.query.plan import Plan
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import PatientRecord
from vista.shared.synth import SynthConfig, generate
from vista.shared.synth.catalog import PROCEDURES
from vista.shared.synth.ground_truth import OncologyRecord
from vista.shared.synth.trajectories import IMAGING

LABS = (("hemoglobin", "LOINC//718-7"), ("white blood cell count", "LOINC//6690-2"), ("platelet count", "LOINC//777-3"))
IMAGING_CODES = tuple(sorted(PROCEDURES[k].code for k in IMAGING))
PROGRESSION = "Progressive disease|consistent with recurrent disease"
IMAGING_DAYS = 180
KINDS = ("lab", "line_start", "progression", "imaging")


@dataclass(frozen=True)
class Question:
    """One generated question, its gold plan and its truth from the MEDS rows (``agrees``: with the generator)."""

    kind: str
    subject_id: int
    text: str
    gold: Plan
    value: float | None
    date: dt.date | None
    agrees: bool = True

    @property
    def answer_type(self) -> str:
        return "date" if self.kind in ("line_start", "progression") else ("count" if self.kind == "imaging" else "number")


# ---------------------------------------------------------------------------------------------------- questions
def meds_rows(dataset: Path) -> pl.DataFrame:
    files = sorted((dataset / "data").rglob("*.parquet"))
    frame = pl.concat([pl.read_parquet(f, columns=["subject_id", "time", "code", "numeric_value", "text_value"])
                       for f in files])
    return frame.with_columns(pl.col("time").dt.date().alias("day"))


def _drug_codes(dataset: Path) -> dict[str, str]:
    codes = pl.read_parquet(dataset / "metadata" / "codes.parquet", columns=["code", "description"])
    return {d.lower(): c for c, d in codes.filter(pl.col("code").str.starts_with("RXNORM//")).iter_rows() if d}


def _within(rows: pl.DataFrame, start: dt.date, end: dt.date | None) -> pl.DataFrame:
    keep = pl.col("day") >= start
    return rows.filter(keep if end is None else keep & (pl.col("day") <= end))


def _window(start: dt.date, end: dt.date | None) -> dict:
    return {"start": start.isoformat(), **({"end": end.isoformat()} if end else {})}


def generate_questions(dataset: Path) -> list[Question]:
    """Every question the ground truth supports whose truth the MEDS rows hold (see the module docstring)."""
    rows = meds_rows(dataset)
    by_subject = {sid: frame.sort("time", maintain_order=True) for (sid,), frame in rows.group_by("subject_id")}
    drugs = _drug_codes(dataset)
    questions: list[Question] = []
    for line_text in (dataset / "ground_truth" / "oncology.jsonl").read_text().splitlines():
        rec = OncologyRecord.model_validate_json(line_text)
        patient = by_subject.get(rec.subject_id)
        if patient is None:
            continue
        lines = {t.line: t for t in rec.treatment_lines}
        for t in rec.treatment_lines:
            questions += _lab_question(rec.subject_id, patient, t)
            codes = sorted({drugs[d] for c in t.components for d in c.drugs if d in drugs}
                           | {c.procedure_code for c in t.components if c.procedure_code})
            found = _within(patient.filter(pl.col("code").is_in(codes)), t.start_date, t.end_date)
            if codes and found.height:
                day = found["day"][0]
                questions.append(Question("line_start", rec.subject_id,
                                          f"When did treatment line {t.line} ({t.regimen}) start?",
                                          Plan(events=codes, window=_window(t.start_date, t.end_date), aggregate="first"),
                                          None, day, agrees=day == t.start_date))
        for p in rec.progressions:
            line = lines.get(p.line)
            if line is None:
                continue
            notes = patient.filter(pl.col("code").str.starts_with("NOTE//")
                                   & pl.col("text_value").str.contains(f"(?i){PROGRESSION}"))
            found = _within(notes, line.start_date, None)
            if found.height:
                day = found["day"][0]
                questions.append(Question("progression", rec.subject_id,
                                          f"When was progression on line {p.line} ({line.regimen}) first documented?",
                                          Plan(notes=PROGRESSION, window=_window(line.start_date, None), aggregate="first"),
                                          None, day, agrees=day == p.date))
        if rec.diagnosis_date is not None:
            start = rec.diagnosis_date
            end = start + dt.timedelta(days=IMAGING_DAYS)
            count = _within(patient.filter(pl.col("code").is_in(IMAGING_CODES)), start, end).height
            questions.append(Question("imaging", rec.subject_id,
                                      f"How many imaging studies (CT, MRI, PET, ultrasound, X-ray, mammography, bone "
                                      f"scan) did the patient have between {start} and {end}?",
                                      Plan(events=list(IMAGING_CODES), window=_window(start, end), aggregate="count"),
                                      float(count), None))
    return questions


def _lab_question(sid: int, patient: pl.DataFrame, t) -> list[Question]:
    name, code = LABS[(sid + t.line) % len(LABS)]
    lowest = (sid + t.line) % 2 == 0
    labs = _within(patient.filter((pl.col("code") == code) & pl.col("numeric_value").is_not_null()),
                   t.start_date, t.end_date)
    if not labs.height:
        return []
    values = labs["numeric_value"].cast(pl.Float64).to_numpy()
    k = int(np.argmin(values) if lowest else np.argmax(values))
    end = t.end_date or labs["day"][-1]
    text = (f"What was the {'lowest' if lowest else 'highest'} {name} during treatment line {t.line} ({t.regimen}, "
            f"{t.start_date} to {end})?")
    return [Question("lab", sid, text, Plan(measure=code, window=_window(t.start_date, t.end_date),
                                            aggregate="min" if lowest else "max"), float(values[k]), labs["day"][k])]


# ---------------------------------------------------------------------------------------------------- scoring
def correct_value(q: Question, value, date: dt.date | None) -> bool:
    """A typed answer (value, date) against the truth."""
    if q.answer_type == "date":
        return date == q.date
    if not isinstance(value, (int, float)) or value is None:
        return False
    if q.answer_type == "count":
        return int(value) == int(q.value)  # type: ignore[arg-type]
    return abs(float(value) - float(q.value)) <= 1e-3 * max(1.0, abs(float(q.value)))  # type: ignore[arg-type]


_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?")


def correct_text(q: Question, text: str) -> bool:
    """A free-text answer: the truth's date, or a number equal to the truth (as written, to 0.05), appears in it."""
    if q.answer_type == "date":
        return q.date is not None and q.date.isoformat() in _DATE.findall(text)
    numbers = [float(x) for x in _NUMBER.findall(_DATE.sub(" ", text))]
    tolerance = 0.0 if q.answer_type == "count" else 0.051
    return any(abs(n - float(q.value)) <= tolerance for n in numbers)  # type: ignore[arg-type]


@dataclass
class Outcome:
    method: str
    question: Question
    correct: bool
    seconds: float
    calls: int = 0
    tokens: int = 0
    note: str = ""


# ---------------------------------------------------------------------------------------------------- methods
def gold_outcomes(store: Path, questions: list[Question]) -> list[Outcome]:
    entries: dict[int, PatientEntry] = {}
    out = []
    for q in questions:
        entry = entries.setdefault(q.subject_id, open_entry(store, q.subject_id))
        started = time.perf_counter()
        result = run_plan(entry, q.gold)
        seconds = time.perf_counter() - started
        ok = correct_value(q, result.value, result.date) and (q.kind != "lab" or result.date == q.date)
        out.append(Outcome("gold plans", q, ok, seconds))
    return out


async def model_outcomes(store: Path, questions: list[Question], llm_items: list[str], ask_patients: set[int],
                         rag_tokens: int | None = None) -> list[Outcome]:
    """The bridge, `vista ask` (patients with a timeline) and BM25 RAG, each through one gateway."""
    from vista.query import QueryConfig, ask
    from vista.query.state import load_graph, load_timeline, open_graph_store
    from vista.shared.llm import LLMConfig, open_gateway
    from vista.toa import TimelineStore

    out: list[Outcome] = []
    async with open_gateway(LLMConfig.from_cli(llm_items)) as gateway:
        await gateway.discover_context_tokens()
        timelines = {}
        for sid in sorted(ask_patients):
            graph = load_graph(open_graph_store(store), sid)
            started = time.perf_counter()
            if TimelineStore(store).path_of(sid).is_file():  # as `vista ask` reads it (even an incomplete one)
                timeline, built = load_timeline(store, sid, graph), False
            else:
                timeline, built = await TimelineStore(store).build(graph, gateway)
            print(f"  timeline of subject {sid}: {len(timeline.events)} events, "
                  f"{'built' if built else 'read back'} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            timelines[sid] = timeline
        entries: dict[int, PatientEntry] = {}
        for n, q in enumerate(questions, 1):
            entry = entries.setdefault(q.subject_id, open_entry(store, q.subject_id))
            started = time.perf_counter()
            answer = await answer_question(entry, q.subject_id, q.text, gateway)
            seconds = time.perf_counter() - started
            ok = (correct_value(q, answer.value, answer.date) if answer.route == "plan"
                  else correct_text(q, answer.answer))
            out.append(Outcome("bridge", q, ok, seconds, answer.usage.calls,
                               answer.usage.prompt_tokens + answer.usage.completion_tokens,
                               answer.plan.compact() if answer.plan else f"route {answer.route}: {answer.error}"))
            out.append(await _rag(entry, q, gateway, rag_tokens))
            if q.subject_id in timelines:
                started = time.perf_counter()
                reply = await ask(q.text, timelines[q.subject_id], entry.graph, gateway, QueryConfig())
                out.append(Outcome("vista ask", q, correct_text(q, reply.answer), time.perf_counter() - started,
                                   reply.usage.calls, reply.usage.prompt_tokens + reply.usage.completion_tokens,
                                   reply.answer[:120]))
            mine = [o for o in out if o.question is q]
            print(f"  {n}/{len(questions)} {q.kind} (subject {q.subject_id}): "
                  + "; ".join(f"{o.method} {'ok' if o.correct else 'wrong'} {o.seconds:.0f} s ({o.note[:90]})" for o in mine),
                  file=sys.stderr, flush=True)
    return out


async def _rag(entry: PatientEntry, q: Question, gateway, max_context_tokens: int | None) -> Outcome:
    """BM25 over the record's chunks (`vista.rag`), the best that fit the context, one call for a short answer."""
    from pydantic import BaseModel, ConfigDict, Field

    from vista.rag import RagConfig, build_index, context_room, select_passages
    from vista.rag.generate import excerpts_text
    from vista.shared.llm import system, user
    from vista.shared.tokens import count_tokens

    class RagAnswer(BaseModel):
        model_config = ConfigDict(extra="forbid")
        answer: str = Field(max_length=200)

    started = time.perf_counter()
    config = RagConfig(max_context_tokens=max_context_tokens)
    index = _RAG_INDEX.get(entry.subject_id) or _RAG_INDEX.setdefault(entry.subject_id, build_index(entry.graph, config))
    hits = index.search(q.text, 16)
    chunks, _ = select_passages([hits], [count_tokens(c.text) for c in index.chunks], context_room(config, gateway))
    messages = [system("Answer the question about this patient from the record excerpts, in one short sentence "
                       "giving the value, count or date (YYYY-MM-DD)."),
                user(f"Record excerpts:\n{excerpts_text(chunks)}\n\nQuestion: {q.text}")]
    result = await gateway.complete(messages, RagAnswer, agent="rag_question", patient_id=entry.subject_id, max_tokens=160)
    text = result.output.answer if result.ok else ""
    usage = result.usage
    return Outcome("BM25 RAG", q, correct_text(q, text), time.perf_counter() - started, 1,
                   usage.prompt_tokens + usage.completion_tokens, text[:120])


_RAG_INDEX: dict = {}


# ---------------------------------------------------------------------------------------------------- plan latency
def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def plan_latency(entry: PatientEntry, repeats: int) -> dict[str, float]:
    """The index build (once per entry) and the median of ``repeats`` runs of each of the patient's plans."""
    entry = PatientEntry(entry.graph, entry.timeline)  # a fresh entry: its index not built yet
    started = time.perf_counter()
    entry.build_index()
    build = time.perf_counter() - started
    plans = latency_plans(entry)
    times, cpu0 = [], _cpu()
    for _ in range(repeats):
        for plan in plans:
            t0 = time.perf_counter()
            run_plan(entry, plan)
            times.append(time.perf_counter() - t0)
    return {"index_ms": build * 1e3, "median_ms": statistics.median(times) * 1e3,
            "p90_ms": float(np.percentile(times, 90)) * 1e3, "cpu_ms_per_plan": (_cpu() - cpu0) / len(times) * 1e3,
            "plans": len(plans), "runs": len(times)}


def polars_min_latency(entry: PatientEntry, code: str, start: dt.datetime, end: dt.datetime, repeats: int) -> float:
    """The same lab minimum with polars over the patient's node table each time (no index): median ms."""
    nodes = pl.from_arrow(entry.graph.nodes.select(["id", "time", "code", "value"]))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        hit = nodes.filter((pl.col("code") == code) & (pl.col("time") >= start) & (pl.col("time") < end)
                           & pl.col("value").is_not_null()).sort("time").select(pl.col("id").get(pl.col("value").arg_min()))
        hit.item()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def enlarged_patient(dataset: Path, store: Path, at_least: int = 10_000) -> PatientEntry:
    """The store's largest record repeated over later years (event ids renumbered) until its graph has
    ``at_least`` nodes: a heavy patient with the generator's own mix of rows."""
    ds = MedsDataset(dataset)
    largest = int(GraphStore(store).manifest().sort("nodes", descending=True)["subject_id"][0])
    record = next(ds.iter_patients([largest]))
    dated = [e for e in record.events if e.time is not None]
    static = [e for e in record.events if e.time is None]
    span = (dated[-1].time - dated[0].time) + dt.timedelta(days=1)
    copies = 1
    while True:
        events = list(static)
        for c in range(copies):
            events += [dataclasses.replace(e, time=e.time + c * span) for e in dated if e.code != "MEDS_BIRTH" or c == 0]
        events = [dataclasses.replace(e, event_id=f"e{k}") for k, e in enumerate(events)]
        graph = build_graph(PatientRecord(record.subject_id, record.shard, record.first_row, events), ds.code_catalog())
        if graph.n_nodes >= at_least:
            return PatientEntry(graph)
        copies += 1


def latency_plans(entry: PatientEntry) -> list[Plan]:
    """One plan of each kind the benchmark asks, over this patient's own codes and its middle year."""
    rows = entry.all_rows()
    mid = rows.times[len(rows) // 2].astype("datetime64[D]").item()
    window = {"start": (mid - dt.timedelta(days=365)).isoformat(), "end": (mid + dt.timedelta(days=365)).isoformat()}
    vocab = entry.vocabulary
    drug = max((t for t in vocab.terms.values() if t.code.startswith("RXNORM//")), key=lambda t: t.rows, default=None)
    plans = [Plan(measure="hemoglobin", window=window, aggregate="min"), Plan(measure="platelets", window=window, aggregate="max"),
             Plan(events=[c for c in IMAGING_CODES if c in vocab] or ["CPT//7*"], window=window, aggregate="count"),
             Plan(notes=PROGRESSION, window=window, aggregate="first"), Plan(measure="hgb", aggregate="trend")]
    if drug is not None:
        plans.append(Plan(events=[drug.code], aggregate="first"))
        plans.append(Plan(measure="wbc", during=drug.name, aggregate="min"))
    return [p for p in plans if _runs(entry, p)]


def _runs(entry: PatientEntry, plan: Plan) -> bool:
    try:
        run_plan(entry, plan)
        return True
    except Exception:  # noqa: BLE001 - a plan naming a lab this patient lacks is left out of the timing
        return False


# ---------------------------------------------------------------------------------------------------- report
def table(outcomes: list[Outcome]) -> list[str]:
    by_method: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_method[o.method].append(o)
    lines = [f"{'method':<12} {'n':>4} {'correct':>8} {'accuracy [95% CI]':>22} {'median s':>9} {'calls/ans':>9} {'tokens/ans':>10}"]
    for method in ("gold plans", "bridge", "vista ask", "BM25 RAG"):
        got = by_method.get(method)
        if not got:
            continue
        per_patient: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for o in got:
            per_patient[o.question.subject_id][0] += o.correct
            per_patient[o.question.subject_id][1] += 1
        num, den = zip(*per_patient.values())
        ci = patient_interval(num, den, n_resamples=1000, seed=0)
        bounds = f"[{ci.lower:.2f}, {ci.upper:.2f}]" if ci.lower is not None else "[n/a]"
        lines.append(f"{method:<12} {len(got):>4} {sum(o.correct for o in got):>8} {ci.value:>10.2f} {bounds:>11} "
                     f"{statistics.median(o.seconds for o in got):>9.4f} {statistics.mean(o.calls for o in got):>9.2f} "
                     f"{statistics.mean(o.tokens for o in got):>10.0f}")
    return lines


def by_kind(outcomes: list[Outcome]) -> list[str]:
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        counts[(o.method, o.question.kind)][0] += o.correct
        counts[(o.method, o.question.kind)][1] += 1
    return [f"  {m:<12} {k:<12} {c}/{n}" for (m, k), (c, n) in sorted(counts.items())]


def pick_model_questions(questions: list[Question], n: int, ask_patients: set[int]) -> list[Question]:
    """``n`` questions, round-robin over the kinds, the ``vista ask`` patients' first (so all methods meet them)."""
    ordered = sorted(questions, key=lambda q: (q.subject_id not in ask_patients, q.subject_id, q.kind, q.text))
    pools = {k: [q for q in ordered if q.kind == k] for k in KINDS}
    picked: list[Question] = []
    while len(picked) < n and any(pools.values()):
        for kind in KINDS:
            if pools[kind] and len(picked) < n:
                picked.append(pools[kind].pop(0))
    return picked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_query_bridge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subjects", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model-questions", type=int, default=24, help="questions asked of the model-backed methods")
    parser.add_argument("--ask-patients", type=int, default=1, help="patients whose timelines are built for vista ask "
                        "(besides those the store already holds; the embedded model takes minutes per patient)")
    parser.add_argument("--rag-tokens", type=int, help="tokens of retrieved record text per RAG call (default: what "
                        "the model's context leaves)")
    parser.add_argument("--repeats", type=int, default=200, help="runs of each plan for the latency medians")
    parser.add_argument("--work", type=Path, help="keep the dataset and store here (reused when rerun)")
    parser.add_argument("--llm", action="append", default=[], metavar="KEY=VALUE", help="model settings (default: embedded)")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-query-bridge-"))
    dataset, store = work / "synth", work / "store"
    if not (dataset / "ground_truth").is_dir():
        generate(SynthConfig(n_subjects=args.subjects, seed=args.seed, workers=1), dataset, progress=False)
    if not store.is_dir():
        GraphStore(store).build_dataset(MedsDataset(dataset))
    questions = generate_questions(dataset)
    kinds = defaultdict(int)
    for q in questions:
        kinds[q.kind] += 1
    agree = [q for q in questions if q.kind in ("line_start", "progression")]
    print(f"{args.subjects} subjects (seed {args.seed}): {len(questions)} questions from the ground truth "
          f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); the MEDS-row truth equals the generator's date "
          f"for {sum(q.agrees for q in agree)} of {len(agree)} line-start and progression questions")

    gold = gold_outcomes(store, questions)
    print("\n".join(table(gold)))
    wrong = [o for o in gold if not o.correct]
    for o in wrong[:5]:
        print(f"  gold wrong: subject {o.question.subject_id}: {o.question.text}")

    outcomes = list(gold)
    if args.model_questions > 0:
        patients = sorted({q.subject_id for q in questions})
        with_lines = sorted({q.subject_id for q in questions if q.kind == "lab"})
        stored = {int(p.stem) for p in (store / "toa").glob("*.json")} if (store / "toa").is_dir() else set()
        ask_patients = stored | set((with_lines or patients)[: args.ask_patients])
        picked = pick_model_questions(questions, args.model_questions, ask_patients)
        model = asyncio.run(model_outcomes(store, picked, args.llm, ask_patients, args.rag_tokens))
        asked = {id(q) for q in picked}  # (a Question holds a Plan with lists: not hashable)
        same = [o for o in gold if id(o.question) in asked]
        print(f"\n{len(picked)} questions asked of the model-backed methods (`vista ask`: the {len(ask_patients)} "
              f"patient(s) with a timeline); gold plans on the same questions first:")
        print("\n".join(table(same + model)))
        print("\n".join(by_kind(same + model)))
        outcomes += model

    largest_id = int(GraphStore(store).manifest().sort("nodes", descending=True)["subject_id"][0])
    for label, entry in (("largest stored patient", open_entry(store, largest_id)),
                         ("10,000-node patient", enlarged_patient(dataset, store))):
        figures = plan_latency(entry, args.repeats)
        rows = entry.rows_of("LOINC//718-7")
        start = rows.times[0].astype("datetime64[us]").item() if len(rows) else dt.datetime(2000, 1, 1)
        alt = polars_min_latency(entry, "LOINC//718-7", start, start + dt.timedelta(days=3650), args.repeats)
        print(f"\nplan latency, {label} (subject {entry.subject_id}, {entry.graph.n_nodes:,} nodes): median "
              f"{figures['median_ms']:.3f} ms (p90 {figures['p90_ms']:.3f} ms, {figures['cpu_ms_per_plan']:.3f} CPU-ms) "
              f"per plan over {figures['plans']} plans x {args.repeats}; index built once in {figures['index_ms']:.1f} ms; "
              f"the lab minimum with polars over the node table instead: {alt:.3f} ms")
    if args.work is None:
        print(f"(work files in {work})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
