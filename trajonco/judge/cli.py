"""``trajonco judge RUN_A RUN_B --out DIR``: the pairwise LLM judge as a sub-command (`add_parser`).

Imports of the judge machinery happen in the handler, so ``trajonco --help`` stays instant.
"""

from __future__ import annotations

import argparse

from vista.shared.atomic import atomic_write_text

JUDGE_HELP = """\
Compares two jobs.predict runs (folders or predictions.parquet files) patient by patient: a judge LLM picks the
better answer (A, B or tie) on five rubrics -- clinical correctness, completeness and detail, clinical reasoning,
temporal reasoning, clarity and actionability -- once with run A shown first and once with run B shown first.
Only patients present in both runs with a usable answer in both are compared (the others are counted). Writes
DIR/judge.json (every verdict, the rates with bootstrap CIs, position bias) and prints the summary.
The judge has its own LLM settings (--judge-llm KEY=VALUE, after VISTA_LLM_* variables), e.g.
--judge-llm backend=openai --judge-llm model=gpt-4.1 ; default: the embedded model (machinery only).
Answers are cached in DIR/llm_cache (unless --judge-llm cache_dir=... says otherwise), so a rerun costs nothing.
"""


def add_parser(sub) -> None:
    """Register ``judge`` on an argparse sub-parsers object."""
    from vista.shared.cli_kit import add_llm_option

    from vista.shared.cli_kit import subcommand

    p = subcommand(sub, "judge", "compare two prediction runs with a pairwise LLM judge (5 rubrics, both orders)",
                   "trajonco judge out/predict-lung-1stage out/predict-lung-2stage --out out/judge "
                   "--judge-llm backend=openai --judge-llm model=gpt-4.1", details=JUDGE_HELP)
    p.add_argument("run_a", metavar="RUN_A", help="jobs.predict output folder or predictions.parquet (run A)")
    p.add_argument("run_b", metavar="RUN_B", help="the run to compare it with (run B)")
    p.add_argument("--out", required=True, help="folder for judge.json (created if needed)")
    p.add_argument("--names", nargs=2, metavar=("NAME_A", "NAME_B"), help="names of the runs in the report "
                   "(default: variant · model of each file)")
    p.add_argument("--limit", type=int, help="judge a seeded sample of this many shared patients (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample and of the bootstrap (default 0)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per CI (default 2000)")
    p.add_argument("--reason-chars", type=int, help="longest reason per rubric (default: fitted to max_tokens)")
    add_llm_option(p, "--judge-llm", "LLM setting of the judge (repeatable KEY=VALUE; default: VISTA_LLM_* / embedded)")
    p.set_defaults(handler=_cmd_judge)


def _cmd_judge(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from trajonco.judge.compare import compare_runs
    from trajonco.judge.errors import EvaluationInputError
    from vista.shared.errors import CommandLineError
    from vista.shared.llm import LLMConfig

    if args.limit is not None and args.limit < 1:
        raise CommandLineError(f"--limit must be at least 1, got {args.limit}")
    if args.reason_chars is not None and not 20 <= args.reason_chars <= 400:
        raise CommandLineError(f"--reason-chars must be within 20..400, got {args.reason_chars}")
    out = Path(args.out)
    config = LLMConfig.from_cli(args.judge_llm, flag="--judge-llm")
    if config.cache_dir is None:  # a rerun (e.g. after an interruption or with more resamples) asks nothing twice
        config = config.with_overrides({"cache_dir": str(out / "llm_cache")})
    names = tuple(args.names) if args.names else (None, None)
    try:
        report = asyncio.run(compare_runs(args.run_a, args.run_b, config, names=names, limit=args.limit,
                                          seed=args.seed, reason_chars=args.reason_chars,
                                          n_resamples=args.resamples))
    except EvaluationInputError as exc:
        raise CommandLineError(str(exc)) from None
    atomic_write_text(out / "judge.json", report.model_dump_json(indent=1))  # private (vista.shared.atomic)
    print("\n".join(report.lines()))
    print(f"wrote {out / 'judge.json'}")
    return 0
