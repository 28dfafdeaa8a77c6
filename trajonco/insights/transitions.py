"""Risk-transition flows: each worker's Low/Moderate/High per chunk, then the manager's final score, by case/control.

Trajectories have different lengths (longer records have more chunks), so the flow figure aligns them on their
*last* chunk: column ``last chunk`` is every patient's final worker step, ``chunk -1`` the one before it, and so on
for ``flow_window`` columns; a patient with fewer chunks is ``No record`` in the earlier columns (as the paper's
Sankey starts from "no record"). The transition table counts every step of every trajectory, window or not.

The final 1-10 score is banded like the workers' levels: 1-3 Low, 4-6 Moderate, 7-10 High (a project choice: the
paper does not band it). A failed worker call is the state ``Failed``.

>>> final_band(3), final_band(4), final_band(7)
('Low', 'Moderate', 'High')
"""

from __future__ import annotations

from collections import Counter

from trajonco.agents.schemas import RiskLevel
from trajonco.insights.inputs import PatientInsightInput
from trajonco.insights.results import (FlowLink, GroupCounts, Transition, TrajectoryPatterns,
                                       TransitionsResult)

NO_RECORD = "No record"
FAILED = "Failed"
LEVELS = (RiskLevel.LOW.value, RiskLevel.MODERATE.value, RiskLevel.HIGH.value)
STATES = (NO_RECORD, FAILED, *LEVELS)
"""Every state of a flow column, bottom to top in the figure."""
FINAL_BANDS = "final score 1-3 Low, 4-6 Moderate, 7-10 High"


def final_band(score: int) -> str:
    """The Low/Moderate/High band of a 1-10 final score."""
    return LEVELS[0] if score <= 3 else LEVELS[1] if score <= 6 else LEVELS[2]


def _state(level: RiskLevel | None) -> str:
    return FAILED if level is None else level.value


def column_names(window: int) -> list[str]:
    """``['chunk -2', 'chunk -1', 'last chunk', 'final score']`` for a window of three chunks."""
    return [f"chunk -{k}" if k else "last chunk" for k in range(window - 1, -1, -1)] + ["final score"]


def aligned_states(patient: PatientInsightInput, window: int) -> list[str]:
    """The patient's states in the flow columns (the last ``window`` chunks, padded on the left, then the band)."""
    steps = [_state(level) for level in patient.trajectory[-window:]] if window else []
    return [NO_RECORD] * (window - len(steps)) + steps + [final_band(patient.risk_score)]


def _groups(counter: Counter, key) -> tuple[int, int]:
    return counter[(key, True)], counter[(key, False)]


def _pattern(patient: PatientInsightInput) -> str | None:
    scored = [LEVELS.index(level.value) for level in patient.trajectory if level is not None]
    if not scored:
        return None
    return "escalated" if scored[-1] > scored[0] else "de_escalated" if scored[-1] < scored[0] else "stable"


def risk_transitions(patients: tuple[PatientInsightInput, ...], window: int) -> TransitionsResult:
    """Counts of every risk step and the flows of the aligned window, per label."""
    longest = max((len(p.trajectory) for p in patients), default=0)
    window = min(window, longest)
    flows: Counter = Counter()
    steps: Counter = Counter()
    patterns: Counter = Counter()
    for p in patients:
        states = aligned_states(p, window)
        for column, (source, target) in enumerate(zip(states, states[1:])):
            flows[((column, source, target), p.case)] += 1
        chain = [_state(level) for level in p.trajectory]
        for source, target in zip(chain, chain[1:]):
            steps[(("chunk", source, target), p.case)] += 1
        steps[(("final", chain[-1] if chain else NO_RECORD, final_band(p.risk_score)), p.case)] += 1
        patterns[(_pattern(p), p.case)] += 1
    rank = {state: i for i, state in enumerate(STATES)}
    flow_keys = sorted({key for key, _ in flows}, key=lambda k: (k[0], rank[k[1]], rank[k[2]]))
    step_keys = sorted({key for key, _ in steps}, key=lambda k: (k[0], rank[k[1]], rank[k[2]]))
    cases = [p for p in patients if p.case]
    controls = [p for p in patients if not p.case]

    def mean(group: list[PatientInsightInput]) -> float | None:
        return round(sum(p.risk_score for p in group) / len(group), 4) if group else None

    return TransitionsResult(
        n=GroupCounts(cases=len(cases), controls=len(controls)), final_bands=FINAL_BANDS,
        chunks=GroupCounts(cases=sum(len(p.trajectory) for p in cases),
                           controls=sum(len(p.trajectory) for p in controls)),
        columns=column_names(window),
        flows=[FlowLink(column=k[0], source=k[1], target=k[2], cases=c, controls=d)
               for k in flow_keys for c, d in [_groups(flows, k)]],
        transitions=[Transition(step=k[0], source=k[1], target=k[2], cases=c, controls=d)
                     for k in step_keys for c, d in [_groups(steps, k)]],
        patterns=TrajectoryPatterns(**{
            name: GroupCounts(cases=patterns[(name, True)], controls=patterns[(name, False)])
            for name in ("escalated", "stable", "de_escalated")}),
        final_score_mean={"cases": mean(cases), "controls": mean(controls)})
