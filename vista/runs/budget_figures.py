"""The job-wide LLM budget's figures as the run summary keeps them: the limits, and what the budget allowed
(achieved concurrency, the adaptive window, 429s, pauses, the circuit breaker), from `vista.llm.budget`'s
`BudgetLimits` and final `BudgetStats`.

>>> figures = LLMBudgetFigures(in_flight_limit=48, requests_per_s_limit=None, tokens_per_min_limit=None, requests=900,
...     in_flight_mean=31.5, in_flight_peak=48, waited_s=2.0, rate_limited_429=31, cooldowns=1, cooldown_s=2.0,
...     quota_stops=0, stopped=None, invalid_answers=0, failures=0, tokens_used=9_000, expired_leases=0)
>>> figures.rows()
[('LLM in flight: limit / mean / peak', '48 / 31.5 / 48'), ('429s · job-wide pauses', '31 · 1 (2.0 s paused)')]
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from vista.llm.budget import BudgetLimits, BudgetStats


class InFlightPoint(BaseModel):
    """One sample of the job's in-flight window over time."""

    t: float = Field(description="seconds since the job's first LLM request")
    in_flight_limit: int | None = Field(description="the adaptive window then (429s and timeouts shrink it)")
    in_flight: int = Field(description="requests in flight then")


class LLMBudgetFigures(BaseModel):
    """The job's LLM budget and what it allowed (for the run summary)."""

    in_flight_limit: int | None = Field(description="requests in flight allowed over the whole job (--in-flight)")
    requests_per_s_limit: float | None = Field(description="--requests-per-second (None: no limit)")
    tokens_per_min_limit: int | None = Field(description="--tokens-per-minute (None: no limit)")
    requests: int = Field(description="requests the budget let through (attempts, retries and re-asks included)")
    in_flight_mean: float = Field(description="achieved concurrency: time-weighted mean of requests in flight")
    in_flight_peak: int = Field(description="most requests in flight at once")
    waited_s: float = Field(description="total seconds requests waited for their turn")
    rate_limited_429: int = Field(description="HTTP 429 answers")
    cooldowns: int = Field(description="job-wide pauses: bursts of 429s that refused half the window (or asked for "
                           "30 s or more), each one pause until the burst's latest Retry-After")
    cooldown_s: float = Field(description="seconds during which no actor was allowed to send")
    in_flight_window_min: int | None = Field(None, description="the adaptive in-flight window's lowest value (429s "
                                             "and timeouts shrink it, answers grow it back up to the limit)")
    in_flight_window_mean: float | None = Field(None, description="the window's time-weighted mean")
    in_flight_window_final: int | None = Field(None, description="the window at the end")
    window_decreases: int = Field(0, description="429/timeout episodes that shrank the window (once per burst)")
    in_flight_series: list[InFlightPoint] = Field(default_factory=list, description="(t, window, in flight) every "
                                                  "few seconds over the run (at most 120 points)")
    quota_stops: int = Field(description="1 when the job stopped because the quota was exhausted")
    stopped: str | None = Field(description="why the circuit breaker stopped the job (None: it did not)")
    invalid_answers: int = Field(description="answers that did not validate")
    failures: int = Field(description="requests without an answer")
    tokens_used: int = Field(description="prompt + completion tokens the answers reported")
    expired_leases: int = Field(description="grants reclaimed because their actor never gave them back")

    @classmethod
    def of(cls, limits: BudgetLimits, stats: BudgetStats) -> LLMBudgetFigures:
        return cls(
            in_flight_limit=limits.max_in_flight, requests_per_s_limit=limits.requests_per_s,
            tokens_per_min_limit=limits.tokens_per_min, requests=stats.requests, in_flight_mean=stats.mean_in_flight,
            in_flight_peak=stats.peak_in_flight, waited_s=stats.waited_s, rate_limited_429=stats.rate_limited,
            cooldowns=stats.cooldowns, cooldown_s=stats.cooldown_s, quota_stops=stats.quota_stops,
            stopped=stats.stopped, invalid_answers=stats.invalid_answers, failures=stats.failures,
            tokens_used=stats.tokens_used, expired_leases=stats.expired_leases,
            in_flight_window_min=stats.in_flight_limit_min, in_flight_window_mean=stats.in_flight_limit_mean,
            in_flight_window_final=stats.in_flight_limit, window_decreases=stats.window_decreases,
            in_flight_series=[InFlightPoint(t=p.t, in_flight_limit=p.in_flight_limit, in_flight=p.in_flight)
                              for p in stats.in_flight_series],
        )

    def rows(self) -> list[tuple[str, str]]:
        """The summary table's lines of the budget (the window, 429s and the breaker only when they acted)."""
        rows = [("LLM in flight: limit / mean / peak",
                 f"{self.in_flight_limit or '-'} / {self.in_flight_mean:.1f} / {self.in_flight_peak}")]
        low = self.in_flight_window_min
        if low is not None and (self.window_decreases or low != self.in_flight_limit):
            rows.append(("LLM in-flight window: min / mean / final", f"{low} / {self.in_flight_window_mean or 0:.1f} / "
                         f"{self.in_flight_window_final} ({self.window_decreases:,} decreases)"))
        if self.rate_limited_429 or self.cooldowns:
            rows.append(("429s · job-wide pauses",
                         f"{self.rate_limited_429:,} · {self.cooldowns:,} ({self.cooldown_s:.1f} s paused)"))
        if self.stopped:
            rows.append(("stopped by the circuit breaker", self.stopped))
        return rows
