"""`JudgeReport`: win/tie/loss rates per rubric with CIs, position bias and order agreement, ready for JSON.

Rates are from run A's side and average the two candidate orders (each patient contributes two verdicts per
rubric), as the paper reports them; ``score`` is the mean of win = 1, tie = 0.5, loss = 0. Patients whose judge call
failed in either order are left out of the rates and counted in ``n_failed``.

Position bias, per rubric and pooled over rubrics:

* ``flip_rate`` – share of patients whose verdict (in terms of runs) changes when the order is swapped;
  ``agreement`` = 1 − flip_rate, and ``order_kappa`` is Cohen's kappa between the two orders' verdicts;
* ``first_share`` – of the decisive verdicts (not ties), the share given to the candidate shown first
  (0.5 = no preference for a position).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from trajonco.judge.pairwise import PairJudgement
from trajonco.judge.rubrics import RUBRICS
from trajonco.judge.runs import Pairing
from trajonco.judge.stats import Kappa, Rate, cohen_kappa, rate_interval

_POINTS = {"a": 1.0, "tie": 0.5, "b": 0.0}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PositionBias(_Model):
    """How much the verdicts depend on the order the candidates were shown in."""

    n: int = Field(description="(patient, rubric) comparisons with both orders answered")
    flips: int = Field(description="comparisons whose verdict changed with the order")
    flip_rate: float | None
    agreement: float | None = Field(description="1 - flip_rate: the verdict is the same in both orders")
    order_kappa: Kappa = Field(description="Cohen's kappa between the verdicts of order ab and order ba")
    decisive: int = Field(description="verdicts (both orders) that are not ties")
    first_share: float | None = Field(description="share of decisive verdicts given to the candidate shown first")


class RubricResult(_Model):
    """One rubric's outcome over the compared patients (run A's wins, ties and losses)."""

    rubric: str
    title: str
    n: int = Field(description="patients with both orders answered")
    win: Rate | None = Field(description="share of verdicts for run A (both orders pooled)")
    tie: Rate | None
    loss: Rate | None = Field(description="share of verdicts for run B")
    score: Rate | None = Field(description="mean of win 1 / tie 0.5 / loss 0")
    bias: PositionBias


class RunInfo(_Model):
    name: str
    path: str


class JudgeReport(_Model):
    """The pairwise comparison of two prediction runs by a judge LLM."""

    run_a: RunInfo
    run_b: RunInfo
    judge_model: str
    judge_backend: str
    horizon_days: int
    reason_chars: int
    answer_tokens: int
    pairing: Pairing
    n_judged: int = Field(description="patients with both orders answered (the rates' n)")
    n_failed: int = Field(description="patients with a failed judge call in either order (left out of the rates)")
    n_cut: int = Field(0, description="patients whose candidates were cut to fit the judge's context")
    judge_calls: int
    prompt_tokens: int
    completion_tokens: int
    level: float
    n_resamples: int
    seed: int
    rubrics: tuple[RubricResult, ...]
    overall_bias: PositionBias = Field(description="position bias pooled over the five rubrics")
    judgements: tuple[PairJudgement, ...]

    def rubric(self, key: str) -> RubricResult:
        for result in self.rubrics:
            if result.rubric == key:
                return result
        raise KeyError(f"no rubric {key!r} in the report")

    def lines(self) -> list[str]:
        """The report in a few plain lines (the CLI prints them)."""
        out = [f"Run A: {self.run_a.name} ({self.run_a.path})", f"Run B: {self.run_b.name} ({self.run_b.path})",
               f"Judge: {self.judge_model} ({self.judge_backend}); both candidate orders per patient; "
               f"{self.level:.0%} CIs by bootstrap over patients ({self.n_resamples} resamples, seed {self.seed})",
               self.pairing.sentence() + (f" {self.n_failed} failed in the judge (left out)." if self.n_failed else "")]
        for r in self.rubrics:
            out.append(f"{r.title:<28} A wins {r.win or '-'}  ties {r.tie or '-'}  B wins {r.loss or '-'}  "
                       f"flips {r.bias.flips}/{r.bias.n}")
        b = self.overall_bias
        out.append(f"Position bias (all rubrics): verdict flips with the order in {b.flips} of {b.n} comparisons"
                   + (f"; first-shown candidate gets {b.first_share:.0%} of decisive verdicts" if b.first_share
                      is not None else "") + f"; order agreement kappa {b.order_kappa}")
        return out


def position_bias(judgements: list[PairJudgement], rubrics: list[str]) -> PositionBias:
    """`PositionBias` over the answered judgements, for the given rubric keys (pooled)."""
    ab, ba, first, decisive = [], [], 0, 0
    for j in judgements:
        if not j.ok:
            continue
        for key in rubrics:
            ab.append(j.orders[0].verdicts[key])
            ba.append(j.orders[1].verdicts[key])
            for order in j.orders:
                shown = order.shown[key]
                if shown != "tie":
                    decisive += 1
                    first += shown == "first"
    flips = sum(x != y for x, y in zip(ab, ba))
    n = len(ab)
    return PositionBias(n=n, flips=flips, flip_rate=flips / n if n else None,
                        agreement=1 - flips / n if n else None, order_kappa=cohen_kappa(ab, ba), decisive=decisive,
                        first_share=first / decisive if decisive else None)


def rubric_result(judgements: list[PairJudgement], key: str, title: str, *, level: float, n_resamples: int,
                  seed: int) -> RubricResult:
    answered = [j for j in judgements if j.ok]
    bias = position_bias(judgements, [key])
    if not answered:
        return RubricResult(rubric=key, title=title, n=0, win=None, tie=None, loss=None, score=None, bias=bias)
    verdicts = [[o.verdicts[key] for o in j.orders] for j in answered]
    twos = [2] * len(answered)

    def rate(values: list[float]) -> Rate:
        return rate_interval(values, twos, level=level, n_resamples=n_resamples, seed=seed)

    return RubricResult(rubric=key, title=title, n=len(answered),
                        win=rate([v.count("a") for v in verdicts]), tie=rate([v.count("tie") for v in verdicts]),
                        loss=rate([v.count("b") for v in verdicts]),
                        score=rate([sum(_POINTS[x] for x in v) for v in verdicts]), bias=bias)


def build_report(judgements: list[PairJudgement], *, run_a: RunInfo, run_b: RunInfo, pairing: Pairing,
                 judge_model: str, judge_backend: str, horizon_days: int, reason_chars: int, answer_tokens: int,
                 level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> JudgeReport:
    """Aggregate the judgements into a `JudgeReport`."""
    rubrics = tuple(rubric_result(judgements, r.key, r.title, level=level, n_resamples=n_resamples, seed=seed)
                    for r in RUBRICS)
    orders = [o for j in judgements for o in j.orders]
    return JudgeReport(
        run_a=run_a, run_b=run_b, judge_model=judge_model, judge_backend=judge_backend, horizon_days=horizon_days,
        reason_chars=reason_chars, answer_tokens=answer_tokens, pairing=pairing,
        n_judged=sum(j.ok for j in judgements), n_failed=sum(not j.ok for j in judgements),
        n_cut=sum(any(o.cut for o in j.orders) for j in judgements), judge_calls=len(orders),
        prompt_tokens=sum(o.prompt_tokens for o in orders), completion_tokens=sum(o.completion_tokens for o in orders),
        level=level, n_resamples=n_resamples, seed=seed, rubrics=rubrics,
        overall_bias=position_bias(judgements, [r.key for r in RUBRICS]), judgements=tuple(judgements))


def read_report(path) -> JudgeReport:
    """A `JudgeReport` from its JSON file (errors name the file)."""
    from pathlib import Path

    from trajonco.judge.errors import read_json_model

    path = Path(path)
    return read_json_model(path, JudgeReport, what="judge report",
                           missing=f"{path}: no judge report (made by `trajonco judge ... --out`)")
