"""An actor starts its tasks in plan order (each row's rank from the driver), whichever block came or was read first.

The job orders its tasks longest first; an actor holds several blocks at once and prepares each (reads its patients'
records) before its tasks take a slot. A block of long records is read slower, so with first-come slots the shortest
tasks of later blocks took every slot and the job's longest chains started last (a 20 s tail at one request in
flight, measured on 1,000 patients)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from jobs.actor_base import OrderedSlots, TaskActor
from jobs.driver import PLAN_RANK
from vista.shared.runs.progress import StatusRow
from vista.shared.meds.tasks import TaskKey

PART_SCHEMA = pa.schema([("subject_id", pa.int64()), ("prediction_time", pa.timestamp("us")), ("run_id", pa.string())])


@dataclass
class Settings:
    out: Path
    run_id: str = "r1"
    llm: None = None
    llm_budget: None = None
    patients_per_actor: int = 1
    patient_timeout_s: float = 60.0
    flush_rows: int = 100
    flush_s: float = 60.0


class SlowFirstBlock(TaskActor[TaskKey]):
    """Its first block (the long records) takes longer to prepare than the second."""

    part_schema = PART_SCHEMA

    def __init__(self, settings: Settings):
        super().__init__(settings, dataset=None, coding_profile=None)
        self.started: list[int] = []
        self.prepared = 0

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[TaskKey]:
        self.prepared += 1
        await asyncio.sleep(0.2 if self.prepared == 1 else 0.0)
        return keys

    async def run(self, item: TaskKey) -> tuple[dict[str, object], StatusRow]:
        self.started.append(item.subject_id)
        await asyncio.sleep(0.01)
        record = {"subject_id": item.subject_id, "prediction_time": item.prediction_time, "run_id": "r1"}
        return record, StatusRow(item.subject_id, item.prediction_time, "ok", None, 0, 0, 0, 0, 0.0, 0, 0.01)


def block(*subjects: int) -> pa.Table:
    when = datetime(2020, 1, 1)
    return pa.table({"subject_id": pa.array(subjects, pa.int64()),
                     "prediction_time": pa.array([when] * len(subjects), pa.timestamp("us"))})


def test_tasks_start_in_the_order_their_blocks_arrived_not_the_order_they_were_prepared(tmp_path):
    actor = SlowFirstBlock(Settings(out=tmp_path))

    async def drain(gen):
        return [row async for row in gen]

    async def go():
        first = asyncio.ensure_future(drain(actor(block(1, 2))))  # the longest tasks, slow to read
        await asyncio.sleep(0)  # (Ray Data starts the blocks' generators in the order they reach the actor)
        second = asyncio.ensure_future(drain(actor(block(3, 4))))
        await asyncio.gather(first, second)

    asyncio.run(go())
    assert actor.started == [1, 2, 3, 4]


def ranked(*subjects: int, rank: int) -> pa.Table:
    """A block as the driver makes it: each row with its place in the run's plan."""
    table = block(*subjects)
    return table.append_column(PLAN_RANK, pa.array(range(rank, rank + len(subjects)), pa.int64()))


def test_tasks_start_in_plan_order_whichever_block_reached_the_actor_first(tmp_path):
    """Ray starts the calls of the blocks an actor holds in any order: the block planned first (the longest chains)
    reached its actor after a later one and waited for a free slot (41 s late on a 1,000-patient job)."""
    actor = SlowFirstBlock(Settings(out=tmp_path, patients_per_actor=1))

    async def drain(gen):
        return [row async for row in gen]

    async def go():
        later = asyncio.ensure_future(drain(actor(ranked(3, 4, rank=2))))  # reaches the actor first
        await asyncio.sleep(0)
        first = asyncio.ensure_future(drain(actor(ranked(1, 2, rank=0))))
        await asyncio.gather(later, first)

    asyncio.run(go())
    assert actor.started == [1, 2, 3, 4]


def test_ordered_slots_hand_a_cancelled_grant_on_and_never_exceed_their_size():
    async def go():
        slots = OrderedSlots(2)
        held = 0
        most = 0

        async def task(rank: int):
            nonlocal held, most
            await slots.acquire((rank, 0))
            held += 1
            most = max(most, held)
            await asyncio.sleep(0.01)
            held -= 1
            slots.release()

        tasks = [asyncio.ensure_future(task(rank)) for rank in range(8)]
        await asyncio.sleep(0)
        tasks[5].cancel()  # a waiter cancelled: skipped, its turn passes on
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return most, results, slots.free

    most, results, free = asyncio.run(go())
    assert most == 2 and free == 2
    assert isinstance(results[5], asyncio.CancelledError) and all(r is None for i, r in enumerate(results) if i != 5)


@pytest.mark.parametrize("size", [1, 3])
def test_ordered_slots_grant_the_lowest_rank_first(size):
    async def go():
        slots, order = OrderedSlots(size), []
        for _ in range(size):
            await slots.acquire((0, 0))

        async def task(rank):
            await slots.acquire((rank, 0))
            order.append(rank)
            slots.release()

        waiting = [asyncio.ensure_future(task(rank)) for rank in (5, 2, 9, 1)]
        await asyncio.sleep(0)
        for _ in range(size):
            slots.release()
        await asyncio.gather(*waiting)
        return order

    assert asyncio.run(go()) == [1, 2, 5, 9]


class RecordsPreparation(TaskActor[TaskKey]):
    """Notes when each block's preparation starts and ends."""

    part_schema = PART_SCHEMA

    def __init__(self, settings: Settings):
        super().__init__(settings, dataset=None, coding_profile=None)
        self.events: list[str] = []

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[TaskKey]:
        first = keys[0].subject_id
        self.events.append(f"start {first}")
        await asyncio.sleep(0.05)
        self.events.append(f"end {first}")
        return keys

    async def run(self, item: TaskKey) -> tuple[dict[str, object], StatusRow]:
        record = {"subject_id": item.subject_id, "prediction_time": item.prediction_time, "run_id": "r1"}
        return record, StatusRow(item.subject_id, item.prediction_time, "ok", None, 0, 0, 0, 0, 0.0, 0, 0.0)


def test_blocks_are_prepared_one_at_a_time_in_the_order_they_arrived(tmp_path):
    """Preparing is GIL-bound Python: blocks read side by side all finished about when the last did, so the first
    patient's first call waited for every block the actor held (seen with py-spy at a job's start)."""
    actor = RecordsPreparation(Settings(out=tmp_path, patients_per_actor=4))

    async def drain(gen):
        return [row async for row in gen]

    async def go():
        calls = []
        for first in (1, 3, 5):
            calls.append(asyncio.ensure_future(drain(actor(block(first, first + 1)))))
            await asyncio.sleep(0)
        return await asyncio.gather(*calls)

    results = asyncio.run(go())
    assert actor.events == ["start 1", "end 1", "start 3", "end 3", "start 5", "end 5"]
    assert sorted(r.column("subject_id")[0].as_py() for rows in results for r in rows) == [1, 2, 3, 4, 5, 6]
