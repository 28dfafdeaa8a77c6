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

from trajonco.assessment_options import add_assessment_arguments, cancer_keys
from vista.shared.cli_kit import (
    AddCommands,
    ArgumentParser,
    HelpFormatter,
    add_commands,
    add_llm_option,
    add_overwrite,
    add_profile_option,
    add_version,
    check_output_dir,
    lazy_commands,
    parse_when,
    run_command,
    subcommand,
    user_errors,
)
from vista.shared.errors import CommandLineError

def _cmd_synth(args: argparse.Namespace) -> int:
    from rich.console import Console

    from vista.shared.synth import SynthConfig, generate, summary_table

    for option, value in (("--subjects", args.subjects), ("--shard-size", args.shard_size), ("--workers", args.workers)):
        if value < 1:
            raise CommandLineError(f"{option} {value}: must be at least 1")
    out = check_output_dir(args.out, overwrite=args.overwrite)
    config = SynthConfig(n_subjects=args.subjects, seed=args.seed, shard_size=args.shard_size, workers=args.workers)
    summary = generate(config, out, progress=not args.quiet, overwrite=args.overwrite)
    Console().print(summary_table(summary))
    return 0


EXIT_PROBLEMS = 1
"""`trajonco validate`: problems were found and quarantined (or, with --strict, warnings were given)."""

VALIDATE_HELP = """\
Checks every data file (footer, schema), subject (order, contiguity, one file each) and row (null or empty codes,
NaN/inf values, impossible times, time order), then the metadata files, and warns -- dropping nothing -- about what
MEDS allows but is probably wrong:

  exact duplicate rows     rows equal in every column to an earlier row (counted per file, with an example);
                           --fix-duplicates OUT writes a copy of the dataset without them (the first copy of each
                           row is kept, the order of the rest unchanged, metadata copied as is). The input is never
                           modified: point the other commands at OUT.
  subject splits           metadata/subject_splits.parquet listing subjects that have no rows, or omitting subjects
                           that have rows (cohorts only ever use subjects that are in a split)
  missing metadata         metadata/codes.parquet, dataset.json or subject_splits.parquet absent

Without --quarantine the first problem stops the check (one line naming file, subject and field). With
--quarantine every problem is recorded, the subjects and files concerned are left out, and the list can be
written with --report.

exit status: 0 no problem (warnings allowed unless --strict); 1 problems quarantined, or warnings with --strict;
2 stopped at the first problem, or unusable input/options
"""


def _cmd_validate(args: argparse.Namespace) -> int:
    return validate_command(args)


def validate_command(args: argparse.Namespace, run: object = None) -> int:
    """`trajonco validate` with its parsed options (`add_validate_arguments`); ``run`` runs the shard step
    (`vista.shared.meds.validation.ShardRunner`: threads in this process when None — the Ray job passes its own)."""
    from vista.shared.meds.duplicates import write_deduplicated
    from vista.shared.meds.validation import validate_dataset

    if args.report and not args.quarantine:
        raise CommandLineError("--report goes with --quarantine (without it the first problem stops the check)")
    if args.fix_duplicates:  # checked before the (long) validation pass, not after it
        out = check_output_dir(args.fix_duplicates, "--fix-duplicates")
        if out is not None and out.is_dir() and any(out.iterdir()):
            raise CommandLineError(f"--fix-duplicates {out}: must be a new or empty directory (the copy is written there)")
    root = Path(args.dataset)
    report = validate_dataset(root, on_error="quarantine" if args.quarantine else "raise",
                              run=run)  # type: ignore[arg-type]
    print(report)
    status = 0
    if args.report:
        report.quarantine.write(Path(args.report))
        entries = len(report.quarantine)
        print(f"quarantine report ({entries} entr{'y' if entries == 1 else 'ies'}) written to {args.report}")
    if not report.ok:
        status = EXIT_PROBLEMS
        if not args.report:
            print("the quarantine report was not written: add --report FILE.json (or FILE.parquet) to keep it")
    if args.fix_duplicates:
        if not report.ok:
            print(f"--fix-duplicates: no copy written to {args.fix_duplicates}: fix the problems above first")
        else:
            from vista.shared.meds.reader import MedsDataset

            found = write_deduplicated(root, MedsDataset(root).shards, Path(args.fix_duplicates))
            dropped = sum(f.rows for f in found)
            print(f"wrote {args.fix_duplicates}: a copy of the dataset without its {dropped} exact duplicate rows "
                  f"({sum(1 for f in found if f.rows)} of {len(found)} data files changed)")
    elif report.duplicate_rows:
        print(f"{report.duplicate_rows} exact duplicate rows: `trajonco validate {args.dataset} --fix-duplicates OUT`"
              " writes a copy without them")
    if args.strict and report.warnings:
        status = EXIT_PROBLEMS
    return status


