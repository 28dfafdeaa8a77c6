"""VISTA's LLM stages for one patient: the TOA timeline, then the tumor-board display, each stored and skipped when
unchanged (the `vista timeline`/`display`/`evaluate` commands and the cohort job's actors run these two).

Both write into the task's folder (`vista.graph.task_graphs.task_folder`: the store itself for a whole record,
where ``vista ask/display`` look) through the layer's own stores (`vista.toa.TimelineStore`,
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
from vista.display.store import display_gaps
from vista.graph import PatientGraph
from vista.shared.llm.caller import LLMCaller
from vista.shared.llm.task_usage import TaskUsage, usage_scope
from vista.toa import PatientTimeline, TimelineStore, TOAConfig


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """One LLM stage of one task: whether it was built now, its usage and seconds, and what failed inside it."""

    rebuilt: bool
    usage: TaskUsage  # this stage's calls only (its own usage scope)
    seconds: float
    file: Path
    problem: str | None  # set when some of its calls failed (the output is incomplete)


async def timeline_stage(folder: str | Path, graph: PatientGraph, gateway: LLMCaller,
                         config: TOAConfig = TOAConfig()) -> tuple[PatientTimeline, StageOutcome]:
    """The task's TOA (built, or read back when current), with this run's usage of it."""
    store = TimelineStore(folder)
    path = store.path_of(graph.subject_id)  # (a stored timeline with failed calls is never current: rebuilt)
    started = time.perf_counter()
    with usage_scope() as usage:
        timeline, rebuilt = await store.build(graph, gateway, config)
    problem = timeline.incomplete_reason()
    if usage.failed_calls and problem is None:
        problem = f"{usage.failed_calls} call(s) failed (ambiguous-pair judge)"
    return timeline, StageOutcome(rebuilt, usage, time.perf_counter() - started, path, problem)


async def display_stage(folder: str | Path, graph: PatientGraph, timeline: PatientTimeline, gateway: LLMCaller,
                        config: DisplayConfig = DisplayConfig()) -> tuple[TumorBoardDisplay, StageOutcome]:
    """The task's tumor-board display (built, or read back when current), with this run's usage of it."""
    store = DisplayStore(folder)
    path = store.path_of(graph.subject_id)  # (a stored display with failed values is never current: rebuilt)
    started = time.perf_counter()
    with usage_scope() as usage:
        display, rebuilt = await store.build(graph, timeline, gateway, config)
    problem = display_gaps(display, config)
    if usage.failed_calls and problem is None:
        problem = f"{usage.failed_calls} call(s) failed"
    return display, StageOutcome(rebuilt, usage, time.perf_counter() - started, path, problem)
