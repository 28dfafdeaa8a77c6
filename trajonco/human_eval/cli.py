"""``trajonco review-export`` and ``trajonco review-import``: the human evaluation as sub-commands (`add_parser`).

Imports of the machinery happen in the handlers, so ``trajonco --help`` stays instant.
"""

from __future__ import annotations

import argparse

from vista.shared.atomic import atomic_write_text

EXPORT_HELP = """\
Samples patients (seeded) from one jobs.predict run -- or from two runs on the same patients -- and writes blinded
review packets to OUT: one HTML page per patient (timeline excerpt, each model's summary, reasoning and events with
their provenance, the questions), index.html, packets.json and answers_template.csv (one row per question).
Models appear as A/B, drawn per packet; the key goes to --key, which must be outside OUT. Questions: is each event
correct, is each summary faithful, and with two runs which answer is better on each of the judge's five rubrics.
"""

IMPORT_HELP = """\
Reads reviewers' copies of answers_template.csv (reviewer and answer filled in) against the packets of an export
and reports Cohen's kappa between every two reviewers (per question kind) and, with --judge and --key, between each
reviewer and the LLM judge on the rubric questions. Every problem in a CSV stops the import with one line naming
the file, the row and the field.
"""


def add_parser(sub) -> None:
    """Register ``review-export`` and ``review-import`` on an argparse sub-parsers object."""
    from vista.shared.cli_kit import subcommand

    p = subcommand(sub, "review-export", "write blinded human-review packets (HTML + CSV) for a seeded sample",
                   "trajonco review-export out/predict-a out/predict-b --out out/review --key out/review.key.json "
                   "--n 30", details=EXPORT_HELP)
    p.add_argument("runs", nargs="+", metavar="RUN", help="one or two jobs.predict output folders or "
                   "predictions.parquet files")
    p.add_argument("--out", required=True, help="packet folder to give the reviewers (created if needed)")
    p.add_argument("--key", required=True, help="file for the unblinding key (JSON), outside --out")
    p.add_argument("--n", type=int, default=30, help="patients to sample (default 30, as in the paper)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample and of the A/B draw (default 0)")
    p.add_argument("--names", nargs="+", metavar="NAME",
                   help="names of the runs in the key (default: variant · model)")
    p.add_argument("--dataset", help="MEDS dataset for the timeline excerpts (default: the one in the run's job.json)")
    p.add_argument("--no-timeline", action="store_true", help="export without timeline excerpts")
    p.add_argument("--excerpt-chars", type=int, default=20_000, help="longest timeline excerpt (default 20000)")
    p.set_defaults(handler=_cmd_export)

    p = subcommand(sub, "review-import", "read reviewers' answer CSVs and report Cohen's kappa (reviewers, judge)",
                   "trajonco review-import ann.csv bob.csv --packets out/review --key out/review.key.json "
                   "--judge out/judge/judge.json", details=IMPORT_HELP)
    p.add_argument("answers", nargs="+", metavar="CSV", help="reviewers' answers (copies of answers_template.csv)")
    p.add_argument("--packets", required=True, help="the packet folder written by review-export")
    p.add_argument("--key", help="the export's key file (needed with --judge)")
    p.add_argument("--judge", help="judge.json written by `trajonco judge` on the same two runs")
    p.add_argument("--out", help="also write the report as JSON to this file")
    p.set_defaults(handler=_cmd_import)


def _cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trajonco.human_eval.export import export_packets
    from trajonco.judge.errors import EvaluationInputError
    from vista.shared.errors import CommandLineError

    if args.names and len(args.names) != len(args.runs):
        raise CommandLineError(f"--names: give one name per run ({len(args.runs)}), got {len(args.names)}")
    try:
        summary = export_packets(args.runs, Path(args.out), Path(args.key), n=args.n, seed=args.seed,
                                 names=args.names, dataset=Path(args.dataset) if args.dataset else None,
                                 timeline=not args.no_timeline, max_excerpt_chars=args.excerpt_chars)
    except EvaluationInputError as exc:
        raise CommandLineError(str(exc)) from None
    print("\n".join(summary.lines()))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trajonco.human_eval.agreement import agreement_report, read_key
    from trajonco.human_eval.answers import read_answers
    from trajonco.human_eval.render import read_packets
    from trajonco.judge.errors import EvaluationInputError
    from trajonco.judge.report import read_report
    from vista.shared.errors import CommandLineError

    if args.judge and not args.key:
        raise CommandLineError("--judge needs --key (the export's key unblinds A and B)")
    try:
        packets = read_packets(Path(args.packets))
        answers = read_answers(args.answers, packets)
        report = agreement_report(answers, len(packets.packets), key=read_key(args.key) if args.key else None,
                                  judge=read_report(args.judge) if args.judge else None)
    except EvaluationInputError as exc:
        raise CommandLineError(str(exc)) from None
    print("\n".join(report.lines()))
    if args.out:
        atomic_write_text(args.out, report.model_dump_json(indent=1))
        print(f"wrote {args.out}")
    return 0
