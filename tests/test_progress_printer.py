"""The driver's progress display (`vista.shared.runs.progress.ProgressPrinter`): off a terminal the line every interval and once
at the end; on a terminal a live bar that rich redraws; both with the live LLM figures (429s, paused seconds,
requests in flight of the window)."""

from __future__ import annotations

import io
import re
import time

from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.progress import LiveFigures, ProgressPrinter, ProgressTracker, StatusRow, status_table

FIGURES = LiveFigures(calls=900, in_flight=40, tokens=9_000, cost_usd=None, in_flight_limit=48, rate_limited=31,
                      cooldown_s=2.5)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _tracker() -> ProgressTracker:
    tracker = ProgressTracker("predict", to_run=4)
    reads: list[float] = []
    tracker.live_source = lambda: reads.append(time.monotonic()) or FIGURES
    tracker.reads = reads  # type: ignore[attr-defined]
    return tracker


def _finish_one(tracker: ProgressTracker) -> None:
    tracker.update(status_table([StatusRow(1, None, "ok", None, 3, 0, 1200, 300, 0.01, 0, 2.0)]))


def test_off_a_terminal_the_line_is_printed_every_interval_and_at_the_end():
    tracker, stream = _tracker(), io.StringIO()
    with ProgressPrinter(tracker, interval_s=0.2, stream=stream):
        _finish_one(tracker)
        time.sleep(0.7)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3  # at least two interval lines and the final one
    assert all(line.startswith("[predict] ") for line in lines)
    assert lines[-1].startswith("[predict] 1/4 (ok 1) · 900 calls (40 in flight of 48) · 31 × 429, 2.5 s paused · ")
    assert "\x1b" not in stream.getvalue()  # plain text for `ray job logs` and files


def test_on_a_terminal_rich_redraws_the_bar_with_the_live_figures():
    tracker, stream = _tracker(), Terminal()
    printer = ProgressPrinter(tracker, interval_s=10.0, stream=stream)
    printer.LIVE_EVERY_S = 0.2
    with printer:
        _finish_one(tracker)
        time.sleep(2.3)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())  # the terminal's cursor moves and colours
    final = shown.rindex("[predict] ")
    assert shown[final:].startswith("[predict] 1/4 (ok 1) · 900 calls (40 in flight of 48) · 31 × 429")
    assert "in flight of 48" in shown[:final]  # drawn live before the final line, not only at the end
    assert len(tracker.reads) >= 3  # the live figures were read during the run


def test_interval_zero_shows_only_the_final_line():
    tracker, stream = _tracker(), Terminal()
    with ProgressPrinter(tracker, interval_s=0, stream=stream):
        _finish_one(tracker)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[predict] 1/4 (ok 1) · 900 calls")


def test_the_eta_counts_the_llm_calls_left_and_the_longest_chain_when_the_tasks_sizes_are_known():
    """Longest first: one long patient (220 calls of 0.5 s, one after another) runs while the short ones finish.
    Patients per minute say 30 s left; the calls left at the job's call rate say 57 s; the long patient's chain, 110 s
    from its start 30 s ago, says 80 s, which is what is left."""
    now = [0.0]
    sizes = {TaskKey(1): 200, TaskKey(2): 10, TaskKey(3): 10, TaskKey(4): 10}

    def tracker_at_30s(with_sizes: bool) -> ProgressTracker:
        now[0] = 0.0
        tracker = ProgressTracker("predict", to_run=4, clock=lambda: now[0])
        if with_sizes:
            tracker.expect_work(sizes)
        began = tracker.started_wall  # every task started at once; two short ones finished: 11 calls in 5.5 s each
        tracker.update(status_table([StatusRow(s, None, "ok", None, 11, 0, 100, 10, 0.0, 0, 5.5, began)
                                     for s in (2, 3)]))
        tracker.live_source = lambda: LiveFigures(calls=22 + 60 + 5, in_flight=2, tokens=0, cost_usd=None)
        now[0] = 30.0
        tracker.poll_live()
        return tracker

    assert tracker_at_30s(with_sizes=False).line().endswith("4.0 patients/min · ETA 0m30s")
    # calls: (200 + 10) x 11/10 to come, less the 65 the unfinished two made: 166 at 87 per 30 s = 57 s;
    # the chain: 200 x 11/10 calls x 0.5 s = 110 s, 30 s of it run
    assert tracker_at_30s(with_sizes=True).line().endswith("4.0 patients/min · ETA 1m20s")
