"""Flow control for jobs: the one door to the LLM package's private budget, breaker and pacing modules.

A pipeline never sees flow control: the gateway applies its own limits (``max_concurrency``, ``qps`` of
`LLMConfig`), and a pipeline only says how long its chain is (`vista.shared.llm.chain_calls`). A cohort job adds one
budget for the whole job, run as a service (`BudgetService`, in a Ray actor: `jobs.llm_budget`) that every actor's
gateway asks through a `RemoteBudget` (handed to `vista.shared.llm.open_gateway` as ``shared_budget``); its figures
(`BudgetStats`) go into the run's summary (`vista.shared.runs`). Jobs are the only legitimate user of the budget
service, and `vista.shared.runs` the only other reader of its figures; an import-linter contract in pyproject.toml
keeps the pipelines and the VISTA system off this module and the private ones behind it
(``vista.shared.llm._budget``, ``_window``, ``_breaker``, ``_pacing``, ``_priority``, ``_shared_budget``).

>>> from vista.shared.llm import LLMConfig
>>> limits = budget_limits(LLMConfig(timeout_s=60), in_flight=8, requests_per_s=4.0)
>>> limits.max_in_flight, limits.requests_per_s
(8, 4.0)
"""

from vista.shared.llm._breaker import BreakerPolicy
from vista.shared.llm._budget import BudgetLimits, BudgetStats
from vista.shared.llm._shared_budget import (
    BudgetGone,
    BudgetReply,
    BudgetService,
    BudgetTransport,
    RemoteBudget,
    Reports,
    budget_limits,
)

__all__ = [
    "BreakerPolicy",
    "BudgetGone",
    "BudgetLimits",
    "BudgetReply",
    "BudgetService",
    "BudgetStats",
    "BudgetTransport",
    "RemoteBudget",
    "Reports",
    "budget_limits",
]
