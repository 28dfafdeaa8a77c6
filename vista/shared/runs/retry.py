"""Which tasks with a row run again: the cohort jobs' retry policy (``--retry transient|all|none``).

A row that is not ok carries a retry class: transient (a rate limit, a timeout, a server error — may pass on its
own) or permanent (bad input, answers that never validated). By default the next run retries the transient ones.

>>> failed = RowState("failed", "transient")
>>> reruns(failed, "transient"), reruns(RowState("partial", "permanent"), "transient"), reruns(failed, "none")
(True, False, False)
>>> reruns(RowState("partial", "permanent"), "all"), reruns(RowState("ok", None), "all")
(True, False)
>>> counts = RetryCounts.of([TaskKey(1), TaskKey(2)], {TaskKey(1): failed, TaskKey(2): RowState("error", "permanent")},
...                         "transient")
>>> dict(counts.retried), dict(counts.kept), kept_note(counts, "transient")
({'transient': 1}, {'permanent': 1}, '; 1 of them are failures kept by --retry transient (1 permanent); rerun with --retry all to run them again')
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.errors import JobInputError
from vista.shared.runs.parts import RowState

FailureKinds = Sequence[tuple[type[BaseException] | tuple[type[BaseException], ...], str]]
"""A system's reason classes of the exceptions that stop a task: (exception types, name), first match wins."""


def classify_failure(exc: BaseException, kinds: FailureKinds) -> str:
    """The reason class of an exception that stopped a task (the summary counts failures by it): the first of
    ``kinds`` it is an instance of, ``timeout`` for a `TimeoutError`, else ``internal``.

    >>> kinds = [(KeyError, "data"), ((UnicodeError, EOFError), "file")]
    >>> classify_failure(KeyError(1), kinds), classify_failure(EOFError(), kinds), classify_failure(TimeoutError(), kinds)
    ('data', 'file', 'timeout')
    >>> classify_failure(ValueError(), kinds)
    'internal'
    """
    return next((kind for types, kind in (*kinds, (TimeoutError, "timeout")) if isinstance(exc, types)), "internal")


def retry_policy(args: argparse.Namespace) -> str:
    """The policy ``--retry``/``--retry-failed`` ask for (`JobInputError` when they contradict each other)."""
    if args.retry_failed and args.retry not in (None, "all"):
        raise JobInputError(f"--retry-failed means --retry all; it contradicts --retry {args.retry}")
    return "all" if args.retry_failed else (args.retry or "transient")


def reruns(state: RowState, policy: str) -> bool:
    """Whether a task whose newest row is ``state`` runs again under the retry ``policy``."""
    if state.status == "ok" or policy == "none":
        return False
    return policy == "all" or state.retry_class == "transient"


@dataclass(slots=True)
class RetryCounts:
    """What the retry policy did with the selected tasks that had a row that is not ok."""

    retried: Counter[str] = field(default_factory=Counter)  # by retry class
    kept: Counter[str] = field(default_factory=Counter)  # by retry class (None: rows written before retry classes)

    @classmethod
    def of(cls, selected: list[TaskKey], states: dict[TaskKey, RowState], policy: str) -> RetryCounts:
        counts = cls()
        for key in selected:
            state = states.get(key)
            if state is None or state.status == "ok":
                continue
            (counts.retried if reruns(state, policy) else counts.kept)[state.retry_class or "unclassified"] += 1
        return counts


def by_class(counts: Mapping[str, int]) -> str:
    """``3 permanent, 1 transient``: task counts per retry class, in class order."""
    return ", ".join(f"{n:,} {kind}" for kind, n in sorted(counts.items()))


def kept_note(retry: RetryCounts, policy: str) -> str:
    """A clause saying which failures the policy kept (empty when none), for the driver's lines."""
    if not retry.kept:
        return ""
    kinds = by_class(retry.kept)
    hint = "rerun with --retry all to run them again" if policy != "all" else ""
    return f"; {sum(retry.kept.values())} of them are failures kept by --retry {policy} ({kinds}){'; ' + hint if hint else ''}"
