"""Inputs of the cohort evaluation job: a store of stored displays, the generator's truth for them, and clinician
answers for subject 2 (`tests/data/clinician_references.csv`)."""

from __future__ import annotations

import json
from pathlib import Path

from vista.display import TumorBoardDisplay, VariableValue, load_variables
from vista.evaluation import expected_values
from vista.evaluation.expected import EXAMPLE_TRUTH
from vista.shared.synth.ground_truth import OncologyRecord

SPECS = load_variables()
TRUTH = OncologyRecord.model_validate(json.loads(EXAMPLE_TRUTH))
REFERENCES = Path(__file__).parent / "data" / "clinician_references.csv"  # subject 2
JUDGED_KEY = next(s.key for s in SPECS if s.comparison == "judge" and s.headline)
"""A headline variable the judge scores (its value can carry a fail marker)."""


def write_inputs(root: Path, subjects: tuple[int, ...], *, judged_values: dict[int, str] | None = None) -> tuple[Path, Path]:
    """A store with one display per subject (the truth's answers, by "writer-model") and a dataset holding the
    generator's truth; ``judged_values`` replaces `JUDGED_KEY`'s answer of some subjects."""
    store, dataset = root / "store", root / "dataset"
    (store / "display").mkdir(parents=True)
    (dataset / "ground_truth").mkdir(parents=True)
    lines = []
    for sid in subjects:
        record = TRUTH.model_copy(update={"subject_id": sid})
        lines.append(record.model_dump_json())
        answers = {k: e.reference for k, e in expected_values(record, SPECS).items() if e.scorable}
        answers.update({JUDGED_KEY: text for s, text in (judged_values or {}).items() if s == sid})
        values = tuple(VariableValue(key=s.key, value=answers.get(s.key, "Not documented"), origin="llm",
                                     source_refs=("e1",)) for s in SPECS)
        display = TumorBoardDisplay(subject_id=sid, method="vista", model="writer-model", content_hash="h",
                                    values=values, calls=3)
        (store / "display" / f"{sid}.json").write_text(display.model_dump_json())
    (dataset / "ground_truth" / "oncology.jsonl").write_text("\n".join(lines) + "\n")
    return store, dataset


def judge_argv(store: Path, dataset: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    """The job's options for the judge at ``base_url`` (model judge-model, no retries)."""
    return ["--store", str(store), "--truth", str(dataset), "--references", str(REFERENCES), "--out", str(out),
            "--judge-llm", "backend=openai", "--judge-llm", f"base_url={base_url}", "--judge-llm", "model=judge-model",
            "--judge-llm", "max_retries=0", "--resamples", "100", *extra]


def run_job(argv: list[str]):
    """`jobs.evaluate.run` in this process; returns its `RunSummary`."""
    from jobs import evaluate

    return evaluate.run(evaluate.build_parser().parse_args(argv))
