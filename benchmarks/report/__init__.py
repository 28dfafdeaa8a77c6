"""The TrajOnco benchmark reproduction report: cohorts, baselines, agents, sensitivity analyses, latency and cost.

``reproduce(ReportSettings(out=...), agent_runner=...)`` writes ``report.html`` (one self-contained file with
embedded figures), ``results.json`` (every number) and ``figures/*.png``. ``python -m jobs.report`` is the
command-line entry point that also runs the agents through ``jobs.predict``.

Modules: `settings` (what a report covers), `dataset` (synthetic or given MEDS data), `cohort_tasks` and
`parallel` (per-cohort work in worker processes), `timelines` (XML sizes, left-truncation windows),
`characteristics` (Table 1), `predictions` (prediction files as models), `profile` (latency/cost, Pareto front),
`record_length` (token/visit count alone as a score), `paired` (agents vs baselines on the same patients),
`agent_sensitivity` (the agents per truncation budget and per gap),
`realism` (the plain-words verdict), `palette` (one colour per model), `figures`, `tables`, `html`, `sections`
(core sections; extra ones via ``reproduce(extra_sections=...)``), `reproduce` (orchestration).
"""

from benchmarks.report.errors import ReportError, ReportInputError
from benchmarks.report.profile import pareto_front
from benchmarks.report.report_data import AgentRequest, AgentRun, AgentRunner, ReportResults
from benchmarks.report.reproduce import ReportOutcome, load_results, reproduce
from benchmarks.report.sections import SECTION_IDS
from benchmarks.report.settings import PredictionSource, ReportSettings

__all__ = [
    "SECTION_IDS",
    "AgentRequest",
    "AgentRun",
    "AgentRunner",
    "PredictionSource",
    "ReportError",
    "ReportInputError",
    "ReportOutcome",
    "ReportResults",
    "ReportSettings",
    "load_results",
    "pareto_front",
    "reproduce",
]
