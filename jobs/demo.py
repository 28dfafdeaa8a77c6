"""The main job on embedded defaults: synthetic cohort → lung-cancer case–control cohort → XML timelines → chunks.

Run with ``make demo`` (or ``python -m jobs.demo [--subjects N] [--out DIR]``). Re-running reuses the generated
dataset when its config is unchanged.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trajonco.cohort_timelines import summary_table, timeline_stats
from trajonco.cohorts import build_cohort, load_definition
from vista.synth import SynthConfig, generate

console = Console()


def _dataset(config: SynthConfig, out: Path) -> Path:
    """Generate the synthetic dataset unless the same config already produced it."""
    stamp = out / "synth_config.json"
    wanted = config.model_dump_json()
    if stamp.is_file() and stamp.read_text() == wanted and (out / "data").is_dir():
        console.print(f"[dim]reusing synthetic dataset {out} (same config)[/dim]")
        return out
    summary = generate(config, out)
    stamp.write_text(wanted)
    console.print(summary)
    return out


def _cohort_table(manifest_path: Path) -> Table:
    manifest = json.loads(manifest_path.read_text())
    table = Table(title=f"Cohort {manifest_path.parent.name}")
    table.add_column("")
    table.add_column("value", justify="right")
    for key, value in manifest.get("counts", {}).items():
        table.add_row(key, str(value))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subjects", type=int, default=20_000, help="synthetic subjects (default 20000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    parser.add_argument("--max-tokens", type=int, default=16_000, help="chunk budget l (default 16000)")
    args = parser.parse_args(argv)

    out = Path(args.out)
    started = time.perf_counter()
    console.rule("1. synthetic MEDS dataset")
    dataset = _dataset(SynthConfig(n_subjects=args.subjects, seed=args.seed), out / "synth")

    console.rule("2. lung-cancer case–control cohort")
    cohort = build_cohort(dataset, load_definition("lung"), out / "cohorts" / "lung")
    console.print(cohort.manifest.summary_text() if hasattr(cohort.manifest, "summary_text") else cohort.manifest)

    console.rule("3. XML timelines and time-aware chunks (test cohort)")
    labels = out / "cohorts" / "lung" / "labels" / "test.parquet"
    stats = timeline_stats(dataset, labels, max_tokens=args.max_tokens)
    console.print(summary_table(stats, title=f"Lung test cohort: timelines before prediction time, chunks of ≤ {args.max_tokens:,} tokens"))
    console.print(f"done in {time.perf_counter() - started:.1f} s; outputs under {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
