"""The streaming predict job's parts without Ray: part files and their consolidation, the retry policy, longest-first
scheduling, the length estimate, the stall watchdog."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.driver import JobStalled, stream_status
from vista.shared.runs.retry import reruns
from vista.shared.runs.progress import ProgressTracker, StatusRow, status_table
from vista.shared.runs.parts import OutputFile, PartWriter, RowState, consolidate_parts, latest_states, part_files, remove_stale_temporaries
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.plan import plan_tasks, schedule
from trajonco.prediction_rows import PART_SCHEMA, PREDICTION_SCHEMA, RowContext, part_record, row_from_failure
from vista.shared.llm.task_usage import TaskUsage
from vista.shared.meds.tasks import estimate_lengths

T0 = datetime(2020, 1, 1)
CONTEXT = RowContext(cancer="lung", variant="one_stage", model="m", run_id="r1")


def error_record(subject: int, exc: Exception, *, run_id: str = "r1", at: datetime | None = None) -> dict[str, object]:
    row = row_from_failure(TaskKey(subject, T0), None, exc, TaskUsage(), CONTEXT.model_copy(update={"run_id": run_id}),
                           wall_s=0.0)
    if at is not None:
        row = row.model_copy(update={"finished_at": at})
    return part_record(row, None, TaskUsage())


def ok_record(subject: int, *, run_id: str = "r1", at: datetime | None = None) -> dict[str, object]:
    record = error_record(subject, TimeoutError("x"), run_id=run_id, at=at)
    record.update(status="ok", error_kind=None, error=None, retry_class=None, risk_score=7,
                  predicted_boolean_probability=0.7, predicted_boolean_value=True)
    return record


# ------------------------------------------------------------------------------------------------ part files
def test_a_writer_flushes_by_size_and_age_and_keeps_rows_when_the_write_fails(tmp_path, monkeypatch):
    now = [0.0]
    writer = PartWriter(tmp_path, run_id="r1", schema=PART_SCHEMA, flush_rows=3, flush_s=5.0, clock=lambda: now[0])
    writer.add(ok_record(1))
    assert not writer.due()
    now[0] = 5.0
    assert writer.due()  # the oldest row has waited long enough
    writer.add(ok_record(2))
    writer.add(ok_record(3))
    assert writer.due() and writer.pending == 3

    def broken(table, where):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        writer.flush()
    assert writer.pending == 3 and part_files(tmp_path) == [] and not list(tmp_path.rglob("*.tmp"))
    monkeypatch.undo()
    path = writer.flush()
    assert path is not None and path.parent.name == "run=r1" and writer.pending == 0 and writer.flush() is None
    assert pq.read_table(path).schema == PART_SCHEMA and (writer.files_written, writer.rows_written) == (1, 3)
    stale = path.parent / ".part-x.parquet.abc.tmp"
    stale.write_bytes(b"half")
    assert part_files(tmp_path) == [path] and remove_stale_temporaries(tmp_path) == 1


def test_the_newest_row_of_a_task_wins_and_consolidation_keeps_rows_outside_the_selection(tmp_path):
    first = PartWriter(tmp_path, run_id="r1", schema=PART_SCHEMA)
    t1 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    first.add(error_record(5, ConnectionError("down"), at=t1))
    first.add(error_record(6, ValueError("bad"), at=t1))
    for subject in (1, 2, 3):
        first.add(ok_record(subject, at=t1))
    first.flush()
    second = PartWriter(tmp_path, run_id="r2", schema=PART_SCHEMA)
    second.add(ok_record(5, run_id="r2", at=t1 + timedelta(minutes=1)))  # the retry that worked
    second.flush()
    states = latest_states(tmp_path)
    assert states[TaskKey(5, T0)] == RowState("ok", None, "r2") and states[TaskKey(6, T0)].retry_class == "permanent"

    selected = [TaskKey(s, T0) for s in (1, 2, 9)]  # a smaller selection, and one task never run
    ok_only = OutputFile("ok", tmp_path / "ok.parquet", pa.schema([PREDICTION_SCHEMA.field("subject_id")]),
                         lambda rows: rows.filter(pa.compute.equal(rows.column("status"), "ok")))
    report = consolidate_parts(tmp_path, [OutputFile("all", tmp_path / "all.parquet", PREDICTION_SCHEMA), ok_only],
                               selected, chunk_rows=2)
    table = pq.read_table(tmp_path / "all.parquet")
    assert table.schema == PREDICTION_SCHEMA and table.column("subject_id").to_pylist() == [1, 2, 3, 5, 6]
    assert table.filter(pa.compute.equal(table.column("subject_id"), 5)).column("status").to_pylist() == ["ok"]
    assert pq.read_table(tmp_path / "ok.parquet").column("subject_id").to_pylist() == [1, 2, 3, 5]
    assert report.rows == 5 and report.missing == [TaskKey(9, T0)] and dict(report.statuses) == {"ok": 2}
    assert report.file_rows == {"all": 5, "ok": 4} and report.path == tmp_path / "all.parquet"
    empty = consolidate_parts(tmp_path / "none", [OutputFile("none", tmp_path / "none.parquet", PREDICTION_SCHEMA)],
                              [TaskKey(1, T0)])
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0 and empty.missing == [TaskKey(1, T0)]


# ------------------------------------------------------------------------------------------------ retry policy
def test_the_retry_policy_reruns_transient_failures_and_keeps_permanent_ones():
    keys = [TaskKey(s, T0) for s in range(1, 6)]
    states = {keys[0]: RowState("ok", None), keys[1]: RowState("partial", "transient"),
              keys[2]: RowState("failed", "permanent"), keys[3]: RowState("error", "transient")}
    plans = {policy: plan_tasks(keys, states, rerun=lambda state, p=policy: reruns(state, p))
             for policy in ("transient", "all", "none")}
    assert [k.subject_id for k in plans["transient"].todo] == [2, 4, 5] and plans["transient"].retried == 2
    assert [k.subject_id for k in plans["all"].todo] == [2, 3, 4, 5] and plans["all"].retried == 3
    assert [k.subject_id for k in plans["none"].todo] == [5] and plans["none"].skipped == 4


def test_every_gateway_error_kind_has_a_retry_class():
    from trajonco.prediction_rows import TRANSIENT_CALL_KINDS, retry_class
    from vista.shared.llm.errors import ENDPOINT_KINDS, RETRYABLE_KINDS, ErrorKind

    transient = {k.value for k in ErrorKind if retry_class("failed", "llm_call_failed", k.value) == "transient"}
    assert transient == TRANSIENT_CALL_KINDS == {k.value for k in RETRYABLE_KINDS | ENDPOINT_KINDS}
    assert {"rate_limited", "server_error", "timeout", "connection_error"} <= transient  # what passes on its own
    assert retry_class("partial", None, "invalid_output,truncated") == "permanent"
    assert retry_class("failed", "llm_call_failed", "http_error") == "permanent"


# ------------------------------------------------------------------------------------------------ scheduling
def test_longest_chains_start_first_and_neighbours_stay_together():
    keys = [TaskKey(s, T0) for s in range(10)]
    lengths = {k: {7: 1000, 3: 1010, 8: 100, 1: 104}.get(k.subject_id, 10) for k in keys}
    order = [k.subject_id for k in schedule(keys, lengths)]
    assert order == [3, 7, 1, 8, 0, 2, 4, 5, 6, 9]  # longest class first; subject order inside a class


def test_length_estimate_counts_each_tasks_rows_before_its_prediction_time(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    times = [None, datetime(2019, 1, 1), datetime(2019, 6, 1), datetime(2020, 6, 1), None, datetime(2018, 1, 1)]
    pq.write_table(pa.table({
        "subject_id": pa.array([1, 1, 1, 1, 2, 2], pa.int64()),
        "time": pa.array(times, pa.timestamp("us")),
        "code": ["MEDS_BIRTH", "A", "B", "C", "MEDS_BIRTH", "A"],
        "numeric_value": pa.array([None] * 6, pa.float32()),
    }), data / "0.parquet")
    keys = [TaskKey(1, T0), TaskKey(1, datetime(2019, 3, 1)), TaskKey(2), TaskKey(3, T0)]
    assert estimate_lengths(tmp_path, keys) == {keys[0]: 3, keys[1]: 2, keys[2]: 2}  # subject 3 has no rows


# ------------------------------------------------------------------------------------------------ watchdog
class _Stuck:
    """A dataset whose pipeline never produces a row after the first ``rows``."""

    def __init__(self, rows: int = 0):
        self.rows = rows
        self.release = threading.Event()

    def iter_batches(self, **_):
        for i in range(self.rows):
            yield status_table([StatusRow(i, None, "ok", None, 1, 0, 10, 5, 0.0, 0, 0.1, time.time())])
        self.release.wait(60)


def test_the_watchdog_stops_a_job_that_makes_no_progress():
    tracker = ProgressTracker("predict", to_run=3)
    stuck = _Stuck(rows=1)
    try:
        with pytest.raises(JobStalled, match=r"no task has finished since the last one .* \(1/3 done; --stall-timeout "
                                             r"0.5 s\); check the endpoint"):
            stream_status(stuck, tracker, stall_timeout_s=0.5, stall_hint=lambda: "check the endpoint", poll_s=0.05)
        assert tracker.first_row_s is not None and tracker.first_task_start_s is not None
    finally:
        stuck.release.set()
    never = _Stuck(rows=0)
    try:
        with pytest.raises(JobStalled, match="no task has finished in the"):
            stream_status(never, ProgressTracker("predict", to_run=2), stall_timeout_s=0.3, poll_s=0.05)
    finally:
        never.release.set()


def test_a_pipeline_error_reaches_the_caller_and_a_finished_stream_returns():
    class Broken:
        def iter_batches(self, **_):
            raise RuntimeError("actor died")
            yield  # pragma: no cover

    with pytest.raises(RuntimeError, match="actor died"):
        stream_status(Broken(), ProgressTracker("predict", to_run=1), stall_timeout_s=5, poll_s=0.05)
    done = _Stuck(rows=2)
    done.release.set()
    tracker = ProgressTracker("predict", to_run=2)
    stream_status(done, tracker, stall_timeout_s=5, poll_s=0.05)
    assert tracker.finished == 2


def test_stalled_job_exits_with_its_own_status(capsys):
    import argparse

    from jobs import driver

    def parser() -> argparse.ArgumentParser:
        made = argparse.ArgumentParser()
        made.add_argument("-v", "--verbose", action="store_true")
        return made

    def run(args):
        raise JobStalled("[predict] stopped: no task has finished")

    code = driver.job_main(parser, run, [])
    assert code == driver.EXIT_STALLED == 4 and capsys.readouterr().err == "error: [predict] stopped: no task has finished\n"
