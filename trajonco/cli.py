"""The `trajonco` command line: one sub-command per step of the pipeline.

Each sub-command imports its machinery lazily so `trajonco --help` stays instant. Errors the user can fix
(bad input data, an empty cohort, a missing file) are printed as one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from vista.cli import add_llm_option
from vista.errors import CommandLineError, run_command

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


def _parse_when(text: str | None, option: str) -> datetime | None:
    """An ISO date/time from the command line, or a one-line `ValueError` naming the option."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise CommandLineError(f"{option}: {text!r} is not an ISO date or date-time (e.g. 2019-06-30)") from None


def _cmd_predict_one(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from trajonco.agents.display import print_result
    from trajonco.pipeline import PipelineConfig
    from vista.llm import LLMConfig
    from vista.meds.reader import MedsDataset

    when = _parse_when(args.prediction_time, "--prediction-time")
    dataset = MedsDataset(Path(args.dataset))
    record = dataset.load_patients([args.subject])[args.subject]
    settings = {"variant": args.variant, "horizon_days": args.horizon_days, "chunk_tokens": args.chunk_tokens,
                "memory_k": args.memory_k, "cancer": "lung" if args.cancer == "any" else args.cancer}
    try:
        config = PipelineConfig(**{k: v for k, v in settings.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise CommandLineError(problems) from None
    llm = LLMConfig.from_cli(args.llm)
    result = asyncio.run(_predict_with_progress(record, dataset.code_catalog(), config, llm, when,
                                                any_cancer=args.cancer == "any"))
    print_result(result, as_json=args.json)
    return 0


async def _predict_with_progress(record, catalog, config, llm, when, *, any_cancer: bool):
    """Run one patient while a status line on stderr shows the plan (tokens, chunks) and the calls made so far."""
    from rich.console import Console

    from trajonco.cancers import CANCERS
    from trajonco.pipeline import assess, assess_any_cancer, gateway_facts, prepare_patient
    from vista.llm import LLMGateway

    console = Console(stderr=True)
    async with LLMGateway(llm) as gateway:
        facts = await gateway_facts(gateway, config)
        prepared = prepare_patient(record, catalog, config, facts, when)
        plan = (f"subject {record.subject_id}: {prepared.timeline.n_tokens():,} timeline tokens in "
                f"{len(prepared.chunks)} chunk(s) of ≤ {prepared.chunk_tokens:,}; {config.variant.value} on {facts.model}")
        console.print(plan)
        if any_cancer:
            work = assess_any_cancer(prepared, gateway, config, facts)
        else:
            work = assess(prepared, CANCERS[config.cancer], gateway, config, facts)
        task = asyncio.ensure_future(work)
        with console.status("") as status:
            while not task.done():
                status.update(f"{len(gateway.ledger)} LLM call(s) done")
                await asyncio.wait({task}, timeout=0.5)
        return task.result()


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

    p = sub.add_parser("predict-one", help="run the TrajOnco agents on one patient and print the assessment")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--subject", type=int, required=True, help="subject_id")
    p.add_argument("--cancer", default="lung", help="one of the 15 cancer keys (lung, breast, ...) or 'any' for "
                   "any-cancer max pooling over all 15 (default lung)")
    p.add_argument("--variant", choices=["one_stage", "two_stage", "single_agent"], help="agent design (default one_stage)")
    p.add_argument("--prediction-time", help="ISO date/time; only events strictly before it are seen (default: after "
                   "the last event)")
    p.add_argument("--horizon-days", type=int, help="prediction horizon in days (default 365)")
    p.add_argument("--chunk-tokens", type=int, help="chunk limit l in tokens (default: fitted to the model's context)")
    p.add_argument("--memory-k", type=int, help="latest memory events shown to each worker (default 10)")
    add_llm_option(p)
    p.add_argument("--json", action="store_true", help="print the typed result as JSON")
    p.set_defaults(handler=_cmd_predict_one)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `trajonco` console script."""
    from trajonco.errors import user_errors

    return run_command(build_parser().parse_args(argv), user_errors())


if __name__ == "__main__":
    sys.exit(main())
