"""Benchmark: render + time-aware chunking of one very long synthetic patient (~256k tokens).

Prints wall times, tokens/s, and the chunking done naively on the same XML (every event line encoded
on its own with tiktoken, counts accumulated) with the speed-up. Figures only, no assertions on time.

    python -m benchmarks.bench_chunking [--target-tokens 256000] [--max-tokens 16000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from trajonco.chunking import Chunk, chunk_timeline
from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
from vista.shared.timeline import Timeline, render_timeline
from vista.shared.timeline.model import BLOCK_CLOSE, block_open, group_close, group_open
from vista.shared.tokens import count_tokens, get_encoding

_CONDITIONS = [
    ("ICD10CM//I10", "Essential (primary) hypertension"),
    ("ICD10CM//E11.9", "Type 2 diabetes mellitus without complications"),
    ("ICD10CM//R05.9", "Cough, unspecified"),
    ("ICD10CM//J44.9", "Chronic obstructive pulmonary disease, unspecified"),
    ("ICD10CM//R63.4", "Abnormal weight loss"),
    ("ICD10CM//D64.9", "Anemia, unspecified"),
    ("ICD10CM//R91.8", "Other nonspecific abnormal finding of lung field"),
    ("ICD10CM//Z87.891", "Personal history of nicotine dependence"),
]
_LABS = [
    ("LOINC//718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", 9.0, 16.0),
    ("LOINC//4544-3", "Hematocrit [Volume Fraction] of Blood", "%", 30.0, 50.0),
    ("LOINC//6690-2", "Leukocytes [#/volume] in Blood", "10*3/uL", 3.0, 14.0),
    ("LOINC//777-3", "Platelets [#/volume] in Blood", "10*3/uL", 120.0, 450.0),
    ("LOINC//2160-0", "Creatinine [Mass/volume] in Serum or Plasma", "mg/dL", 0.5, 2.0),
    ("LOINC//1742-6", "Alanine aminotransferase [Enzymatic activity/volume] in Serum or Plasma", "U/L", 5.0, 80.0),
    ("LOINC//2345-7", "Glucose [Mass/volume] in Serum or Plasma", "mg/dL", 70.0, 250.0),
    ("LOINC//8480-6", "Systolic blood pressure", "mm[Hg]", 100.0, 170.0),
    ("LOINC//29463-7", "Body weight", "kg", 50.0, 110.0),
]
_MEDS = [
    ("RXNORM//197361", "amlodipine 5 MG Oral Tablet"),
    ("RXNORM//860975", "metformin hydrochloride 500 MG Oral Tablet"),
    ("RXNORM//314076", "lisinopril 10 MG Oral Tablet"),
    ("RXNORM//745752", "albuterol 0.09 MG/ACTUAT Inhalant Solution"),
]
_PROCEDURES = [
    ("CPT//71046", "Radiologic examination, chest; 2 views"),
    ("CPT//71250", "CT thorax without contrast"),
    ("HCPCS//G0297", "Low dose CT scan for lung cancer screening"),
]
_NOTES = [("NOTE//PROGRESS", "Progress note"), ("NOTE//RADIOLOGY", "Radiology report")]
_WORDS = (
    "patient reports persistent cough with intermittent shortness of breath denies fever chills night sweats "
    "history of smoking one pack per day for thirty years quit five years ago exam lungs clear bilaterally "
    "no wheezing heart regular rate and rhythm abdomen soft non tender plan continue current medications "
    "follow up in three months consider imaging if symptoms persist labs reviewed hemoglobin slightly low"
).split()


def _note_text(rng: random.Random, n_words: int) -> str:
    lines = []
    while n_words > 0:
        k = min(n_words, rng.randint(8, 20))
        lines.append(" ".join(rng.choice(_WORDS) for _ in range(k)).capitalize() + ".")
        n_words -= k
    return "\n".join(lines)


def synthetic_patient(target_tokens: int, seed: int = 0) -> tuple[PatientRecord, CodeCatalog, datetime]:
    """A long synthetic record (visits, conditions, labs, medications, procedures, long notes) of roughly ``target_tokens``."""
    rng = random.Random(seed)
    catalog = CodeCatalog(
        [CodeInfo(c, d) for c, d in _CONDITIONS + _MEDS + _PROCEDURES + _NOTES]
        + [CodeInfo(c, d, unit=u) for c, d, u, _, _ in _LABS]
        + [CodeInfo("ENCOUNTER//AMB", "Outpatient visit"), CodeInfo("ENCOUNTER//ED", "Emergency department visit")]
    )
    rows: list[tuple[datetime | None, str, float | None, str | None]] = [
        (None, "GENDER//M", None, None),
        (None, "RACE//White", None, None),
        (None, "ETHNICITY//Not Hispanic or Latino", None, None),
        (datetime(1955, 4, 2), "MEDS_BIRTH", None, None),
    ]
    when = datetime(2008, 1, 7, 9, 0)
    approx_tokens, visit = 0, 0
    while approx_tokens < target_tokens:
        visit += 1
        rows.append((when, rng.choice(["ENCOUNTER//AMB", "ENCOUNTER//AMB", "ENCOUNTER//ED"]), None, None))
        for code, _ in rng.sample(_CONDITIONS, rng.randint(1, 3)):
            rows.append((when, code, None, None))
        lab_time = when + timedelta(minutes=30)
        for code, _, _, lo, hi in rng.sample(_LABS, rng.randint(3, 8)):
            rows.append((lab_time, code, round(rng.uniform(lo, hi), 1), None))
        for code, _ in rng.sample(_MEDS, rng.randint(0, 2)):
            rows.append((when, code, None, None))
        if rng.random() < 0.2:
            rows.append((when + timedelta(hours=1), rng.choice(_PROCEDURES)[0], None, None))
        approx_tokens += 420
        if visit % 8 == 0:
            n_words = rng.randint(150, 900)
            rows.append((when + timedelta(hours=2), rng.choice(_NOTES)[0], None, _note_text(rng, n_words)))
            approx_tokens += int(n_words * 1.3)
        if visit == 40:  # one note longer than a whole chunk: exercises the last-resort text split
            rows.append((when + timedelta(hours=3), "NOTE//PATHOLOGY", None, _note_text(rng, 24_000)))
            approx_tokens += 31_000
        when += timedelta(days=rng.randint(1, 6), hours=rng.randint(0, 8))
    events = [Event(f"e{k}", t, code, v, text) for k, (t, code, v, text) in enumerate(rows)]
    return PatientRecord(subject_id=1, shard="data/bench/0.parquet", first_row=0, events=events), catalog, when + timedelta(days=1)


def naive_chunks(timeline: Timeline, max_tokens: int) -> list[str]:
    """The common way, on the same XML: one tiktoken call per event line and per tag, counts summed, greedy at timestamps."""
    enc = get_encoding()
    frame = len(enc.encode_ordinary(timeline.header)) + len(enc.encode_ordinary(timeline.footer))
    chunks: list[list[str]] = []
    current: list[str] = []
    used = frame
    for block in timeline.blocks:
        n = len(enc.encode_ordinary(block_open(block.time))) + len(enc.encode_ordinary(BLOCK_CLOSE))
        previous = None
        for element in block.elements:
            if element.modality is not previous:
                n += len(enc.encode_ordinary(group_open(element.modality))) + len(enc.encode_ordinary(group_close(element.modality)))
                previous = element.modality
            n += len(enc.encode_ordinary(element.xml))
        if used + n > max_tokens and current:
            chunks.append(current)
            current, used = [], frame
        current.append(block.text)
        used += n
    chunks.append(current)
    return [timeline.header + "".join(c) + timeline.footer for c in chunks]


def _best_of(repeats: int, fn: Callable[[], object]) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-tokens", type=int, default=256_000)
    parser.add_argument("--max-tokens", type=int, default=16_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    get_encoding()
    load_s = time.perf_counter() - t0
    record, catalog, prediction_time = synthetic_patient(args.target_tokens)

    render_best, render_median, timeline = _best_of(args.repeats, lambda: render_timeline(record, catalog, prediction_time))

    def ours(verify: bool) -> Callable[[], list[Chunk]]:  # a fresh Timeline each time: no cached block counts
        return lambda: chunk_timeline(Timeline(timeline.root, timeline.blocks), args.max_tokens, verify=verify)

    chunk_best, chunk_median, chunks = _best_of(args.repeats, ours(True))
    fast_best, fast_median, _ = _best_of(args.repeats, ours(False))
    naive_best, naive_median, naive = _best_of(args.repeats, lambda: naive_chunks(timeline, args.max_tokens))

    xml = timeline.to_xml()
    total = count_tokens(xml)
    n_events = len(timeline.event_ids())
    ms = 1000
    print(f"encoding load (first use, offline): {load_s * ms:.0f} ms; {os.cpu_count()} CPUs; best/median of {args.repeats}")
    print(
        f"patient: {len(record.events)} rows, {n_events} timeline events, {len(timeline.blocks)} timestamps, "
        f"{len(xml):,} chars, {total:,} tokens (cl100k_base)"
    )
    sizes = [c.n_tokens for c in chunks]
    print(f"chunks (l={args.max_tokens}): {len(chunks)}; tokens per chunk min/max = {min(sizes)}/{max(sizes)}")
    print(f"render:                              best {render_best * ms:7.1f} ms, median {render_median * ms:7.1f} ms")
    print(f"chunk, verified (default):           best {chunk_best * ms:7.1f} ms, median {chunk_median * ms:7.1f} ms")
    print(f"chunk, additive counts (verify=False): best {fast_best * ms:5.1f} ms, median {fast_median * ms:7.1f} ms")
    both = render_best + chunk_best
    print(f"render + chunk (verified):           best {both * ms:7.1f} ms  -> {total / both / 1e6:.2f} M tokens/s")
    print(
        f"naive chunk (one encode per event):  best {naive_best * ms:7.1f} ms, median {naive_median * ms:7.1f} ms "
        f"({len(naive)} chunks, no split of oversized timestamps)"
    )
    print(f"speed-up vs naive: verified {naive_best / chunk_best:.2f}x, additive {naive_best / fast_best:.2f}x")


if __name__ == "__main__":
    main()
