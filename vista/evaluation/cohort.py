"""A stored cohort evaluated patient by patient: which patients, one patient's scored display, and the report of many.

The cohort job (``vista evaluate-cohort``) scores each patient on its own — `load_stored_case` reads the display
(and, from a graph store, the demographics), `score_stored_case` asks the judge — and gathers the report at the end
from the patients' results (`cohort_report`), so a job stopped half-way keeps every patient already scored.
`vista evaluate` scores a handful of displays at once instead (`vista.evaluation.evaluate.evaluate`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from vista.display import TumorBoardDisplay, VariableSpec
from vista.evaluation.answer import TruthSource
from vista.evaluation.errors import EvaluationError
from vista.evaluation.evaluate import as_truth_sources, report_from_items, score_items, source_name
from vista.evaluation.options import with_demographics
from vista.evaluation.report import EvaluationReport, ItemScore
from vista.shared.llm import LLMGateway


class EvaluatedPatient(BaseModel):
    """One patient's result: the display scored, its items, the judge calls made, where the truth came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_id: int
    display: TumorBoardDisplay
    items: tuple[ItemScore, ...]
    judge_calls: int
    truth_source: str
    judge_endpoint: str
    judge_backend: str
    seconds: float

    @property
    def judge_failures(self) -> int:
        """Items whose judge call gave no verdict (scored 0, counted as wrong)."""
        return sum(item.scorer == "judge_failed" for item in self.items)


@dataclass(frozen=True, slots=True)
class StoredCase:
    """What one patient's scoring needs: its stored display and its truth (with demographics when known)."""

    display: TumorBoardDisplay
    truth: TruthSource


def stored_display_subjects(store: Path) -> set[int]:
    """The subjects with a stored display (``display/<subject>.json``); `EvaluationError` when the store has none."""
    from vista.display.store import DISPLAY_DIR

    folder = store / DISPLAY_DIR
    if not folder.is_dir():
        raise EvaluationError(f"--store {store}: no {DISPLAY_DIR}/ folder (build displays with `vista build --stages "
                              "graph,toa,display` or `vista display`)")
    return {int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()}


def select_subjects(store: Path, wanted: Iterable[int] | None, truths: Mapping[int, object],
                    displays: set[int]) -> list[int]:
    """The patients to evaluate: ``wanted`` (each must have a display and a truth), else every display with a truth."""
    if wanted:
        for sid in wanted:
            if sid not in displays:
                raise EvaluationError(f"--subjects: {store} holds no display of subject {sid}")
            if sid not in truths:
                raise EvaluationError(f"--subjects: no truth for subject {sid} in --truth/--references")
        return sorted(set(wanted))
    chosen = sorted(displays & set(truths))
    if not chosen:
        raise EvaluationError(f"none of the {len(displays)} display(s) in {store} has a truth in --truth/--references")
    return chosen


def load_stored_case(store: Path, subject_id: int, truths: Mapping[int, object]) -> StoredCase:
    """The patient's display and truth (`EvaluationError` when ``truths`` has none). From a graph store holding the
    patient's graph the display is checked against it (a display built from another version of the graph is
    refused) and the demographics are read from it; without one, the demographics variable is unscorable."""
    from vista.display import DisplayStore

    if subject_id not in truths:
        raise EvaluationError(f"subject {subject_id}: no truth in --truth/--references")
    truth = truths[subject_id]
    graph = _stored_graph(store, subject_id)
    displays = DisplayStore(store)
    display = displays.load(subject_id) if graph is None else displays.load(subject_id, graph)
    demographics = graph.info.demographics if graph is not None else None
    case = as_truth_sources({subject_id: with_demographics(truth, demographics)})[subject_id]
    return StoredCase(display, case)


def _stored_graph(store: Path, subject_id: int):
    """The patient's graph when ``store`` is a graph store holding it, else None."""
    from vista.graph.store import GraphStore, is_graph_store

    if not is_graph_store(store):
        return None
    graphs = GraphStore(store)
    return graphs.load(subject_id) if subject_id in graphs else None


async def score_stored_case(case: StoredCase, judge: LLMGateway, specs: Sequence[VariableSpec], *, threshold: int,
                            judge_max_tokens: int | None, judge_backend: str, judge_endpoint: str) -> EvaluatedPatient:
    """Score every variable of one patient's display (rule scorers; judge calls through ``judge``, a failed one
    counted as wrong). ``judge_backend``/``judge_endpoint`` name who judged, for the report."""
    started = time.perf_counter()
    display, truth = case.display, case.truth
    items, calls = await score_items({display.method: [display]}, {display.subject_id: truth}, specs, judge,
                                     threshold=threshold, judge_max_tokens=judge_max_tokens)
    return EvaluatedPatient(subject_id=display.subject_id, display=display, items=tuple(items), judge_calls=calls,
                            truth_source=source_name(truth), judge_endpoint=judge_endpoint,
                            judge_backend=judge_backend, seconds=time.perf_counter() - started)


def cohort_report(patients: Sequence[EvaluatedPatient], specs: Sequence[VariableSpec], *, judge_model: str,
                  threshold: int, n_resamples: int) -> EvaluationReport | None:
    """The `EvaluationReport` over ``patients`` (None when there is none): headline accuracy, per variable, patient
    information apart, judge failures counted, the display and judge models named."""
    if not patients:
        return None
    by_method: dict[str, list[TumorBoardDisplay]] = {}
    for patient in sorted(patients, key=lambda p: p.subject_id):
        by_method.setdefault(patient.display.method, []).append(patient.display)
    first = patients[0]
    return report_from_items(
        [item for p in patients for item in p.items], specs, by_method, judge_model=judge_model,
        judge_backend=first.judge_backend, judge_endpoint=first.judge_endpoint,
        judge_is_display_model=judge_model in {p.display.model for p in patients},
        judge_calls=sum(p.judge_calls for p in patients),
        truth_sources=tuple(sorted({p.truth_source for p in patients})), threshold=threshold, n_resamples=n_resamples)