def _validate_before_cohort(root: Path) -> None:
    """`trajonco cohort --validate`: the whole check of `trajonco validate` first (the first problem stops, naming
    file, subject and field); its warnings go to stderr (those about the splits are given by the cohort build)."""
    from vista.shared.meds.validation import validate_dataset

    for warning in validate_dataset(root).warnings:
        if warning.kind != "splits":
            print(f"warning: {warning}", file=sys.stderr)


def _locate_read_failure(root: Path, exc: Exception) -> None:
    """Re-raise a cohort's data error with the data files that fail a full read, when a failed polars read caused it
    (a corrupt page is only met halfway through the build, where the error cannot say which file)."""
    import polars as pl

    from trajonco.cohorts.errors import CohortDataError
    from trajonco.cohorts.source import unreadable_data

    if not isinstance(exc.__context__, pl.exceptions.PolarsError):  # raised while handling a failed read, or not
        return
    message = str(exc)
    unsaid = [line for line in unreadable_data(root) if line not in message]
    if unsaid:
        raise CohortDataError(f"{message}; unreadable data: {'; '.join(unsaid[:3])}") from exc


def _cmd_cohort(args: argparse.Namespace) -> int:
    if args.address:  # the `trajonco` console script forwards --address to the job (jobs.cli); this is python -m
        raise CommandLineError(f"--address {args.address}: a cohort on a Ray cluster is built by the job: "
                               "python -m jobs.data_steps cohort ... --address ADDR (or the `trajonco` command)")
    return cohort_command(args)


def cohort_command(args: argparse.Namespace, run: object = None) -> int:
    """`trajonco cohort` with its parsed options (`add_cohort_arguments`); ``run`` runs the shard step
    (`trajonco.cohorts.builder.ShardRunner`; this process when None — the Ray job passes its own)."""
    from trajonco.cohorts import CohortDataError, EmptyCohortError, build_cohort, load_definition

    from vista.shared.storage import resolve_local

    out = check_output_dir(args.out, overwrite=args.overwrite)
    resolve_local(args.dataset)  # a symbolic link loop: one line
    if not Path(args.dataset).is_dir():
        raise CommandLineError(f"--dataset {args.dataset}: no such directory")
    definition = load_definition(args.definition)
    overrides = {k: v for k, v in {"gap_days": args.gap_days, "seed": args.seed, "test_splits": args.test_splits,
                                   "train_splits": args.train_splits}.items() if v is not None}
    if overrides:
        definition = definition.with_overrides(**overrides)
    if args.validate:
        _validate_before_cohort(Path(args.dataset))
    try:
        if args.overwrite:
            _clear_cohort(out)
        result = build_cohort(Path(args.dataset), definition, out, profile=args.coding_profile,
                              run=run)  # type: ignore[arg-type]
    except CohortDataError as exc:
        _locate_read_failure(Path(args.dataset), exc)
        raise
    except EmptyCohortError as exc:  # --explain: what was found before it emptied; the error line follows
        if args.explain and exc.explanation is not None:
            print(exc.explanation.render(), flush=True)  # type: ignore[attr-defined]
        raise
    print(result.manifest.summary_text() if hasattr(result.manifest, "summary_text") else result.manifest)
    if args.explain:
        print(result.explanation.render())
    return 0


def add_cohort_arguments(p: argparse.ArgumentParser) -> None:
    """`trajonco cohort`'s options (also the Ray job's, `jobs.data_steps cohort`)."""
    p.add_argument("definition", help=f"a built-in name ({cancer_keys()}, any_cancer) or the path of a TOML definition")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--out", required=True, help="output cohort directory")
    add_overwrite(p, "cohort in --out")
    p.add_argument("--gap-days", type=int, help="override the gap between prediction time and index (days)")
    p.add_argument("--seed", type=int, help="override the matching seed")
    p.add_argument("--validate", action="store_true", help="check every row first, as `trajonco validate` does "
                   "(without it only the files' footers and schemas are checked, which is instant)")
    p.add_argument("--test-splits", nargs="+", metavar="SPLIT", help="MEDS splits feeding the test cohort "
                   "(overrides the definition's test_splits; default held_out)")
    p.add_argument("--train-splits", nargs="*", metavar="SPLIT", help="MEDS splits feeding the training cohort "
                   "(overrides train_splits; default train tuning; give none for no training cohort)")
    p.add_argument("--explain", action="store_true", help="also print which definition codes matched how many "
                   "subjects and rows (per vocabulary and code), the phenotype per split and every exclusion — and, "
                   "for an empty cohort, what was found before it emptied")
    add_profile_option(p)


