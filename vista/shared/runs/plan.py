"""Which of a cohort job's tasks run, and in what order: one task per (subject, prediction time), read from a label
file or a MEDS dataset (`vista.shared.meds.tasks`).

A job's plan is decided once, on the driver, from the task keys alone (two int/timestamp columns, a few MB for
100,000 patients): which tasks are selected (``--limit`` takes the first N in key order, ``--sample`` a seeded
random N), which already have an output (skipped) and which are left to run. The same command therefore selects
the same patients on every restart. A task's key is `vista.shared.meds.task_key.TaskKey`.

>>> keys = [TaskKey(s, datetime(2020, 1, 1)) for s in (5, 3, 9, 1)]
>>> plan = plan_tasks(keys, done={TaskKey(3, datetime(2020, 1, 1)): "ok"}, limit=3)
>>> [k.subject_id for k in plan.selected], [k.subject_id for k in plan.todo], plan.skipped
([1, 3, 5], [1, 5], 1)
>>> plan = plan_tasks(keys, done={TaskKey(3, datetime(2020, 1, 1)): "transient"}, limit=3,
...                   rerun=lambda state: state == "transient")  # the retry policy decides per recorded state
>>> [k.subject_id for k in plan.todo], plan.retried
([1, 3, 5], 1)

A case–control label file (``matched_to``: a control's case) keeps its matching under ``--limit``/``--sample``:
whole matched groups are taken (`MatchGroups`), never a case without its controls.

>>> groups = MatchGroups({TaskKey(s): g for s, g in ((1, 1), (2, 1), (3, 3), (4, 3), (5, 5), (6, 5))},
...                      {TaskKey(s): s % 2 == 1 for s in range(1, 7)})
>>> plan = plan_tasks([TaskKey(s) for s in range(1, 7)], {}, limit=5, groups=groups)
>>> [k.subject_id for k in plan.selected], groups.describe(plan.selected)
([1, 2, 3, 4], '2 whole matched group(s): 2 cases, 2 controls')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import MatchGroups


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """The tasks a run selected, those already done (skipped) and those it will run, in key order."""

    selected: list[TaskKey]
    todo: list[TaskKey]
    skipped: int = 0
    retried: int = field(default=0, metadata={"doc": "tasks with an output selected again by the retry policy"})
    outside_selection: int = field(default=0, metadata={"doc": "outputs present for tasks this run did not select"})


def _whole_groups(ordered: list[TaskKey], groups: MatchGroups, at_most: int, order: list[int] | None = None
                  ) -> list[TaskKey]:
    """Whole groups (in key order of their first task, or in ``order``) while they fit ``at_most`` tasks; the first
    group whole even when it alone is larger."""
    members: dict[int, list[TaskKey]] = {}
    for i, key in enumerate(ordered):
        members.setdefault(groups.group_of.get(key, -1 - i), []).append(key)
    listed = list(members.values())
    chosen: list[TaskKey] = []
    for index in order if order is not None else range(len(listed)):
        group = listed[index]
        if chosen and len(chosen) + len(group) > at_most:
            continue
        chosen += group
        if len(chosen) >= at_most:
            break
    return sorted(chosen, key=TaskKey.sort_key)


def plan_tasks(
    keys: Iterable[TaskKey],
    done: Mapping[TaskKey, str],
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    rerun: Callable[[object], bool] | None = None,
    groups: MatchGroups | None = None,
) -> TaskPlan:
    """Select tasks (first ``limit`` in key order, or a seeded random ``sample``), then drop those already done.

    ``done`` maps each task with an output to its recorded state; a task runs again when ``rerun(state)`` is true
    (the job's retry policy, `vista.shared.runs.retry.reruns`; without ``rerun``, none does).
    With ``groups`` (a case–control label file) the selection takes whole matched groups: at most ``limit`` (or
    ``sample``) tasks, the first group whole even when it alone is larger.
    """
    rerun = rerun or (lambda state: False)
    if limit is not None and sample is not None:
        raise ValueError("choose either limit or sample, not both")
    ordered = sorted(set(keys), key=TaskKey.sort_key)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be positive, not {limit}")
        ordered = _whole_groups(ordered, groups, limit) if groups is not None else ordered[:limit]
    elif sample is not None:
        if sample < 1:
            raise ValueError(f"sample must be positive, not {sample}")
        if groups is not None and sample < len(ordered):
            count = len({groups.group_of.get(k, -1 - i) for i, k in enumerate(ordered)})
            ordered = _whole_groups(ordered, groups, sample,
                                    order=np.random.default_rng(seed).permutation(count).tolist())
        elif sample < len(ordered):
            picked = np.random.default_rng(seed).choice(len(ordered), size=sample, replace=False)
            ordered = [ordered[i] for i in sorted(picked.tolist())]
    todo: list[TaskKey] = []
    skipped = retried = 0
    for key in ordered:
        status = done.get(key)
        if status is None:
            todo.append(key)
        elif rerun(status):
            todo.append(key)
            retried += 1
        else:
            skipped += 1
    selected = set(ordered)
    outside = sum(1 for key in done if key not in selected)
    return TaskPlan(ordered, todo, skipped, retried, outside)


# ------------------------------------------------------------------------------------------------ scheduling
def schedule(keys: Iterable[TaskKey], lengths: Mapping[TaskKey, int], *, ratio: float = 1.5) -> list[TaskKey]:
    """Longest first, by length class: tasks whose estimated chain lengths differ by less than a factor ``ratio``
    share a class and keep key order inside it, so the longest chains never start last and the patients of one
    block (and their reads) stay close in subject order. Unknown lengths count as 0.

    >>> keys = [TaskKey(s) for s in (1, 2, 3, 4, 5)]
    >>> [k.subject_id for k in schedule(keys, {TaskKey(1): 20, TaskKey(2): 700, TaskKey(3): 24, TaskKey(4): 800})]
    [2, 4, 1, 3, 5]
    """
    if ratio <= 1.0:
        raise ValueError(f"ratio must be above 1, not {ratio}")

    def order(key: TaskKey) -> tuple[int, int, datetime]:
        length = lengths.get(key, 0)
        band = math.floor(math.log(length + 1) / math.log(ratio))
        return (-band, *key.sort_key())

    return sorted(keys, key=order)
