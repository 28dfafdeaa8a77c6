"""Run the judge on every pair of answers, in both candidate orders, and map its verdicts back to the runs.

For each patient the judge is asked twice: once with run A's answer shown first (order ``ab``) and once with run
B's shown first (order ``ba``). A verdict "A"/"B" names a position; `OrderJudgement.verdicts` holds it in terms of
the runs ("a", "b", "tie"), so the two orders can be compared: a verdict that changes with the order is position
bias. A failed call is kept with its error (its pair then counts as failed, never as a tie).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trajonco.judge.answer import JudgeAnswer, answer_model, reason_chars_for
from trajonco.judge.prompts import candidate_budget, candidate_text, cut_to_tokens, judge_prompts
from trajonco.judge.rubrics import RUBRIC_KEYS, RunVerdict, ShownVerdict
from trajonco.judge.runs import Pair, PairedRuns

JUDGE_AGENT = "pairwise_judge"
Order = Literal["ab", "ba"]
ORDERS: tuple[Order, Order] = ("ab", "ba")

_SHOWN: dict[str, ShownVerdict] = {"A": "first", "B": "second", "tie": "tie"}


def to_run_verdict(order: Order, shown: ShownVerdict) -> RunVerdict:
    """The run a positional verdict names: in order ``ab`` the first shown is run A, in ``ba`` it is run B.

    >>> to_run_verdict("ab", "first"), to_run_verdict("ba", "first"), to_run_verdict("ba", "tie")
    ('a', 'b', 'tie')
    """
    if shown == "tie":
        return "tie"
    first_is_a = order == "ab"
    return "a" if (shown == "first") == first_is_a else "b"


class OrderJudgement(BaseModel):
    """The judge's answer for one patient in one candidate order (or the error that stopped it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    order: Order = Field(description="ab: run A shown first (as 'A'); ba: run B shown first")
    error: str | None = Field(None, description="why the call failed (no verdicts then)")
    shown: dict[str, ShownVerdict] = Field(default_factory=dict, description="per rubric, by position")
    verdicts: dict[str, RunVerdict] = Field(default_factory=dict, description="per rubric, by run")
    reasons: dict[str, str] = Field(default_factory=dict)
    cut: bool = Field(False, description="a candidate was cut to fit the judge's context")
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


class PairJudgement(BaseModel):
    """Both orders' judgements of one patient."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_id: int
    prediction_time: datetime | None
    cancer: str
    label: bool | None
    timeline_tokens: int | None = None
    orders: tuple[OrderJudgement, OrderJudgement]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.orders)

    def consensus(self, rubric: str) -> RunVerdict | None:
        """The verdict both orders give; "tie" when they disagree (an order-dependent verdict); None if a call
        failed."""
        if not self.ok:
            return None
        first, second = (o.verdicts[rubric] for o in self.orders)
        return first if first == second else "tie"


def _order_judgement(order: Order, result, cut: bool) -> OrderJudgement:
    usage = result.usage
    tokens = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
    if not result.ok:
        return OrderJudgement(order=order, error=f"{result.error.kind.value}: {result.error}", cut=cut, **tokens)
    answer: JudgeAnswer = result.output
    verdicts = answer.verdicts()
    shown = {key: _SHOWN[v.winner] for key, v in verdicts.items()}
    return OrderJudgement(order=order, shown=shown, verdicts={k: to_run_verdict(order, s) for k, s in shown.items()},
                          reasons={k: v.reason for k, v in verdicts.items()}, cut=cut, **tokens)


async def judge_pair(gateway, pair: Pair, horizon_days: int, *, reason_chars: int, answer_tokens: int,
                     budget: int) -> PairJudgement:
    """Both orders of one pair (the two calls run concurrently, within the gateway's limits)."""
    from vista.shared.llm import system, user

    model = answer_model(reason_chars)
    (text_a, cut_a), (text_b, cut_b) = (cut_to_tokens(candidate_text(c), budget) for c in (pair.a, pair.b))
    calls = []
    for order in ORDERS:
        first, second = (text_a, text_b) if order == "ab" else (text_b, text_a)
        system_text, user_text = judge_prompts(pair.a.cancer, horizon_days, pair.a.label, first, second)
        calls.append(gateway.complete([system(system_text), user(user_text)], model, agent=JUDGE_AGENT,
                                      patient_id=pair.a.subject_id, max_tokens=answer_tokens))
    results = await asyncio.gather(*calls)
    orders = tuple(_order_judgement(order, r, cut_a or cut_b) for order, r in zip(ORDERS, results))
    return PairJudgement(subject_id=pair.a.subject_id, prediction_time=pair.a.prediction_time, cancer=pair.a.cancer,
                         label=pair.a.label, timeline_tokens=pair.a.timeline_tokens, orders=orders)


async def judge_runs(gateway, paired: PairedRuns, *, reason_chars: int | None = None,
                     answer_tokens: int | None = None) -> list[PairJudgement]:
    """Judge every pair of ``paired`` in both orders; the answer budget and reason length fit the gateway's model.

    ``answer_tokens`` defaults to the gateway's ``max_tokens``; ``reason_chars`` to the longest reason whose
    worst-case answer fits it (`reason_chars_for`).
    """
    answer_tokens = answer_tokens or gateway.config.max_tokens
    reason_chars = reason_chars or reason_chars_for(answer_tokens)
    if not paired.pairs:
        return []
    await gateway.discover_context_tokens()
    budget = candidate_budget(gateway.context_tokens, answer_tokens, paired.pairs[0].a.cancer, paired.horizon_days)
    return list(await asyncio.gather(*(judge_pair(gateway, pair, paired.horizon_days, reason_chars=reason_chars,
                                                  answer_tokens=answer_tokens, budget=budget)
                                       for pair in paired.pairs)))


assert set(RUBRIC_KEYS) == set(answer_model(20).model_fields), "rubrics and the answer model must agree"
