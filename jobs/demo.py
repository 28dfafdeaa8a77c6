"""The main job on embedded defaults: the whole TrajOnco vertical slice in one command (``make demo``).

    python -m jobs.demo                      # out/demo/report.html, about 10 minutes on 2 cores
    python -m jobs.demo --out DIR [any jobs.report option, e.g. --agent-patients 6]

Steps: a seeded synthetic MEDS dataset (4,000 subjects) → the lung-cancer and any-cancer case–control cohorts →
the Ray predict job (``jobs.predict``) with the embedded SmolLM2 model on a handful of lung test patients, one-stage
and two-stage agents → logistic regression, KNN and XGBoost on summary features → the reproduction report
(Table 1, AUROC/AUPRC with CIs, ROC/PR curves, sensitivity analyses, strata, latency and cost). No API key, no
server, nothing downloaded. It is ``python -m jobs.report --quick`` with the demo's agent settings; rerunning
reuses the dataset and the patients the agents already assessed.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console

from jobs import report

DEMO_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("--out", "out/demo"),
    ("--agent-patients", "4"),
    ("--agent-variants", "one_stage,two_stage"),
    ("--chunk-tokens", "800"),  # the demo's timelines have ≤ 1,500 tokens: two chunks, so the chain passes state
)
"""Options the demo sets unless the command line gives them."""


def demo_argv(argv: list[str]) -> list[str]:
    """``jobs.report`` arguments: quick mode, the demo defaults, then the user's own options.

    >>> demo_argv(["--agent-patients", "2"])
    ['--quick', '--out', 'out/demo', '--agent-variants', 'one_stage,two_stage', '--chunk-tokens', '800', '--agent-patients', '2']
    """
    given = {item.split("=", 1)[0] for item in argv if item.startswith("--")}
    defaults = [part for option, value in DEMO_DEFAULTS if option not in given for part in (option, value)]
    return ["--quick", *defaults, *argv]


def main(argv: list[str] | None = None) -> int:
    args = demo_argv(list(sys.argv[1:] if argv is None else argv))
    if any(flag in args for flag in ("-h", "--help")):
        print(__doc__)
        return report.main(args)
    console = Console()
    started = time.perf_counter()
    console.rule("TrajOnco demo: synthetic cohort → agents on Ray (embedded model) → baselines → report")
    code = report.main(args)
    if code == 0:
        out = args[args.index("--out") + 1]
        console.print(f"demo finished in {time.perf_counter() - started:.0f} s — open [bold]{out}/report.html[/bold] "
                      f"(every number also in {out}/results.json, figures in {out}/figures/)")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
