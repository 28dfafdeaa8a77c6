"""Request priority: which waiting request a budget serves first when its slots are all taken.

A patient's calls are sequential, so a cohort job ends when its longest chain does. Served first come, first served,
that chain's every call waits behind the calls of shorter patients that run beside it (at 64 in flight, 1,000
patients, 40 patients per actor over 32 slots: 134 s for a 202-call chain whose answers took 101 s). Served
*longest remaining chain first*, it never waits while shorter ones absorb the queueing, and the job ends nearer
its bound.

A pipeline says how many calls its task has left with `chain_calls` (a context manager: the value follows the
task's coroutines, and the gateway counts one call off after each `complete`); the gateway reads it with
`request_priority` and hands it to every budget it asks. No chain set: priority 0, and equals are served in order.

>>> with chain_calls(3):
...     first = request_priority()
...     call_done(); call_done()
...     left = request_priority()
>>> first, left, request_priority()
(3.0, 1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["call_done", "chain_calls", "request_priority"]


@dataclass(slots=True)
class _Chain:
    calls_left: int


_CHAIN: ContextVar[_Chain | None] = ContextVar("vista_llm_chain", default=None)


@contextmanager
def chain_calls(calls: int) -> Iterator[None]:
    """Within the block, this task's requests are served as a chain with ``calls`` calls left (an estimate)."""
    token = _CHAIN.set(_Chain(max(0, int(calls))))
    try:
        yield
    finally:
        _CHAIN.reset(token)


def request_priority() -> float:
    """The priority of the current task's next request: its chain's calls left (0 outside any chain)."""
    chain = _CHAIN.get()
    return float(chain.calls_left) if chain is not None else 0.0


def call_done() -> None:
    """One call of the current chain is over (answered or failed for good)."""
    chain = _CHAIN.get()
    if chain is not None and chain.calls_left > 0:
        chain.calls_left -= 1
