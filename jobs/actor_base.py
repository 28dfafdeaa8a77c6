"""The jobs' stateful Ray Data UDF: an async generator per actor that starts tasks as slots free up, yields each
task's status row the moment it is done, and writes every finished row to the actor's part files.

The predict job (`jobs.predict_actor`) and the VISTA job (`jobs.vista_actor`) are this actor with two hooks:
`TaskActor.prepare` turns a block of tasks into work items (read the block's patients with one targeted MEDS read;
VISTA also builds and persists their graphs), off the event loop; `TaskActor.run` turns one item into its part-file
record and its status row, and raises only `vista.shared.llm.errors.LLMEndpointFailure` (the job's budget stopped the
job) — every other problem is that task's error row.

Streaming, not batch by batch. Ray Data keeps several blocks in flight per actor (its Ray ``max_concurrency``), so
patients of the next blocks are already waiting when one of the actor's ``patients_per_actor`` slots frees — a slow
patient holds its slot only, never its block's other slots. (Ray Data 2.60 gathers an async generator's rows per
call before passing them downstream, for deterministic output order; small blocks keep that wait short, and it
delays only the driver's progress count, not the next patient nor the row's write.)

Outputs. A finished task's record goes to the actor's `vista.shared.runs.parts.PartWriter`, which writes a part file when it
holds ``flush_rows`` records, when the oldest has waited ``flush_s`` seconds (a background task on the actor's event
loop), and whenever the actor has no task left running — so the last call to finish on an actor has written every
row before its own status reaches the driver, and a job that ends has every row on disk. An actor killed mid-run
loses at most its unwritten rows; the driver runs those tasks again (its repair passes), and the LLM response cache
and the stages' stores answer them for free.

Blocks are prepared one at a time, in the order of the run's plan (the rank the driver gave their rows), which is
not always the order Ray starts their calls in (seen on a 1,000-patient job: the block of the longest patients,
planned first, reached its actor after blocks planned later, and its chains started 41 s late, when slots freed).
Preparing is mostly Python (records built from the MEDS rows) and the GIL runs one thread at a time, so four blocks
read side by side all finished about when the last did, and the first patient's first call waited for all of them.
The first block's chains start while the next block is read; the tokenizer is built on a thread of its own.

The LLM gateway is made on the first call, on the event loop Ray Data runs the UDF on (HTTP clients belong to their
loop): it asks the endpoint's context window, or loads the embedded model, once per actor.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypeVar

import pyarrow as pa

from jobs.driver import PLAN_RANK
from jobs.llm_budget import BudgetRef, job_llm_gateway
from jobs.preprocess_pool import PreprocessorPool
from vista.shared.atomic import apply_data_umask
from vista.shared.llm import LLMConfig
from vista.shared.llm.remote import JobGateway
from vista.shared.meds.patient_loader import PatientLoader
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import task_keys
from vista.shared.ranked_slots import RankedSlots
from vista.shared.runs.parts import PartWriter
from vista.shared.runs.progress import StatusRow, status_table
from vista.shared.tokens import DEFAULT_ENCODING, get_encoding, model_encoding

log = logging.getLogger(__name__)

Item = TypeVar("Item")


class ActorSettings(Protocol):
    """What the base reads from a job's actor settings (`PredictSettings`, `VistaSettings`)."""

    out: Path | str
    run_id: str
    llm: LLMConfig | None
    llm_budget: BudgetRef | None
    patients_per_actor: int
    patient_timeout_s: float
    flush_rows: int
    flush_s: float


class OrderedSlots(RankedSlots[tuple[int, int]]):
    """At most ``size`` holders at once, granted in rank order (``(block, index)``, lowest first) rather than first
    come; and no task starts while its block or an earlier one is still being prepared (`expect` /
    `expected`). So an actor's tasks start in the order of their blocks' ranks (their place in the run's plan),
    although a block of long records takes longer to read: with first-come slots the short tasks of later blocks
    took every slot, and the job's longest chains started last.

    >>> async def demo():
    ...     slots, started = OrderedSlots(1), []
    ...     async def task(rank):
    ...         await slots.acquire(rank)
    ...         started.append(rank)
    ...         await asyncio.sleep(0)
    ...         slots.release()
    ...     slots.expect(0)  # block 0 arrived and is being read: block 1's task waits for it
    ...     later = asyncio.ensure_future(task((1, 0)))
    ...     await asyncio.sleep(0)
    ...     first = [asyncio.ensure_future(task((0, n))) for n in (1, 0)]
    ...     await asyncio.sleep(0)
    ...     slots.expected(0)
    ...     await asyncio.gather(later, *first)
    ...     return started
    >>> asyncio.run(demo())
    [(0, 0), (0, 1), (1, 0)]
    """

    def __init__(self, size: int):
        super().__init__(size)
        self._preparing: set[int] = set()

    def expect(self, block: int) -> None:
        """Block ``block`` arrived: no task of a later block starts until `expected` says its tasks have asked."""
        self._preparing.add(block)

    def expected(self, block: int) -> None:
        self._preparing.discard(block)
        self._grant()

    def may_grant(self, rank: tuple[int, int]) -> bool:
        """Not while the rank's block or an earlier one is being prepared (its own block: all its tasks ask first)."""
        return not self._preparing or min(self._preparing) > rank[0]


