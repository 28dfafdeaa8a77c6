"""The cohort evaluation job (``python -m jobs.evaluate``) on the session's Ray head: stored displays scored against
generator and clinician truth by a judge endpoint distinct from the display model; a rerun resumes (no new judge
request); a patient whose display cannot be read gets a failed marker naming the file and exit status 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vista.testing.synthetic_server import SyntheticLLMServer
from vista.display import TumorBoardDisplay, VariableValue, load_variables
from vista.evaluation import EvaluationReport, expected_values
from vista.evaluation.expected import EXAMPLE_TRUTH
from vista.synth.ground_truth import OncologyRecord

pytestmark = [pytest.mark.ray, pytest.mark.slow]
SPECS = load_variables()
TRUTH = OncologyRecord.model_validate(json.loads(EXAMPLE_TRUTH))
REFERENCES = Path(__file__).parent / "data" / "clinician_references.csv"  # subject 2


def write_inputs(root: Path, subjects: tuple[int, ...]) -> tuple[Path, Path]:
    store, dataset = root / "store", root / "dataset"
    (store / "display").mkdir(parents=True)
    (dataset / "ground_truth").mkdir(parents=True)
    lines = []
    for sid in subjects:
        record = TRUTH.model_copy(update={"subject_id": sid})
        lines.append(record.model_dump_json())
        answers = {k: e.reference for k, e in expected_values(record, SPECS).items() if e.scorable}
        values = tuple(VariableValue(key=s.key, value=answers.get(s.key, "Not documented"), origin="llm",
                                     source_refs=("e1",)) for s in SPECS)
        display = TumorBoardDisplay(subject_id=sid, method="vista", model="writer-model", content_hash="h",
                                    values=values, calls=3)
        (store / "display" / f"{sid}.json").write_text(display.model_dump_json())
    (dataset / "ground_truth" / "oncology.jsonl").write_text("\n".join(lines) + "\n")
    return store, dataset


def run_job(argv: list[str]):
    from jobs import evaluate

    return evaluate.run(evaluate.build_parser().parse_args(argv))


def test_cohort_evaluation_resumes_and_counts_failures(ray_session, tmp_path):
    store, dataset = write_inputs(tmp_path, (2, 3, 4))
    out = tmp_path / "eval"
    with SyntheticLLMServer(model="judge-model") as server:
        argv = ["--store", str(store), "--truth", str(dataset), "--references", str(REFERENCES), "--out", str(out),
                "--judge-llm", "backend=openai", "--judge-llm", f"base_url={server.base_url}",
                "--judge-llm", "model=judge-model", "--judge-llm", "max_retries=0", "--resamples", "100"]
        first = run_job(argv)
        asked = server.stats.requests
        assert (first.selected, first.skipped, first.done_now, first.failed) == (3, 0, 3, 0) and asked > 0
        report = EvaluationReport.model_validate_json((out / "evaluation.json").read_text())
        assert report.judge_model == "judge-model" and not report.judge_is_display_model
        assert report.method("vista").display_models == ("writer-model",) and report.method("vista").n_patients == 3
        assert any(s.startswith("clinician reference answers") for s in report.truth_sources)
        assert any(s.startswith("generator ground truth") for s in report.truth_sources)
        assert report.patient_info and report.variable("vista", "demographics").unscorable == 3  # no graphs here
        assert "judge-model" in (out / "evaluation.md").read_text()

        again = run_job(argv)  # resume: every patient has its marker, the report is rebuilt, no judge request
        assert (again.skipped, again.done_now) == (3, 0) and server.stats.requests == asked
        assert EvaluationReport.model_validate_json((out / "evaluation.json").read_text()).items == report.items

        (store / "display" / "4.json").write_text("{not json")
        (out / "evaluated" / "04" / "4.json").unlink()
        broken = run_job(argv)
        assert (broken.skipped, broken.failed) == (2, 1)
        from jobs.evaluate import exit_status

        assert exit_status(broken) == 3
        error = json.loads((out / "evaluated" / "04" / "4.failed.json").read_text())["error"]
        assert "4.json" in error and "subject 4" in error
        assert EvaluationReport.model_validate_json((out / "evaluation.json").read_text()).method("vista").n_patients == 2

        from jobs.errors import JobInputError

        with pytest.raises(JobInputError, match="threshold differ"):
            run_job([*argv, "--threshold", "7"])
