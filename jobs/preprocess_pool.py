"""The two-stage variant's preprocessor stage as its own pool of Ray actors, shared by every patient actor.

Each `PreprocessorService` actor holds an LLM gateway and answers preprocessor calls (one chunk's relevance filter
each); it is an async actor, so it serves many calls at once up to its gateway's concurrency limit. A patient actor
running the two-stage pipeline sends each chunk's filter call to the pool through `vista.shared.llm.remote.JobGateway`,
so the C chunks of one patient are filtered in parallel on several actors (and nodes), and the chain continues as
soon as the last filter answers — the paper's latency O(1 + C/q), with no dataset-wide barrier.

No deadlock on small machines: callers *await* the pool's object refs from their event loop (never a blocking
``ray.get`` inside an actor), every actor asks for a fractional CPU, and every call has a timeout after which it
becomes a recorded error (a chunk whose filter failed is kept whole by the pipeline, so a failure costs speed,
never data). An actor that dies is restarted by Ray and its calls retried.
"""

from __future__ import annotations

import asyncio
import logging
import random

from jobs.llm_budget import BudgetRef, job_llm_gateway
from trajonco.agents.results import Stage
from vista.shared.atomic import apply_data_umask
from vista.shared.llm import LLMConfig, LLMGateway
from vista.shared.llm.errors import ErrorKind
from vista.shared.llm.remote import RemoteAnswer, RemoteCall, answer_remote

log = logging.getLogger(__name__)


class PreprocessorService:
    """One preprocessor actor: an LLM gateway answering `RemoteCall`s (created lazily, inside the actor's loop)."""

    def __init__(self, llm: LLMConfig, job_id: str | None = None, budget: BudgetRef | None = None):
        apply_data_umask()  # the LLM cache entries it writes are private (vista.shared.atomic)
        self.llm = llm
        self.job_id = job_id
        self.budget = budget  # the job's shared LLM budget (jobs.llm_budget)
        self._gateway: LLMGateway | None = None
        self.calls = 0

    def _ready_gateway(self) -> LLMGateway:
        if self._gateway is None:
            self._gateway = job_llm_gateway(self.llm, job_id=self.job_id, budget=self.budget)
        return self._gateway

    async def ready(self) -> int | None:
        """Build the gateway (loading an embedded model) and report the model's context window."""
        return await self._ready_gateway().discover_context_tokens()

    async def complete(self, call: RemoteCall) -> RemoteAnswer:
        gateway = self._ready_gateway()
        self.calls += 1
        return await answer_remote(gateway, call)  # a job stopped by its budget travels back as `RemoteAnswer.stopped`

    async def served(self) -> int:
        return self.calls

    async def flush(self) -> None:
        """Hand the job's budget what this actor's gateway still batches (before the pool is shut down)."""
        if self._gateway is not None:
            await self._gateway.flush_limits()


class PreprocessorPool:
    """Handles of the preprocessor actors; `complete` sends a call to the next actor and awaits it with a timeout
    (a `vista.shared.llm.remote.RemoteCompleter` for the calls of ``agent``)."""

    def __init__(self, handles: list, *, model: str, timeout_s: float, agent: str = Stage.PREPROCESS.value):
        if not handles:
            raise ValueError("a preprocessor pool needs at least one actor")
        self.agent = agent
        self.handles = list(handles)
        self.model = model
        self.timeout_s = timeout_s
        self._next = random.randrange(len(self.handles))  # callers start at different actors

    @classmethod
    def start(cls, llm: LLMConfig, *, size: int, num_cpus: float, timeout_s: float, job_id: str | None = None,
              concurrency: int | None = None, budget: BudgetRef | None = None) -> PreprocessorPool:
        """Start ``size`` actors (owned by the driver: they end with it)."""
        import ray

        remote = ray.remote(PreprocessorService).options(
            num_cpus=num_cpus,
            max_concurrency=max(4, 4 * (concurrency or llm.max_concurrency)),
            max_restarts=-1,
            max_task_retries=2,
        )
        handles = [remote.remote(llm, job_id, budget) for _ in range(size)]
        return cls(handles, model=llm.model, timeout_s=timeout_s)

    def wait_ready(self, timeout_s: float = 600.0) -> list[int | None]:
        """Block (on the driver) until every actor has its gateway; raises the actor's error if one cannot start."""
        import ray

        return ray.get([handle.ready.remote() for handle in self.handles], timeout=timeout_s)

    def _pick(self):
        handle = self.handles[self._next % len(self.handles)]
        self._next += 1
        return handle

    async def complete(self, call: RemoteCall) -> RemoteAnswer:
        """Run ``call`` on a pool actor; a timeout or a lost actor becomes a recorded error answer."""
        from ray.exceptions import GetTimeoutError, RayError

        ref = self._pick().complete.remote(call)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.timeout_s)
        except (TimeoutError, GetTimeoutError):
            _cancel(ref)
            return self._failure(call, ErrorKind.TIMEOUT, f"preprocessor actor gave no answer within {self.timeout_s:g} s")
        except RayError as exc:
            log.warning("preprocessor actor call failed: %s", type(exc).__name__)
            return self._failure(call, ErrorKind.SERVER_ERROR, f"preprocessor actor failed: {type(exc).__name__}")

    def _failure(self, call: RemoteCall, kind: ErrorKind, message: str) -> RemoteAnswer:
        return RemoteAnswer.failure(call, kind, message, model=self.model, backend="ray-actor")

    def served(self) -> list[int]:
        """Calls served by each actor since it (re)started (driver side)."""
        import ray

        return ray.get([handle.served.remote() for handle in self.handles], timeout=60)

    def shutdown(self) -> None:
        """Let every actor hand its pending budget reports over (a few seconds at most), then end them."""
        import ray

        try:
            ray.get([handle.flush.remote() for handle in self.handles], timeout=10)
        except Exception:  # noqa: BLE001 - an actor gone or stuck: its last reports are lost, the rest is counted
            log.debug("a preprocessor actor did not flush its budget reports", exc_info=True)
        for handle in self.handles:
            ray.kill(handle)


def _cancel(ref) -> None:
    import ray

    try:
        ray.cancel(ref)
    except Exception:  # noqa: BLE001 - cancelling is best effort; the result is ignored either way
        log.debug("could not cancel a timed-out preprocessor call", exc_info=True)
