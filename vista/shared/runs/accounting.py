"""What a run's LLM calls really cost: the endpoint's answers as the job's budget counted them (its ledger), set
against the usage recorded in the rows the output kept, and where the cache hits came from.

Every request an actor sends passes the job's budget (`vista.shared.llm._budget`, one for the whole job), which adds the tokens of every
answer, so its ledger is what the endpoint answered — and billed — even when the row of the patient that asked is
lost with its actor or node: that patient runs again, its answers now come from the response cache (0 tokens in
its new row), and the rows alone would under-count the bill. The summary therefore shows both figures and their
difference, named for what it is:

>>> ledger = TokenFigures(prompt_tokens=2_000, completion_tokens=420, cost_usd=0.0031)
>>> kept = TaskUsage(calls=12, cache_hits=3, prompt_tokens=1_300, completion_tokens=300, cost_usd=0.0020)
>>> acct = LLMAccounting.of(ledger, kept, endpoint_prompt_cache_tokens=0)
>>> acct.source, acct.paid_for_rows_lost_and_rerun.tokens, acct.paid_for_rows_lost_and_rerun.cost_usd
('ledger', 820, 0.0011)
>>> LLMAccounting.of(None, kept, endpoint_prompt_cache_tokens=0).source  # no budget (no LLM stage): the rows
'rows'

Cache hits are this output's only when its response cache lives in the output folder (the default
``OUT/llm_cache``); hits from a cache folder the user named elsewhere (``--cache-dir``, ``VISTA_LLM_CACHE_DIR``,
shared by several outputs) are counted apart, and an endpoint's own prompt-prefix cache (the embedded model's,
a provider's cached prompt tokens) is never a cache hit:

>>> cache_origin("/data/out/llm_cache", "/data/out"), cache_origin("/shared/cache", "/data/out"), cache_origin(None, "/o")
('output', 'shared', None)
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from vista.shared.llm import LLMConfig
from vista.shared.llm.job_flow import BudgetStats
from vista.shared.llm.prices import PriceTable
from vista.shared.llm.task_usage import TaskUsage
from vista.shared.storage import is_remote, normalize


class TokenFigures(BaseModel):
    """Prompt and completion tokens and their cost (None: the model has no price)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def of_ledger(cls, stats: BudgetStats, prices: PriceTable, model: str) -> TokenFigures:
        """The budget's ledger priced like the gateway prices each call (cached prompt tokens at the cached rate)."""
        prompt, completion = stats.prompt_tokens_used, stats.completion_tokens_used
        cost = prices.cost(model, prompt_tokens=prompt, completion_tokens=completion,
                           cached_prompt_tokens=stats.cached_prompt_tokens_used)
        return cls(prompt_tokens=prompt, completion_tokens=completion, cost_usd=None if cost is None else round(cost, 6))


class LLMAccounting(BaseModel):
    """This run's tokens and cost, from the two sources that count them, and their difference."""

    source: Literal["ledger", "rows"] = Field(description="which figures the summary's prompt_tokens, "
                                              "completion_tokens and cost_usd are: the endpoint's answers as the job's "
                                              "LLM budget counted them (ledger), or the rows (no budget ran)")
    answered_by_endpoint_ledger: TokenFigures | None = Field(
        description="tokens answered by the endpoint (ledger): every answer of this run, counted by the job's LLM "
        "budget actor as it arrived — what the endpoint bills (None: no budget ran)")
    in_rows_kept: TokenFigures = Field(description="tokens in rows kept: the usage recorded in this run's rows of "
                                       "the output (a task run again keeps its newest row only)")
    paid_for_rows_lost_and_rerun: TokenFigures | None = Field(
        description="ledger minus rows kept: answers paid for whose row was lost (an actor or node died before "
        "writing it, the task ran again from the cache) or never written (a stopped job)")
    endpoint_prompt_cache_tokens: int = Field(0, description="prompt tokens the endpoint served from its own "
                                              "prompt-prefix cache (included above; not response-cache hits)")

    @classmethod
    def of(cls, ledger: TokenFigures | None, kept: TaskUsage, *, endpoint_prompt_cache_tokens: int) -> LLMAccounting:
        rows = TokenFigures(prompt_tokens=kept.prompt_tokens, completion_tokens=kept.completion_tokens,
                            cost_usd=round(kept.cost_usd, 6))
        lost = None
        if ledger is not None:
            cost = (None if ledger.cost_usd is None or rows.cost_usd is None
                    else round(max(ledger.cost_usd - rows.cost_usd, 0.0), 6))
            lost = TokenFigures(prompt_tokens=max(ledger.prompt_tokens - rows.prompt_tokens, 0),
                                completion_tokens=max(ledger.completion_tokens - rows.completion_tokens, 0),
                                cost_usd=cost)
        return cls(source="rows" if ledger is None else "ledger", answered_by_endpoint_ledger=ledger,
                   in_rows_kept=rows, paid_for_rows_lost_and_rerun=lost,
                   endpoint_prompt_cache_tokens=endpoint_prompt_cache_tokens)

    @property
    def billed(self) -> TokenFigures:
        """The figures the summary reports as the run's tokens and cost."""
        return self.answered_by_endpoint_ledger if self.answered_by_endpoint_ledger is not None else self.in_rows_kept


def cache_origin(cache_dir: str | Path | None, out: str | Path) -> Literal["output", "shared"] | None:
    """Whether the response cache is this output's (inside ``out``) or a shared one elsewhere (None: no cache)."""
    if cache_dir is None:
        return None
    cache, root = normalize(cache_dir), normalize(out)
    if is_remote(cache) != is_remote(root):
        return "shared"
    cache, root = cache.partition("?")[0].rstrip("/"), root.partition("?")[0].rstrip("/")
    return "output" if cache == root or cache.startswith(root + "/") else "shared"


def summary_figures(ledger: BudgetStats | None, usage: TaskUsage, *, llm: LLMConfig | None,
                    out: str | Path) -> dict[str, object]:
    """The `vista.shared.runs.summary.RunSummary` fields of a run's LLM accounting, from the budget's final ledger (None: no
    budget ran) and the usage of the rows kept (`vista.shared.runs.parts.RunLLMRows.kept`): ``prompt_tokens``,
    ``completion_tokens`` and ``cost_usd`` are the ledger's when there is one; cache hits are split by origin."""
    answered = None
    if ledger is not None and llm is not None:
        answered = TokenFigures.of_ledger(ledger, PriceTable.load(llm.prices_path), llm.model)
    accounting = LLMAccounting.of(answered, usage, endpoint_prompt_cache_tokens=(
        ledger.cached_prompt_tokens_used if ledger is not None else 0))
    billed = accounting.billed
    origin = cache_origin(llm.cache_dir if llm is not None else None, out)
    return {
        "llm_calls": usage.calls,
        "cache_hits": usage.cache_hits if origin == "output" else 0,
        "shared_cache_hits": usage.cache_hits if origin == "shared" else 0,
        "shared_cache": str(llm.cache_dir) if origin == "shared" and llm is not None else None,
        "prompt_tokens": billed.prompt_tokens, "completion_tokens": billed.completion_tokens,
        "cost_usd": billed.cost_usd if billed.cost_usd is not None else 0.0,
        "unpriced_calls": usage.unpriced_calls,
        "llm_accounting": accounting,
    }
