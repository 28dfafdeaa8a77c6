"""Evaluation of tumor-board displays (VISTA and the RAG baseline) against the truth: the generator's records or a
clinician's reference answers (`load_reference_answers`, CSV or JSON).

`expected_values` turns an `OncologyRecord` into the reference answer of every variable (or says why it cannot);
`ClinicianCase` does the same from a clinician's answers;
the ``exact``/``date``/``set`` comparisons are scored by rule (`vista.evaluation.scorers`), ``judge`` comparisons
by an LLM judge on a 0–10 rubric (`JudgeScore`, its own `LLMGateway`); `evaluate` returns an `EvaluationReport`
with per-variable and overall accuracy, mean scores and patient-bootstrap 95% CIs, VISTA and RAG side by side
(`to_table`, `to_markdown`), naming the LLM that wrote each method's displays and the judge LLM.
`vista.evaluation.cohort` scores a stored cohort patient by patient and gathers the report from the patients'
results (`vista evaluate-cohort`, whose per-patient rows are `vista.evaluation.cohort_rows`).
"""

from vista.shared.bootstrap import Interval, paired_difference, patient_interval
from vista.evaluation.answer import Expected, TruthSource
from vista.evaluation.errors import EvaluationError
from vista.evaluation.evaluate import DEFAULT_THRESHOLD, evaluate, judge_is_display_model, score_items, summarize
from vista.evaluation.expected import RULES, expected_values
from vista.evaluation.judge import JudgeScore, judge_messages, judge_prompt, judge_value
from vista.evaluation.normalize import find_dates, normalize_site, normalize_text, says_nothing, split_sites
from vista.evaluation.references import ClinicianCase, ReferenceAnswer, load_reference_answers
from vista.evaluation.report import EvaluationReport, ItemScore, MethodResult, VariableResult
from vista.evaluation.scorers import SCORERS, RuleScore, score_date, score_exact, score_set
from vista.evaluation.truth import TruthCase, load_oncology_truths

__all__ = [
    "ClinicianCase", "ReferenceAnswer", "TruthSource", "judge_is_display_model", "load_reference_answers",
    "DEFAULT_THRESHOLD", "EvaluationError", "EvaluationReport", "Expected", "Interval", "ItemScore", "JudgeScore",
    "MethodResult", "RULES", "RuleScore", "SCORERS", "TruthCase", "VariableResult", "evaluate", "expected_values",
    "find_dates", "judge_messages", "judge_prompt", "judge_value", "load_oncology_truths", "normalize_site",
    "normalize_text", "paired_difference", "patient_interval", "says_nothing", "score_date", "score_exact",
    "score_items", "score_set", "split_sites", "summarize",
]
