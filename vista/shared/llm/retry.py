"""Retry timing: exponential backoff with full jitter, and reading ``Retry-After`` headers.

>>> import random
>>> policy = RetryPolicy(max_retries=3, budget_s=60.0, base_s=0.5, cap_s=4.0)
>>> [policy.ceiling(n) for n in range(5)]
[0.5, 1.0, 2.0, 4.0, 4.0]
>>> 0 <= policy.backoff(2, random.Random(0)) <= 2.0
True
>>> parse_retry_after("3"), parse_retry_after("soon")
(3.0, None)
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many retries a call gets, within what total time, and how long to back off between them."""

    max_retries: int
    budget_s: float
    base_s: float
    cap_s: float

    def ceiling(self, retry_index: int) -> float:
        """Upper bound of the ``retry_index``-th backoff (0-based): base·2^i, capped."""
        return min(self.cap_s, self.base_s * (2.0**retry_index))

    def backoff(self, retry_index: int, rng: random.Random) -> float:
        """Full jitter: a uniform draw below the ceiling, so synchronized callers spread out."""
        return rng.uniform(0.0, self.ceiling(retry_index))


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP date (None if absent/unreadable)."""
    if value is None:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def retry_after_from_headers(headers: Mapping[str, str]) -> float | None:
    """The cool-down a response asks for: ``retry-after-ms`` (OpenAI) or ``Retry-After``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := lowered.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    return parse_retry_after(lowered.get("retry-after"))
