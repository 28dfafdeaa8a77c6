"""Pairwise LLM-as-judge comparison of two TrajOnco prediction runs (the paper's five rubrics, both orders).

`load_run` reads a ``jobs.predict`` run, `pair_runs` keeps the patients both runs answered, `judge_runs` asks the
judge in both candidate orders and `build_report` aggregates a `JudgeReport` (win/tie/loss per rubric with patient
bootstrap CIs, position bias, order agreement). `compare_runs` does all of it; the CLI is `trajonco judge`
(`trajonco.judge.cli.add_parser`).

Names load on first use (module ``__getattr__``), so the CLI's parser imports nothing heavy.
"""

from __future__ import annotations

from vista.shared.lazy import lazy_attributes

_EXPORTS = {
    "EvaluationInputError": "trajonco.judge.errors",
    "JudgeReport": "trajonco.judge.report",
    "Kappa": "trajonco.judge.stats",
    "OrderJudgement": "trajonco.judge.pairwise",
    "PairJudgement": "trajonco.judge.pairwise",
    "Pairing": "trajonco.judge.runs",
    "PositionBias": "trajonco.judge.report",
    "RUBRICS": "trajonco.judge.rubrics",
    "RUBRIC_KEYS": "trajonco.judge.rubrics",
    "Rate": "trajonco.judge.stats",
    "Rubric": "trajonco.judge.rubrics",
    "RubricResult": "trajonco.judge.report",
    "Run": "trajonco.judge.runs",
    "RunFileError": "trajonco.judge.runs",
    "build_report": "trajonco.judge.report",
    "cohen_kappa": "trajonco.judge.stats",
    "compare_loaded": "trajonco.judge.compare",
    "compare_runs": "trajonco.judge.compare",
    "judge_runs": "trajonco.judge.pairwise",
    "load_run": "trajonco.judge.runs",
    "pair_runs": "trajonco.judge.runs",
    "rate_interval": "trajonco.judge.stats",
    "read_report": "trajonco.judge.report",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS)