def add_validate_arguments(p: argparse.ArgumentParser) -> None:
    """`trajonco validate`'s options (also the Ray job's, `jobs.data_steps validate`)."""
    p.add_argument("dataset", help="MEDS dataset root")
    p.add_argument("--quarantine", action="store_true", help="record bad subjects/files and go on instead of stopping "
                   "(exit status 1 when anything was quarantined)")
    p.add_argument("--report", help="with --quarantine: write the quarantine report here (JSON, or a parquet table "
                   "when the name ends in .parquet): subject_id (null: whole file), file, field, problem, row")
    p.add_argument("--fix-duplicates", metavar="OUT", help="write a copy of the dataset to OUT (a new directory) "
                   "without its exact duplicate rows; only when the check finds no problem")
    p.add_argument("--strict", action="store_true", help="exit with status 1 on warnings too (duplicates, splits, "
                   "missing metadata)")


def _clear_cohort(out: Path) -> None:
    """Remove what an earlier cohort left in ``out`` (labels, manifest), so no stale split survives --overwrite."""
    import shutil

    shutil.rmtree(out / "labels", ignore_errors=True)
    (out / "manifest.json").unlink(missing_ok=True)


def _cmd_profile(args: argparse.Namespace) -> int:
    from vista.shared.coding import profile_report
    from vista.shared.coding.detect import DETECTION_SAMPLE_ROWS

    sample_rows = None if args.all_rows else args.sample_rows or DETECTION_SAMPLE_ROWS
    report = profile_report(Path(args.dataset), args.coding_profile, sample_rows=sample_rows)
    print(report.model_dump_json(indent=2) if args.json else report.render())
    if report.sampled and not args.json:
        print(f"(counted on the first {report.rows:,} rows, as the jobs detect a profile; --all-rows counts every row, "
              "streaming shard by shard)")
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from trajonco.cohort_timelines import render_patient_timeline

    when = parse_when(args.prediction_time, "--prediction-time")
    if when is None:
        print("warning: no --prediction-time: the timeline holds the whole record, outcome included", file=sys.stderr)
    print(render_patient_timeline(Path(args.dataset), args.subject, when, profile=args.coding_profile))
    return 0


def _label_time(labels: str, subject_id: int) -> datetime:
    """The prediction time of ``subject_id``'s row in a label file (MEDS labels or ACES output, see
    `vista.shared.meds.labels`); one clear line if the file is unusable or the row absent or ambiguous."""
    import pyarrow.compute as pc

    from vista.shared.meds.labels import LabelFileError, read_label_table

    try:
        table = read_label_table(labels)
    except LabelFileError as exc:
        raise CommandLineError(f"--labels: {exc}") from None
    rows = table.filter(pc.equal(table.column("subject_id"), subject_id))
    times = sorted(set(rows.column("prediction_time").to_pylist()))
    if not times:
        raise CommandLineError(f"--labels: {labels} has no row for subject {subject_id}; pass --prediction-time instead")
    if len(times) > 1:  # e.g. ACES: one row per trigger event
        shown = ", ".join(t.isoformat() for t in times[:3]) + (", ..." if len(times) > 3 else "")
        raise CommandLineError(f"--labels: {labels} has {len(times)} prediction times for subject {subject_id} "
                               f"({shown}); pass one of them as --prediction-time")
    return times[0]


