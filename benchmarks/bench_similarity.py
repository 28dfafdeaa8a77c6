"""Benchmark: how well `vista similar` finds clinically alike patients, on generated patients with known truth.

A synthetic cohort is generated (seeded; most subjects are cancer cases so every cancer has peers), its MEDS Graphs
are built into a `vista.graph.GraphStore`, and every cancer patient is asked for its ``k`` nearest patients with each
method of `vista.patient_search.similarity` and with the plain code-overlap (Jaccard) baseline. Printed, per method:
precision@k for the same cancer, the same cancer and stage group, and the same cancer and first-line regimen (the
share of the ``k`` neighbours that match, averaged over the query patients), the ceiling (the share reachable when
fewer than ``k`` peers exist), and the time to rank the cohort. Figures only, nothing asserted.

    python -m benchmarks.bench_similarity [--subjects 400] [--seed 5] [--k 10] [--store DIR]

``--store`` keeps the store in a directory of yours (reused when rerun; otherwise everything lives in a temporary
directory removed at the end); the ground truth is read from the generated dataset's ``ground_truth/oncology.jsonl``.

Measured (400 subjects, seed 5, 319 cancer patients as queries, k = 10): same cancer 0.69 (Jaccard) → 0.85 (idf),
0.84 (timeline), 0.85 (values); same cancer+stage 0.20 → 0.24, 0.24, 0.30; same cancer+first-line regimen
0.25 → 0.31, 0.33, 0.35 (ceilings 0.98, 0.53, 0.49). Counting repeats (1 + log count) and adding catalog
ancestors were both measured worse than presence × IDF on this generator.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from vista.patient_search.similarity import Method, similarity_matrix
from vista.patient_search.source import open_source
from vista.graph import GraphStore
from vista.shared.meds.reader import MedsDataset
from vista.shared.synth import SynthConfig, generate
from vista.shared.synth.ground_truth import OncologyRecord

LABELS = ("cancer", "cancer+stage", "cancer+line1")


def truth_labels(dataset: Path) -> dict[int, dict[str, str]]:
    """Per cancer patient: its cancer, cancer+stage group and cancer+first-line regimen labels."""
    out = {}
    for line in (dataset / "ground_truth" / "oncology.jsonl").read_text().splitlines():
        rec = OncologyRecord.model_validate_json(line)
        first = next((t.regimen for t in rec.treatment_lines if t.line == 1), "none")
        out[rec.subject_id] = {"cancer": rec.cancer, "cancer+stage": f"{rec.cancer}|{rec.stage.group}",
                               "cancer+line1": f"{rec.cancer}|{first}"}
    return out


def precision_at_k(subject_ids: np.ndarray, scores: np.ndarray, labels: dict[int, dict[str, str]], k: int,
                   ) -> tuple[dict[str, float], int]:
    """Mean share of each cancer patient's top ``k`` others with the same label (patients without one never match)."""
    totals = dict.fromkeys(LABELS, 0.0)
    queries = 0
    for i, sid in enumerate(subject_ids.tolist()):
        if sid not in labels:
            continue
        row = scores[i].copy()
        row[i] = -np.inf
        top = np.lexsort((subject_ids, -row))[:k]
        for name in LABELS:
            mine = labels[sid][name]
            totals[name] += sum(labels.get(int(subject_ids[j]), {}).get(name) == mine for j in top) / k
        queries += 1
    return {name: totals[name] / max(queries, 1) for name in LABELS}, queries


def ceiling(subject_ids: np.ndarray, labels: dict[int, dict[str, str]], k: int) -> dict[str, float]:
    """The best precision@k reachable: a class with fewer than ``k`` other members caps it."""
    present = [labels[s] for s in subject_ids.tolist() if s in labels]
    out = {}
    for name in LABELS:
        sizes: dict[str, int] = {}
        for lab in present:
            sizes[lab[name]] = sizes.get(lab[name], 0) + 1
        out[name] = sum(min(k, sizes[lab[name]] - 1) / k for lab in present) / max(len(present), 1)
    return out


def run(subjects: int, seed: int, k: int, store_dir: Path | None, methods: list[Method]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-similarity-") as work:
        _run(Path(work), subjects, seed, k, store_dir, methods)


def _run(work: Path, subjects: int, seed: int, k: int, store_dir: Path | None, methods: list[Method]) -> None:
    dataset = work / "ds"
    started = time.perf_counter()
    generate(SynthConfig(n_subjects=subjects, seed=seed, workers=1, case_fraction=0.8), dataset, progress=False)
    store_root = store_dir or work / "store"
    report = GraphStore(store_root).build_dataset(MedsDataset(dataset, now=datetime(2030, 1, 1)))
    print(f"cohort: {subjects} subjects (seed {seed}), generated and stored in {time.perf_counter() - started:.1f} s "
          f"({report.built} built, {report.skipped} unchanged) at {store_root}")
    labels = truth_labels(dataset)
    source = open_source(store_root)
    stored = np.array(source.subject_ids(), np.int64)
    cap = ceiling(stored, labels, k)
    print(f"{sum(int(s) in labels for s in stored)} cancer patients are queries; k = {k}\n")
    header = f"{'method':<22}" + "".join(f"{'P@' + str(k) + ' ' + name:>20}" for name in LABELS) + f"{'seconds':>10}"
    print(header)
    print("-" * len(header))
    for method in methods:
        t0 = time.perf_counter()
        matrix = similarity_matrix(source, method)
        scores = matrix.scores()
        seconds = time.perf_counter() - t0
        precision, _ = precision_at_k(matrix.subject_ids, scores, labels, k)
        name = f"{method.value}{' (baseline)' if method is Method.JACCARD else ''}"
        print(f"{name:<22}" + "".join(f"{precision[n]:>20.3f}" for n in LABELS) + f"{seconds:>10.2f}")
    print(f"{'ceiling':<22}" + "".join(f"{cap[n]:>20.3f}" for n in LABELS))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--store", type=Path, help="store directory to fill or reuse (default: a temporary one)")
    parser.add_argument("--methods", nargs="+", choices=[m.value for m in Method],
                        default=[m.value for m in Method if m is not Method.EPISODES],
                        help="default: all but episodes (the generated store has no TOA timelines; it would equal "
                             "timeline)")
    args = parser.parse_args(argv)
    run(args.subjects, args.seed, args.k, args.store, [Method(m) for m in args.methods])


if __name__ == "__main__":
    main()
