"""Seeded datasets and the cohorts the whole-dataset builder (before shard-by-shard building, commit d6b72f2) wrote on
them, kept under tests/data/cohort_golden/ so tests/test_cohort_shards.py fails the moment an output drifts.

Two datasets: `benchmarks.bench_cohort`'s writer (plain random MEDS, 9 shards of 300 subjects) and a `trajonco synth`
dataset (realistic records, MEDS sub-folders per split). Each golden case is one cohort's output folder as the
builder writes it (``labels/``, ``label_details/``, ``manifest.json``), with the manifest's absolute dataset path
blanked. ``python tests/cohort_golden.py`` rewrites them from the builder of the checkout it runs in — only ever
from a builder whose outputs are the reference.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

GOLDEN = Path(__file__).parent / "data" / "cohort_golden"
CASES = (
    ("bench", "lung"), ("bench", "any_cancer"),
    ("synth", "lung"), ("synth", "any_cancer"), ("synth", "breast"), ("synth", "prostate"),
)


def write_dataset(kind: str, root: Path) -> Path:
    """The seeded dataset ``kind`` ('bench' or 'synth') at ``root``."""
    if kind == "bench":
        from benchmarks.bench_cohort import write_random_dataset

        write_random_dataset(root, 2_700, shard_subjects=300, seed=3)
    else:
        from vista.shared.synth import SynthConfig, generate

        generate(SynthConfig(n_subjects=1500, seed=7), root, progress=False)
    return root


def output_files(out: Path) -> list[Path]:
    """The files a cohort build wrote under ``out`` (relative, sorted)."""
    return sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())


def manifest_without_path(path: Path) -> dict[str, object]:
    """The manifest, with the dataset's absolute path (a temp folder) blanked."""
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["dataset"]["path"] = ""
    return manifest


def differences(out: Path, golden: Path) -> list[str]:
    """How the cohort written at ``out`` differs from ``golden`` (empty: identical, row for row)."""
    found, expected = output_files(out), output_files(golden)
    if found != expected:
        return [f"files {found} != {expected}"]
    problems = []
    for name in expected:
        if name.suffix == ".json":
            if manifest_without_path(out / name) != manifest_without_path(golden / name):
                problems.append(f"{name} differs")
        elif not pq.read_table(out / name).equals(pq.read_table(golden / name)):
            problems.append(f"{name} differs")
    return problems


def regenerate() -> None:
    from trajonco.cohorts import build_cohort, load_definition

    with tempfile.TemporaryDirectory() as tmp:
        for kind in sorted({kind for kind, _ in CASES}):
            root = write_dataset(kind, Path(tmp) / kind)
            for dataset, name in CASES:
                if dataset != kind:
                    continue
                target = GOLDEN / f"{kind}-{name}"
                shutil.rmtree(target, ignore_errors=True)
                build_cohort(root, load_definition(name), target)
                manifest = manifest_without_path(target / "manifest.json")
                (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
                print(f"{target}: {output_files(target)}", file=sys.stderr)


if __name__ == "__main__":
    regenerate()