def _cmd_chunk(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trajonco.cohort_timelines import summary_table, timeline_stats

    chunk_tokens = args.chunk_tokens
    if args.old_max_tokens is not None:
        print("trajonco chunk: --max-tokens is deprecated (it will be removed in the next release); use --chunk-tokens",
              file=sys.stderr)
        chunk_tokens = args.old_max_tokens
    if chunk_tokens < 1:
        raise CommandLineError(f"--chunk-tokens {chunk_tokens}: must be at least 1")
    stats = timeline_stats(Path(args.dataset), Path(args.labels), max_tokens=chunk_tokens, limit=args.limit,
                           profile=args.coding_profile)
    Console().print(summary_table(stats, title=f"Timelines of {args.labels} (chunks of ≤ {chunk_tokens:,} tokens)"))
    return 0


PREDICTION_FAILED = 3
"""`predict-one`'s exit status when the prediction failed (no score), apart from 2 (a mistake in the command)."""


def _cmd_predict_one(args: argparse.Namespace) -> int:
    from trajonco.agents.display import print_result
    from vista.shared.llm import LLMConfig
    from vista.shared.meds.reader import MedsDataset

    from trajonco.cancers import get_cancer
    from trajonco.outcome_guard import leak_warning

    if args.cancer != "any":
        get_cancer(args.cancer)  # an unknown cancer fails here, listing the keys, before any data is read
    when = parse_when(args.prediction_time, "--prediction-time")
    if when is None and args.labels:
        when = _label_time(args.labels, args.subject)
    if when is None and not args.all_history:
        raise CommandLineError("predict-one needs a prediction time: --prediction-time DATE, --labels FILE (the "
                               "subject's label row), or --all-history to let the agents read the whole record")
    from trajonco.assessment_options import assessment_config

    # every option is checked before the patient is read
    config = assessment_config(args, cancer="lung" if args.cancer == "any" else args.cancer)
    llm = LLMConfig.from_cli(args.llm)
    dataset = MedsDataset(Path(args.dataset), profile=args.coding_profile)
    record = dataset.load_patients([args.subject])[args.subject]
    if when is None:
        print("warning: --all-history: the agents read the whole record, diagnosis included", file=sys.stderr)
    warning = leak_warning(record, args.cancer, when, dataset.code_catalog())
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    result = asyncio.run(_predict_with_progress(record, dataset.code_catalog(), config, llm, when,
                                                any_cancer=args.cancer == "any"))
    print_result(result, as_json=args.json)
    if result.status == "failed":  # no score: the caller (a script, CI) must not take the printout for an answer
        print(f"error: subject {record.subject_id}: the prediction failed (no score; see the errors above)",
              file=sys.stderr)
        return PREDICTION_FAILED
    return 0


async def _predict_with_progress(record, catalog, config, llm, when, *, any_cancer: bool):
    """Run one patient while a status line on stderr shows the plan (tokens, chunks) and the calls made so far."""
    from rich.console import Console

    from trajonco.cancers import CANCERS
    from trajonco.any_cancer import assess_any_cancer
    from trajonco.pipeline import assess, gateway_facts, prepare_patient
    from vista.shared.llm import open_gateway

    console = Console(stderr=True)
    async with open_gateway(llm) as gateway:
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


def build_parser(extra: AddCommands | None = None) -> argparse.ArgumentParser:
    """The `trajonco` parser; ``extra`` adds the sub-commands that live above this package (the Ray jobs, the
    report), which the console script's entry point (`jobs.cli`) wires in."""
    parser = ArgumentParser(
        prog="trajonco", formatter_class=HelpFormatter,
        description="TrajOnco: early cancer detection from longitudinal EHRs with a chain of LLM agents — synthetic "
                    "MEDS data, cohorts, timelines, single-patient and cohort predictions, baselines and the report.",
        epilog="Run `trajonco COMMAND --help` for a command's options and an example.",
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cancers = cancer_keys()

    p = subcommand(sub, "synth", "generate a seeded synthetic MEDS dataset with cancer cases and ground truth",
                   "trajonco synth --subjects 20000 --seed 0 --out out/synth")
    p.add_argument("--subjects", type=int, default=20_000, help="number of subjects")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed, same bytes")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--shard-size", type=int, default=10_000, help="subjects per parquet shard")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    add_overwrite(p, "dataset in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_synth)

    p = subcommand(sub, "profile", "which coding profile fits a MEDS dataset, and what share of rows it places",
                   ["trajonco profile out/synth", "trajonco profile MEDS_DIR --coding-profile my_site.toml --json"])
    p.add_argument("dataset", help="MEDS dataset root")
    add_profile_option(p)
    rows = p.add_mutually_exclusive_group()
    rows.add_argument("--sample-rows", type=int, help="count only the first N rows (default: the sample the jobs "
                      "detect a profile on, 200,000 rows)")
    rows.add_argument("--all-rows", action="store_true", help="count every row, shard by shard (memory bounded by "
                      "the vocabulary and the subjects, not the rows)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=_cmd_profile)

    p = subcommand(sub, "validate", "check a MEDS dataset (schema, order, values, times) and report problems",
                   ["trajonco validate out/synth", "trajonco validate out/synth --quarantine --report bad.json"],
                   details=VALIDATE_HELP)
    add_validate_arguments(p)
    p.set_defaults(handler=_cmd_validate)

    p = subcommand(sub, "cohort", "build a matched case-control cohort (MEDS labels + manifest) from a definition",
                   ["trajonco cohort lung --dataset out/synth --out out/cohorts/lung",
                    "trajonco cohort my_definition.toml --dataset MEDS --out out/cohorts/mine --explain"])
    add_cohort_arguments(p)
    p.add_argument("--address", help="build it on this Ray cluster ('auto', 'HOST:6379'): the `trajonco` command "
                   "hands the build to the job python -m jobs.data_steps cohort (a task per shard, same outputs)")
    p.set_defaults(handler=_cmd_cohort)

    p = subcommand(sub, "timeline", "print one patient's XML timeline (events strictly before the prediction time)",
                   "trajonco timeline --dataset out/synth --subject 12 --prediction-time 2021-06-01")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--subject", type=int, required=True, help="subject_id")
    p.add_argument("--prediction-time", help="ISO date/time; default: after the last event (warns: outcome included)")
    add_profile_option(p)
    p.set_defaults(handler=_cmd_timeline)

    p = subcommand(sub, "chunk", "render and chunk the timelines of a cohort and print token/chunk statistics",
                   "trajonco chunk --dataset out/synth --labels out/cohorts/lung/labels/test.parquet --chunk-tokens 16000")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--labels", required=True, help="cohort label parquet (e.g. COHORT/labels/test.parquet)")
    p.add_argument("--chunk-tokens", type=int, default=16_000, help="chunk limit l in tokens")
    p.add_argument("--max-tokens", type=int, dest="old_max_tokens", help=argparse.SUPPRESS)  # deprecated spelling
    p.add_argument("--limit", type=int, help="only the first N patients")
    add_profile_option(p)
    p.set_defaults(handler=_cmd_chunk)

    p = subcommand(sub, "predict-one", "run the TrajOnco agents on one patient and print the assessment",
                   ["trajonco predict-one --dataset out/synth --subject 12 --cancer lung --prediction-time 2021-06-01",
                    "trajonco predict-one --dataset out/synth --subject 12 --cancer any "
                    "--labels out/cohorts/lung/labels/test.parquet --model gpt-4.1-mini --base-url "
                    "https://api.openai.com/v1"],
                   details="A whole cohort runs on Ray with `trajonco predict` (resumable, one row per patient).\n\n"
                           "Exit status: 0 with a score (status ok or partial), 2 for a command-line or input "
                           f"mistake, {PREDICTION_FAILED} when the prediction failed (no score: the LLM calls failed).")
    p.add_argument("--dataset", required=True, help="MEDS dataset root")
    p.add_argument("--subject", type=int, required=True, help="subject_id")
    p.add_argument("--cancer", default="lung", help=f"the cancer to assess: {cancers}; or 'any' for any cancer "
                   "the patient's sex allows (see --any-cancer-mode) (default lung)")
    p.add_argument("--prediction-time", help="ISO date/time; only events strictly before it are seen")
    p.add_argument("--labels", help="MEDS label parquet: take the subject's prediction time from its row")
    p.add_argument("--all-history", action="store_true", help="no prediction time: the agents read the whole record "
                   "(diagnosis included; for demonstrations only)")
    add_profile_option(p)
    add_assessment_arguments(p)
    add_llm_option(p)
    p.add_argument("--json", action="store_true", help="print the typed result as JSON")
    p.set_defaults(handler=_cmd_predict_one)
    add_commands(sub, _PACKAGE_COMMANDS, extra)
    return parser


_PACKAGE_COMMANDS = (lazy_commands("trajonco.judge.cli"), lazy_commands("trajonco.human_eval.cli"),
                     lazy_commands("trajonco.insights.cli"))
"""Sub-commands of this package that live in their own modules (judge, insights, human review)."""


def main(argv: Sequence[str] | None = None,
         extra: AddCommands | None = None) -> int:
    """The `trajonco` command (the console script adds the Ray jobs through ``extra``, see `jobs.cli`)."""
    return run_command(build_parser(extra).parse_args(argv), user_errors())


if __name__ == "__main__":
    sys.exit(main())