class TaskActor(ABC, Generic[Item]):
    """Runs a job's tasks as they arrive (see the module docstring); subclasses give `prepare` and `run`."""

    part_schema: ClassVar[pa.Schema]
    """The schema of the records `run` returns (the part files')."""

    def __init__(self, settings: ActorSettings, *, dataset: Path | str | None, coding_profile: str | None,
                 pool: PreprocessorPool | None = None):
        apply_data_umask()  # this worker's files (part files, caches, graph stores) are private (vista.shared.atomic)
        self.settings = settings
        self.pool = pool
        self.loader = PatientLoader(dataset, coding_profile) if dataset is not None else None
        self.catalog = self.loader.catalog() if self.loader is not None else None
        self.parts = PartWriter(settings.out, run_id=settings.run_id, schema=self.part_schema,
                                flush_rows=settings.flush_rows, flush_s=settings.flush_s)
        self.gateway: JobGateway | None = None
        self.slots = OrderedSlots(settings.patients_per_actor)
        self._blocks = itertools.count()  # the order blocks reached this actor (blocks without a plan rank)
        self._prepare_turn = RankedSlots[int](1)  # one block prepared at a time, the earliest first
        self._starting: asyncio.Lock | None = None
        self._flusher: asyncio.Task | None = None
        self.active = 0  # tasks received and not finished, over every call
        if self.uses_llm():
            threading.Thread(target=self._warm_tokenizer, name="warm-tokenizer", daemon=True).start()

    def _warm_tokenizer(self) -> None:
        """Build the encodings the chunking and the gateway count with (0.5 s of CPU each, once per process)."""
        try:
            get_encoding(DEFAULT_ENCODING)
            if self.settings.llm is not None:
                model_encoding(self.settings.llm.model)
        except Exception:  # noqa: BLE001 - the first count raises the same error where it can be reported
            log.debug("tokenizer warm-up failed", exc_info=True)

    # ------------------------------------------------------------------------------------------ the hooks
    @abstractmethod
    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[Item]:
        """The block's work items, one per task, in any order (runs before any of them starts)."""

    @abstractmethod
    async def run(self, item: Item) -> tuple[dict[str, object], StatusRow]:
        """One item's part-file record and status row (called holding one of the actor's slots)."""

    def uses_llm(self) -> bool:
        """Whether this actor's tasks call the LLM (so the gateway is started on the first call)."""
        return self.settings.llm is not None

    # ------------------------------------------------------------------------------------------ the stream
    async def __call__(self, batch: pa.Table) -> AsyncIterator[pa.Table]:
        block = self._rank(batch)
        self.slots.expect(block)
        keys = task_keys(batch)
        self.active += len(keys)
        try:
            try:
                await self._ready()
                await self._prepare_turn.acquire(block)
                try:
                    items = await self.prepare(batch, keys)
                finally:
                    self._prepare_turn.release()
                running = [asyncio.ensure_future(self._run_one(item, (block, n))) for n, item in enumerate(items)]
                await asyncio.sleep(0)  # (each task asks for its slot before a later block may go ahead)
            finally:
                self.slots.expected(block)
            try:
                for finished in asyncio.as_completed(running):
                    yield status_table([await finished])
            finally:
                for task in running:
                    task.cancel()
        finally:
            self.active -= len(keys)
            if self.active == 0:  # nothing left running here: write every row before this call's status leaves,
                await asyncio.to_thread(self.parts.flush)
                if self.gateway is not None:  # and hand the job's budget the grants kept and the answers not yet told
                    await self.gateway.flush_limits()

    def _rank(self, batch: pa.Table) -> int:
        """The block's place in the run's plan (its first row's `PLAN_RANK`: Ray may start the calls of the blocks
        an actor holds in any order, and the job's longest chains must not wait behind the shorter ones of a block
        planned after them); without that column, the order the blocks reached this actor."""
        if PLAN_RANK in batch.column_names and batch.num_rows:
            return int(batch.column(PLAN_RANK)[0].as_py())
        return next(self._blocks)

    async def _run_one(self, item: Item, rank: tuple[int, int]) -> StatusRow:
        await self.slots.acquire(rank)
        try:
            record, status = await self.run(item)
        finally:
            self.slots.release()
        self.parts.add(record)
        if self.parts.due():
            await asyncio.to_thread(self.parts.flush)
        return status

    async def within_time_limit(self, work: Awaitable[object], what: str) -> object:
        """``work``'s result, or `TimeoutError` naming ``what`` after the settings' per-task time limit."""
        try:
            return await asyncio.wait_for(work, self.settings.patient_timeout_s)
        except TimeoutError:
            raise TimeoutError(f"{what}: not finished within {self.settings.patient_timeout_s:g} s") from None

    # ------------------------------------------------------------------------------------------ start and flush
    async def _start_gateway(self) -> JobGateway:
        assert self.settings.llm is not None
        gateway = job_llm_gateway(self.settings.llm, job_id=self.settings.run_id, budget=self.settings.llm_budget)
        await gateway.discover_context_tokens()
        return JobGateway(gateway, remote=self.pool)

    async def _ready(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._flusher is None:
                if self.uses_llm():
                    self.gateway = await self._start_gateway()
                self._flusher = asyncio.get_running_loop().create_task(self._flush_when_due())

    async def _flush_when_due(self) -> None:
        period = min(1.0, self.settings.flush_s / 2)
        while True:
            await asyncio.sleep(period)
            if self.parts.due():
                try:
                    await asyncio.to_thread(self.parts.flush)
                except OSError:  # kept in the buffer; the next flush tries again
                    log.warning("could not write a part file of %d rows; will retry", self.parts.pending, exc_info=True)

    def __del__(self) -> None:  # a graceful actor exit (Ray Data scaling the pool down): write what is buffered
        parts = getattr(self, "parts", None)
        if parts is not None and parts.pending:
            try:
                parts.flush()
            except Exception:  # noqa: BLE001 - best effort at exit; the driver reruns tasks without a row
                log.warning("could not write %d buffered rows at actor exit", parts.pending, exc_info=True)
