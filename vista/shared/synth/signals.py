"""Pre-diagnostic signals of cases: symptom/finding codes with lead times and drifting labs, sampled vectorized.

Each case shows each of its cancer's signals with the signal's probability. Occurrence times are mostly within
months of diagnosis (exponential lead times) and only a share comes 1-3 years earlier, so only part of the cases
carry signal before a 1-year gap. Signals that are chronic conditions (new-onset diabetes before pancreatic
cancer, CKD before myeloma) start that condition instead, so it is then coded and treated like any other case of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from vista.shared.synth.cancers import CANCER_KEYS, CANCERS, CancerProfile, LabDrift, Signal
from vista.shared.synth.catalog import LABS
from vista.shared.synth.conditions import CONDITION_INDEX, CONDITION_LIST
from vista.shared.synth.population import DAYS_PER_YEAR, Population
from vista.shared.synth.vocabulary import CodeIds

LAB_KEYS: tuple[str, ...] = tuple(LABS)
LAB_INDEX: dict[str, int] = {k: i for i, k in enumerate(LAB_KEYS)}
_CONDITION_OF_DX = {c.dx: CONDITION_INDEX[c.key] for c in CONDITION_LIST}


@dataclass(slots=True)
class SignalEvents:
    """Signal diagnosis occurrences (subject index, day, catalog dx key index into ``dx_keys``)."""

    subject: np.ndarray
    day: np.ndarray
    dx: np.ndarray
    dx_keys: tuple[str, ...]


@dataclass(slots=True)
class Drifts:
    """Per (subject, lab) drift: the lab moves by ``magnitude`` between ``start`` and ``end`` (the diagnosis)."""

    magnitude: np.ndarray
    start: np.ndarray
    end: np.ndarray


def _lead_times(rng: np.random.Generator, n: int, mean: float, p_early: float, history: np.ndarray) -> np.ndarray:
    short = rng.exponential(mean, n)
    early = rng.uniform(365.0, 3.0 * DAYS_PER_YEAR, n)
    lead = np.where(rng.random(n) < p_early, early, np.minimum(short, 540.0))
    return np.minimum(lead, np.maximum(history - 1.0, 1.0))


Shown = TypeVar("Shown", Signal, LabDrift)


def _cases_showing(
    pop: Population, rng: np.random.Generator, of: Callable[[CancerProfile], tuple[Shown, ...]], *,
    history_pad: float = 0.0,
) -> Iterator[tuple[Shown, np.ndarray, np.ndarray, np.ndarray]]:
    """Each signal (or lab drift) ``of`` each cancer with the cases that show it (a case does with its ``p``): those
    cases, their diagnosis days and lead times (capped by their days of record, plus ``history_pad``). Drawn lazily,
    so the caller's own draws for one item come before the next item's (the same seed gives the same bytes)."""
    for ci, key in enumerate(CANCER_KEYS):
        cases = np.flatnonzero(pop.cancer == ci)
        if len(cases) == 0:
            continue
        dx_day = pop.diagnosis[cases]
        history = dx_day - pop.record_start[cases]
        for item in of(CANCERS[key]):
            has = rng.random(len(cases)) < item.p
            who = cases[has]
            if len(who):
                yield item, who, dx_day[has], _lead_times(rng, len(who), item.lead_days, item.p_early,
                                                          history[has] + history_pad)


def sample_signals(pop: Population, rng: np.random.Generator) -> SignalEvents:
    """Signal codes of every case; chronic-condition signals are written into ``pop.onset``/``pop.documented``."""
    subj_out, day_out, dx_out = [], [], []
    dx_keys: list[str] = []
    dx_index: dict[str, int] = {}
    for sig, who, dx_day, lead in _cases_showing(pop, rng, lambda cancer: cancer.signals):
        first = dx_day - lead
        if sig.dx in _CONDITION_OF_DX:
            j = _CONDITION_OF_DX[sig.dx]
            pop.onset[who, j] = np.minimum(pop.onset[who, j], first)
            pop.documented[who, j] = True
            continue
        extra = rng.poisson(sig.repeats, len(who))
        reps = 1 + extra
        subj = np.repeat(who, reps)
        start = np.repeat(first, reps)
        end = np.repeat(dx_day - 3.0, reps)
        frac = rng.random(len(subj))
        is_first = np.concatenate([[True], np.diff(subj) != 0]) if len(subj) else np.zeros(0, bool)
        # the first occurrence is at the lead time, repeats fall between it and the diagnosis
        when = np.where(is_first, start, start + frac * np.maximum(end - start, 0.0))
        if sig.dx not in dx_index:
            dx_index[sig.dx] = len(dx_keys)
            dx_keys.append(sig.dx)
        subj_out.append(subj)
        day_out.append(when)
        dx_out.append(np.full(len(subj), dx_index[sig.dx], np.int16))
    if not subj_out:
        return SignalEvents(np.zeros(0, np.int32), np.zeros(0), np.zeros(0, np.int16), tuple(dx_keys))
    return SignalEvents(np.concatenate(subj_out).astype(np.int32), np.concatenate(day_out), np.concatenate(dx_out), tuple(dx_keys))


def sample_drifts(pop: Population, rng: np.random.Generator) -> Drifts:
    """Lab drifts of the cases (zero magnitude everywhere else)."""
    n, n_labs = pop.n, len(LAB_KEYS)
    magnitude = np.zeros((n, n_labs), dtype=np.float64)
    start = np.full((n, n_labs), np.inf)
    end = np.full((n, n_labs), np.inf)
    for drift, who, dx_day, lead in _cases_showing(pop, rng, lambda cancer: cancer.drifts, history_pad=365.0):
        j = LAB_INDEX[drift.lab]
        magnitude[who, j] = drift.magnitude * rng.uniform(0.5, 1.5, len(who))
        start[who, j] = dx_day - np.maximum(lead, 20.0)
        end[who, j] = dx_day
    return Drifts(magnitude, start, end)


def signal_code_ids(events: SignalEvents, ids: CodeIds) -> np.ndarray:
    """Vocabulary ids of the signal codes (ICD-10 form; dates before Oct 2015 are converted later)."""
    lookup = np.array([ids.dx[k] for k in events.dx_keys], dtype=np.int32)
    return lookup[events.dx] if len(events.dx) else np.zeros(0, np.int32)
