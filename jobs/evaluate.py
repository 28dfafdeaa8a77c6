"""evaluate: score a cohort's stored tumor-board displays against the truth with an LLM judge, on Ray, resumable.

    python -m jobs.evaluate --store OUT/vista --truth MEDS --out OUT/eval --judge-llm model=NAME
    python -m jobs.evaluate --store OUT/vista --references refs.csv --out OUT/eval

The evaluation's parts of the shared driver (`jobs.runner`): the patients with a display and a truth, the judge's
settings (`vista.evaluation.options`), and at the end the report over those scored (`vista.evaluation.cohort`).
Inputs, resume, outputs and exit statuses: docs/jobs.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from jobs.driver import job_main, new_run_id, task_dataset
from jobs.evaluate_actor import EvaluateActor, EvaluateSettings
from jobs.evaluate_options import build_parser
from jobs.llm_budget import BudgetRef
from jobs.runner import CohortJob, LazyRay, check_common_options, run_job, sized_settings
from vista.evaluation.cohort_rows import COHORT_SCHEMA, read_rows
from vista.evaluation.report import EvaluationReport
from vista.shared.cli_kit import check_output_dir
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import keys_table
from vista.shared.runs.errors import JobInputError
from vista.shared.runs.parts import PartConsolidation
from vista.shared.runs.progress import ProgressTracker
from vista.shared.runs.summary import RunSummary

EVALUATED_FILE = "evaluated.parquet"
OLD_MARKERS = "evaluated"
"""Where evaluate-cohort wrote its per-patient JSON markers before it ran on the shared driver."""
SHOWN_UNSCORED = 20

__all__ = ["EvaluateJob", "build_parser", "main", "run"]


class EvaluateJob(CohortJob):
    """The cohort evaluation's parts of the shared driver (`jobs.runner`)."""

    name = "evaluate"
    output_name = EVALUATED_FILE
    output_schema = COHORT_SCHEMA
    settings: EvaluateSettings

    def __init__(self, args: argparse.Namespace, run_id: str):
        super().__init__(args, run_id)
        self.subjects: list[int] = []
        self.report: EvaluationReport | None = None  # set by `finish`
        self.unscored: dict[int, str] = {}  # selected patients whose row is an error, with the error

    def check(self) -> None:
        from vista.evaluation.cohort import select_subjects, stored_display_subjects
        from vista.evaluation.options import load_truth_sources, run_judge_config

        args = self.args
        check_common_options(args)
        if not 0 <= args.threshold <= 10:
            raise JobInputError(f"--threshold must be within 0..10, not {args.threshold}")
        if args.resamples < 1:
            raise JobInputError(f"--resamples must be at least 1, not {args.resamples}")
        check_output_dir(args.out, resumable=True)
        if (args.out / OLD_MARKERS).is_dir():
            raise JobInputError(f"--out {args.out}: holds the per-patient markers ({OLD_MARKERS}/) of an earlier "
                                "version of this job, which now writes part files; choose another --out")
        displays = stored_display_subjects(args.store)
        truths = load_truth_sources(args.truth, args.references)
        self.subjects = select_subjects(args.store, args.subjects, truths, displays)
        judge = run_judge_config(args.judge_llm, args.out)
        self.settings = EvaluateSettings.for_run(
            args, self.run_id, store=args.store.resolve(), truth=args.truth.resolve() if args.truth else None,
            references=args.references.resolve() if args.references else None, out=args.out.resolve(), llm=judge,
            threshold=args.threshold)

    def fingerprint(self) -> dict[str, object]:
        from vista.display.hashing import ANSWER_FIELDS

        settings = self.settings
        return {"judge": json.loads(settings.llm.model_dump_json(include=set(ANSWER_FIELDS) | {"base_url"})),
                "store": str(settings.store), "truth": str(settings.truth) if settings.truth else None,
                "references": str(settings.references) if settings.references else None,
                "threshold": settings.threshold}

    def task_keys(self, ray: LazyRay) -> list[TaskKey]:
        return [TaskKey(sid) for sid in self.subjects]

    def describe(self) -> str:
        return f"judged against the truth, correct from {self.settings.threshold} of 10"

    def execute(self, pending: list[TaskKey], budget: BudgetRef | None, tracker: ProgressTracker) -> None:
        settings = sized_settings(self.settings, self.resources, budget)
        work = task_dataset(keys_table(pending), self.resources.block_rows)
        self.stream_pool(work, EvaluateActor, {"settings": settings}, tracker)

    def finish(self, report: PartConsolidation, selected: list[TaskKey]) -> dict[str, str]:
        """The evaluation report of the selected patients that were scored (``evaluation.json`` and ``.md``)."""
        from vista.display import load_variables
        from vista.evaluation.cohort import cohort_report

        rows = read_rows(report.path, (key.subject_id for key in selected))
        self.unscored = {row.subject_id: row.error or "unknown error" for row in rows if row.status == "error"}
        settings = self.settings
        self.report = cohort_report([p for row in rows if (p := row.patient()) is not None],
                                    load_variables(settings.variables), judge_model=settings.llm.model,
                                    threshold=settings.threshold, n_resamples=self.args.resamples)
        if self.report is None:
            return {}
        return {name: str(path) for name, path in self.report.write(settings.out).items()}


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job (`jobs.runner.run_job`), then the patients not scored and the report's table."""
    console = console or Console(width=110)
    job = EvaluateJob(args, new_run_id())
    summary = run_job(job, console)
    unscored = sorted(job.unscored.items())
    for sid, error in unscored[:SHOWN_UNSCORED]:
        console.print(f"subject {sid}: not evaluated: {error}", markup=False, highlight=False, soft_wrap=True)
    if len(unscored) > SHOWN_UNSCORED:
        console.print(f"... and {len(unscored) - SHOWN_UNSCORED} more (their rows in {EVALUATED_FILE} say why)",
                      highlight=False)
    if job.report is not None:
        console.print(job.report.to_table())
        console.print(f"wrote {Path(summary.outputs['evaluation'])} and evaluation.md", highlight=False)
    return summary


def main(argv: list[str] | None = None, prog: str = "python -m jobs.evaluate") -> int:
    """Exit status: 0 every patient scored; 3 some not, or some judge calls failed; 1 some have no row yet."""
    return job_main(lambda: build_parser(prog), run, argv, RunSummary.exit_status)


if __name__ == "__main__":
    sys.exit(main())
