"""Pairwise LLM-as-judge comparison of two TrajOnco prediction runs (the paper's five rubrics, both orders).

`load_run` reads a ``jobs.predict`` run, `pair_runs` keeps the patients both runs answered, `judge_runs` asks the
judge in both candidate orders and `build_report` aggregates a `JudgeReport` (win/tie/loss per rubric with patient
bootstrap CIs, position bias, order agreement). `compare_runs` does all of it; the CLI is `trajonco judge`
(`trajonco.judge.cli.add_parser`).
"""

from trajonco.judge.compare import compare_loaded, compare_runs
from trajonco.judge.errors import EvaluationInputError
from trajonco.judge.pairwise import OrderJudgement, PairJudgement, judge_runs
from trajonco.judge.report import JudgeReport, PositionBias, RubricResult, build_report, read_report
from trajonco.judge.rubrics import RUBRIC_KEYS, RUBRICS, Rubric
from trajonco.judge.runs import Pairing, Run, RunFileError, load_run, pair_runs
from trajonco.judge.stats import Kappa, Rate, cohen_kappa, rate_interval

__all__ = [
    "EvaluationInputError", "JudgeReport", "Kappa", "OrderJudgement", "PairJudgement", "Pairing", "PositionBias",
    "RUBRICS", "RUBRIC_KEYS", "Rate", "Rubric", "RubricResult", "Run", "RunFileError", "build_report",
    "cohen_kappa", "compare_loaded", "compare_runs", "judge_runs", "load_run", "pair_runs", "rate_interval",
    "read_report",
]
