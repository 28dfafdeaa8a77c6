"""The VISTA job's LLM stages for one task: the TOA timeline, then the tumor-board display, each stored and skipped
when unchanged.

Both write into the task's folder through the layer's own stores (`vista.toa.TimelineStore`,
`vista.display.DisplayStore`), which compare content hashes and make no call for an unchanged patient. A stored
output that is incomplete because some of its calls failed (chunks whose extraction failed, display values the
model could not give) is removed before the stage runs, so a retry asks again instead of serving the gap; the stage's
outcome says how many calls failed, and the task's row becomes ``failed`` for that stage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from vista.display import DisplayConfig, DisplayStore, TumorBoardDisplay
from vista.graph import PatientGraph
from vista.toa import PatientTimeline, TimelineStore, TOAConfig, TOAError

from jobs.job_gateway import JobGateway, TaskUsage, usage_scope


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """One LLM stage of one task: whether it was built now, its usage and seconds, and what failed inside it."""

    rebuilt: bool
    usage: TaskUsage  # this stage's calls only (its own usage scope)
    seconds: float
    file: Path
    problem: str | None  # set when some of its calls failed (the output is incomplete)


def _timeline_gaps(timeline: PatientTimeline) -> str | None:
    stats = timeline.stats
    parts = []
    if stats.failed_chunks:
        parts.append(f"{stats.failed_chunks} of {stats.chunks} chunk extraction call(s) failed")
    if stats.safety_net_failed:
        parts.append(f"{stats.safety_net_failed} imaging verification call(s) failed")
    return "; ".join(parts) or None


def _display_gaps(display: TumorBoardDisplay, config: DisplayConfig) -> str | None:
    failed = [v.key for v in display.values if v.origin == "failed"]
    parts = [f"{len(failed)} variable(s) not answered ({', '.join(failed[:5])})"] if failed else []
    if config.summary_note and display.summary_error is not None:
        parts.append(f"summary note call failed ({display.summary_error[:160]})")
    return "; ".join(parts) or None


def _drop_incomplete(path: Path, load, gaps) -> None:
    """Remove a stored output whose calls partly failed (an unreadable one is left for the store to report)."""
    if not path.is_file():
        return
    try:
        stored = load()
    except (ValueError, TOAError):  # unreadable: the store reports it, naming the file, when the stage runs
        return
    if gaps(stored):
        path.unlink(missing_ok=True)


async def timeline_stage(folder: Path, graph: PatientGraph, gateway: JobGateway,
                         config: TOAConfig) -> tuple[PatientTimeline, StageOutcome]:
    """The task's TOA (built, or read back when current), with this run's usage of it."""
    store = TimelineStore(folder)
    path = store.path_of(graph.subject_id)
    _drop_incomplete(path, lambda: store.load(graph.subject_id), _timeline_gaps)
    started = time.perf_counter()
    with usage_scope() as usage:
        timeline, rebuilt = await store.build(graph, gateway, config)
    problem = _timeline_gaps(timeline)
    if usage.failed_calls and problem is None:
        problem = f"{usage.failed_calls} call(s) failed (ambiguous-pair judge)"
    return timeline, StageOutcome(rebuilt, usage, time.perf_counter() - started, path, problem)


async def display_stage(folder: Path, graph: PatientGraph, timeline: PatientTimeline, gateway: JobGateway,
                        config: DisplayConfig) -> tuple[TumorBoardDisplay, StageOutcome]:
    """The task's tumor-board display (built, or read back when current), with this run's usage of it."""
    store = DisplayStore(folder)
    path = store.path_of(graph.subject_id)
    _drop_incomplete(path, lambda: store.load(graph.subject_id), lambda d: _display_gaps(d, config))
    started = time.perf_counter()
    with usage_scope() as usage:
        display, rebuilt = await store.build(graph, timeline, gateway, config)
    problem = _display_gaps(display, config)
    if usage.failed_calls and problem is None:
        problem = f"{usage.failed_calls} call(s) failed"
    return display, StageOutcome(rebuilt, usage, time.perf_counter() - started, path, problem)
