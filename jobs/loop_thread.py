"""A private asyncio event loop on a background thread, for synchronous Ray Data UDFs that run async pipelines.

Ray Data calls an actor's ``__call__`` synchronously (possibly from two threads at once); the patients of every
call are scheduled as coroutines on this one loop, so they share the actor's LLM gateway, its concurrency limit
and its HTTP connection pool.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever on a daemon thread; `run` submits a coroutine and waits for its result."""

    def __init__(self, name: str = "jobs-loop"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[object, object, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and block the calling thread until it finishes."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()
