"""The `trajonco` command line: one sub-command per step of the pipeline.

Each sub-command imports its machinery lazily so `trajonco --help` stays instant. Errors the user can fix
(bad input data, an empty cohort, a missing file) are printed as one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

Handler = Callable[[argparse.Namespace], int]


def _cmd_synth(args: argparse.Namespace) -> int:
    from vista.synth import SynthConfig, generate

    config = SynthConfig(n_subjects=args.subjects, seed=args.seed, shard_size=args.shard_size, workers=args.workers)
    summary = generate(config, Path(args.out), progress=not args.quiet)
    print(summary)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from vista.meds.validation import validate_dataset

    report = validate_dataset(Path(args.dataset), on_error="quarantine" if args.quarantine else "raise")
    print(report)
    if args.quarantine and args.report:
        report.quarantine.write_json(Path(args.report))
        print(f"quarantine report written to {args.report}")
    return 0


def _cmd_cohort(args: argparse.Namespace) -> int:
    from trajonco.cohorts import build_cohort, load_definition

    definition = load_definition(args.definition)
    overrides = {k: v for k, v in {"gap_days": args.gap_days, "seed": args.seed}.items() if v is not None}
    if overrides:
        definition = definition.with_overrides(**overrides)
    result = build_cohort(Path(args.dataset), definition, Path(args.out))
    print(result.manifest.summary_text() if hasattr(result.manifest, "summary_text") else result.manifest)
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from trajonco.cohort_timelines import render_patient_timeline

    print(render_patient_timeline(Path(args.dataset), args.subject, args.prediction_time))
    return 0


def _cmd_chunk(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trajonco.cohort_timelines import summary_table, timeline_stats

    stats = timeline_stats(Path(args.dataset), Path(args.labels), max_tokens=args.max_tokens, limit=args.limit)
    Console().print(summary_table(stats, title=f"Timelines of {args.labels} (chunks of ≤ {args.max_tokens:,} tokens)"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trajonco",
        description="TrajOnco / VISTA reference implementation: synthetic MEDS data, cohorts, timelines, chunks.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("synth", help="generate a seeded synthetic MEDS dataset with cancer cases and ground truth")
    p.add_argument("--subjects", type=int, default=20_000, help="number of subjects (default 20000)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed, same bytes")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--shard-size", type=int, default=10_000, help="subjects per parquet shard")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_synth)

    p = sub.add_parser("validate", help="check a MEDS dataset (schema, order, values, times) and report problems")
    p.add_argument("dataset", help="MEDS dataset root")
    p.add_argument("--quarantine", action="store_true", help="record bad subjects/files and go on instead of stopping")
    p.add_argument("--report", help="with --quarantine: write the quarantine report (JSON) here")
    p.set_defaults(handler=_cmd_validate)

    p = sub.add_parser("cohort", help="build a matched case-control cohort (MEDS labels + manifest) from a definition")
    p.add_argument("definition", help="built-in name (lung, breast, ..., any_cancer) or path to a TOML definition")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--out", required=True, help="output cohort directory")
    p.add_argument("--gap-days", type=int, help="override the gap between prediction time and index (days)")
    p.add_argument("--seed", type=int, help="override the matching seed")
    p.set_defaults(handler=_cmd_cohort)

    p = sub.add_parser("timeline", help="print one patient's XML timeline (events strictly before the prediction time)")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--subject", type=int, required=True, help="subject_id")
    p.add_argument("--prediction-time", help="ISO date/time; default: after the last event")
    p.set_defaults(handler=_cmd_timeline)

    p = sub.add_parser("chunk", help="render and chunk the timelines of a cohort and print token/chunk statistics")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--labels", required=True, help="cohort label parquet (e.g. COHORT/labels/test.parquet)")
    p.add_argument("--max-tokens", type=int, default=16_000, help="chunk budget l in tokens (default 16000)")
    p.add_argument("--limit", type=int, help="only the first N patients")
    p.set_defaults(handler=_cmd_chunk)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `trajonco` console script."""
    from trajonco.errors import user_errors

    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except user_errors() as exc:  # errors the user can act on: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
