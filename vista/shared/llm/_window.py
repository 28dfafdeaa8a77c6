"""`ConcurrencyWindow`: how many requests may be in flight *now*, adapted within the configured budget (AIMD), and
when a burst of 429s means the whole job should pause.

The policy (what `vista.shared.llm._budget.RequestBudget` does with every request's outcome):

* **A 429's Retry-After is a hint for that request.** The request that got it sleeps Retry-After before its retry
  (the gateway's retry loop); the others keep going.
* **Multiplicative decrease, once per episode, as deep as the refusals are many.** A 429 or a timeout (of a
  request sent while at least half the window was in use: an unused window is not what the provider refused) opens
  an *episode* of ``max(Retry-After, smoothed latency)`` seconds and shrinks the window once (never below
  ``min_in_flight``). A timeout shrinks it to ``decrease`` × window. A 429 shrinks it by ``refusal_gain`` times the
  share of recent requests the provider refused (a moving average over about ``1 / share_weight`` outcomes, 429 or
  answer), never below ``decrease`` × window, which an episode that turns into a burst (see below) gets. So a
  sporadic 429 among many answers (a provider a little over its limit now and then, or the benchmark's random 8%)
  costs a few percent of one window, not a quarter, and a provider at a hard limit is met at it. Measured on the
  budget's own test harness (virtual time): 8% of requests refused at random, budget 64: window mean 61 (52 with a
  fixed ×0.75 cut); a provider serving 200 at once, budget 256: 389 of the ideal 400 answers/s, 2% of requests
  refused, window mean 200 (×0.75: 359 answers/s, window 176; a gain of 1: 391 answers/s but 11% refused). Further
  429s of an episode shrink it no further, save that a burst gets the full cut: N simultaneous 429s shrink the
  window once, not N times.
* **Additive increase.** Each answer (valid or not: the endpoint took the request) while the window is in use (at
  least half of it in flight) grows it by ``increase`` / window, i.e. about ``increase`` slots per window's worth of
  answers, up to the budget. A steady trickle of 429s from a provider near its limit thus settles the window just
  under the limit, and a quiet endpoint gets the whole budget back within a few round trips.
* **A job-wide pause only when the limit is far exceeded.** When an episode collects ``burst_min`` 429s and at
  least ``burst_share`` of the window it began with, or when a single Retry-After is ``long_pause_s`` or more (a
  provider asking for minutes is closing the door, not pacing a request), every caller pauses until the latest
  Retry-After deadline of the episode. Overlapping pauses merge into one (counted once, ending at the latest
  deadline), never add up.

The window's figures — min, time-weighted mean, final, decreases, and a bounded series of ``(t, limit, in_flight)``
samples — go to the budget's `BudgetStats`.

>>> window = ConcurrencyWindow(budget=8)
>>> window.on_congestion(now=1.0, sent_at=0.5, retry_after_s=2.0, rate_limited=True, in_flight=8), window.limit
(None, 7)
>>> window.on_congestion(now=1.1, sent_at=0.6, retry_after_s=2.0, rate_limited=True), window.limit  # same burst
(None, 7)
>>> window.on_congestion(now=1.2, sent_at=0.7, retry_after_s=2.0, rate_limited=True)  # 3 of 8: not yet half
>>> window.on_congestion(now=1.3, sent_at=0.8, retry_after_s=5.0, rate_limited=True)  # 4 of 8: pause till 6.3
5.0
>>> for _ in range(12):  # the rest of the burst: the refusals weigh enough for the full cut (x0.75), once
...     _ = window.on_congestion(now=1.4, sent_at=0.9, retry_after_s=5.0, rate_limited=True)
>>> window.limit, window.figures(now=2.0).decreases
(6, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WindowPolicy:
    """The knobs of the policy above (the defaults serve OpenAI-style providers and vLLM alike)."""

    decrease: float = 0.75  # the window after a timeout episode (and the least after a 429 one), as a share of before
    share_weight: float = 1 / 32  # weight of each outcome (1 refused, 0 answered) in the moving share of 429s
    refusal_gain: float = 1.5  # a 429 episode's cut: this many times the share refused (at most down to `decrease`)
    increase: float = 8.0  # slots gained per window's worth of answers
    min_in_flight: int = 1
    burst_min: int = 2  # 429s in one episode before the whole job pauses ...
    burst_share: float = 0.5  # ... and at least this share of the window the episode began with
    long_pause_s: float = 30.0  # a single Retry-After this long pauses the job at once
    rtt_weight: float = 0.125  # weight of a new latency in the smoothed latency (as TCP's SRTT)
    sample_every_s: float = 2.0  # the series' first resolution (doubled whenever it fills up)
    max_samples: int = 120

    def __post_init__(self) -> None:
        if (not 0 < self.decrease < 1 or not 0 < self.share_weight <= 1 or self.refusal_gain <= 0 or self.increase <= 0
                or self.min_in_flight < 1 or not 0 < self.burst_share <= 1):
            raise ValueError(f"invalid window policy {self}")


@dataclass(frozen=True, slots=True)
class WindowSample:
    """One point of the in-flight series: seconds since the first request, the window then, requests in flight."""

    t: float
    in_flight_limit: int | None
    in_flight: int


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """What the window did (all None/0 when the budget has no in-flight limit to adapt)."""

    limit: int | None  # the window now
    limit_min: int | None
    limit_mean: float | None  # time-weighted, from the first request on
    decreases: int  # episodes that shrank the window
    samples: tuple[WindowSample, ...]


class ConcurrencyWindow:
    """The window and its episodes (see the module docstring). Pure bookkeeping on times the caller passes in."""

    def __init__(self, budget: int | None, *, policy: WindowPolicy | None = None):
        self.budget = budget
        self.policy = policy or WindowPolicy()
        self._window = float(budget) if budget is not None else math.inf
        self._srtt: float | None = None
        self._refused_share = 0.0  # moving share of 429s among recent outcomes (429 or answer)
        self._episode_start = -math.inf
        self._episode_end = -math.inf
        self._episode_base = 0.0  # the window (or the requests in flight, without a budget) when the episode began
        self._episode_429s = 0
        self._episode_cuts = False  # the episode's window was in use: its 429s and timeouts shrink it
        self._episode_shrunk = False
        self._episode_deadline = -math.inf
        self._decreases = 0
        self._min = budget
        self._area = 0.0
        self._origin: float | None = None
        self._last_change = 0.0
        self._samples: list[WindowSample] = []
        self._sample_every = self.policy.sample_every_s
        self._next_sample = -math.inf

    @property
    def limit(self) -> int | None:
        """Requests that may be in flight now (None: no in-flight limit)."""
        return None if self.budget is None else max(self.policy.min_in_flight, int(self._window))

    def on_answer(self, *, now: float, latency_s: float | None, in_flight: int) -> None:
        """An answer came back (``in_flight``: requests in flight before it): learn its latency, grow the window."""
        self._refused_share += self.policy.share_weight * (0.0 - self._refused_share)
        if latency_s is not None and latency_s >= 0:
            w = self.policy.rtt_weight
            self._srtt = latency_s if self._srtt is None else (1 - w) * self._srtt + w * latency_s
        if self.budget is not None and self._window < self.budget and 2 * in_flight >= self._window:
            self._set(now, min(float(self.budget), self._window + self.policy.increase / self._window))

    def on_congestion(self, *, now: float, sent_at: float | None, retry_after_s: float | None,
                      rate_limited: bool, in_flight: int = 0) -> float | None:
        """A 429 (``rate_limited``) or a timeout of a request sent at ``sent_at`` (None: unknown) with ``in_flight``
        requests in flight; returns the job-wide pause to start now (seconds), or None when the window's decrease is
        enough. A window less than half in use is not shrunk (it is not what the provider refused)."""
        retry = max(0.0, retry_after_s or 0.0)
        if rate_limited:
            self._refused_share += self.policy.share_weight * (1.0 - self._refused_share)
        fresh = sent_at is None or sent_at >= self._episode_start
        if now >= self._episode_end and fresh:  # a new episode: the window shrinks once in it
            self._episode_start, self._episode_429s, self._episode_deadline = now, 0, -math.inf
            self._episode_end = now + max(retry, self._srtt or 0.0)
            self._episode_base = self._window if self.budget is not None else float(max(in_flight, 1))
            self._episode_cuts = self.budget is not None and 2 * in_flight >= self._window  # (unused: not refused)
            self._episode_shrunk = False
            if not rate_limited:
                self._shrink(now, self.policy.decrease)
        if not rate_limited:
            return None
        if now >= self._episode_end and not fresh:  # a late answer to a request of an episode already over
            self._episode_deadline = max(self._episode_deadline, now + retry)
            return retry if retry >= self.policy.long_pause_s else None
        self._episode_429s += 1
        self._episode_deadline = max(self._episode_deadline, now + retry)
        burst = self._episode_429s >= max(self.policy.burst_min, math.ceil(self.policy.burst_share * self._episode_base))
        if burst:  # most of the window refused: the full cut
            self._shrink(now, self.policy.decrease)
        elif self._episode_429s == 1:  # the episode's first 429: a cut as deep as the share of recent refusals
            self._shrink(now, max(self.policy.decrease, 1.0 - self.policy.refusal_gain * self._refused_share))
        if retry >= self.policy.long_pause_s or burst:
            pause = self._episode_deadline - now
            return pause if pause > 0 else None
        return None

    def _shrink(self, now: float, factor: float) -> None:
        """The window at most ``factor`` x the one the episode began with (one decrease counted per episode)."""
        if not self._episode_cuts:
            return
        target = max(float(self.policy.min_in_flight), self._episode_base * factor)
        if target < self._window:
            self._set(now, target)
            self._decreases += not self._episode_shrunk
            self._episode_shrunk = True

    def sample(self, now: float, in_flight: int) -> None:
        """Record ``(t, limit, in_flight)`` when the series is due a point (the caller calls this on every change)."""
        if self._origin is None:
            self._origin = self._last_change = now
        if now < self._next_sample:
            return
        self._samples.append(WindowSample(round(now - self._origin, 3), self.limit, in_flight))
        self._next_sample = now + self._sample_every
        if len(self._samples) >= self.policy.max_samples:  # keep the whole run, at half the resolution
            self._samples = self._samples[::2]
            self._sample_every *= 2

    def figures(self, now: float) -> WindowFigures:
        if self.budget is None:
            return WindowFigures(None, None, None, self._decreases, tuple(self._samples))
        span = now - self._origin if self._origin is not None else 0.0
        area = self._area + self._clamped() * (now - self._last_change)
        mean = round(area / span, 2) if span > 0 else float(self.limit or 0)
        return WindowFigures(self.limit, self._min, mean, self._decreases, tuple(self._samples))

    def _clamped(self) -> int:
        return self.limit if self.limit is not None else 0

    def _set(self, now: float, window: float) -> None:
        if self._origin is not None:
            self._area += self._clamped() * (now - self._last_change)
            self._last_change = now
        self._window = window
        limit = self.limit
        if limit is not None and (self._min is None or limit < self._min):
            self._min = limit
