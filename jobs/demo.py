"""The main job on embedded defaults: the whole TrajOnco vertical slice in one command (``make demo``).

    python -m jobs.demo                      # out/demo/report.html, about 10 minutes on 2 cores
    python -m jobs.demo --out DIR [any jobs.report option, e.g. --agent-patients 6]

Steps: a seeded synthetic MEDS dataset (4,000 subjects) → the lung-cancer and any-cancer case–control cohorts →
the Ray predict job (``jobs.predict``) with the embedded SmolLM2 model on a handful of lung test patients, one-stage
and two-stage agents → logistic regression, KNN and XGBoost on summary features → the reproduction report
(Table 1, AUROC/AUPRC with CIs, ROC/PR curves, sensitivity analyses, strata, latency and cost). No API key, no
server, nothing downloaded. It is ``python -m jobs.report --quick`` with the demo's agent settings; rerunning
reuses the dataset and the patients the agents already assessed. It ends by building the MEDS Graphs of a dozen lung
cancer patients into a small VISTA store (``OUT/vista``, graph only: a few seconds, no model) and printing the
``vista serve`` line that opens it in the browser (docs/vista-serve.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

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


DEMO_STORE_PATIENTS = 12


def demo_store(dataset: Path, store: Path, n: int = DEMO_STORE_PATIENTS) -> tuple[list[int], float]:
    """Build the MEDS Graphs of ``n`` lung-cancer patients of ``dataset`` (the generator's ground truth names them;
    the first ``n`` subjects of a dataset without one) into the graph store ``store``; (subjects, seconds)."""
    from vista.graph import GraphStore
    from vista.shared.meds.reader import MedsDataset
    from vista.shared.synth.ground_truth import OncologyRecord

    started = time.perf_counter()
    truth = dataset / "ground_truth" / "oncology.jsonl"
    meds = MedsDataset(dataset)
    if truth.is_file():
        records = (OncologyRecord.model_validate_json(line) for line in truth.read_text().splitlines() if line)
        subjects = sorted({r.subject_id for r in records if r.cancer == "lung"})[:n]
    else:
        subjects = sorted(meds.subject_ids())[:n]
    GraphStore(store).build_dataset(meds, subjects or None)
    return subjects, time.perf_counter() - started


def _dataset_of(args: list[str]) -> Path:
    """The dataset the report read: ``--dataset``, else ``--synth-dir``, else the synthetic one under ``--out``."""
    for flag in ("--dataset", "--synth-dir"):
        if flag in args:
            return Path(args[args.index(flag) + 1])
    return Path(args[args.index("--out") + 1]) / "dataset"


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
        store = Path(out) / "vista"
        subjects, seconds = demo_store(_dataset_of(args), store)
        console.print(f"VISTA: MEDS Graphs of {len(subjects)} lung-cancer patient(s) in {store} ({seconds:.1f} s). "
                      "Browse them (timelines and displays: `vista display --store "
                      f"{store} --subject {subjects[0] if subjects else 'N'}`):")
        console.print(f"    vista serve --store {store}", markup=False, highlight=False)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
