"""`evaluate`: score every display value against the ground truth and sum it up per variable and per method.

Per (patient, method, variable): the truth's `Expected` answer (`expected_values`); an unscorable variable is
counted as such; a value whose display call failed scores 0; ``exact``/``date``/``set`` comparisons use the
deterministic scorers; ``judge`` comparisons ask the judge LLM (identical questions are asked once). Accuracy is the
share of evaluations scoring at least ``threshold``; CIs come from the patient bootstrap; with VISTA and RAG both
present the paired accuracy difference is reported too.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from vista.display import TumorBoardDisplay, VariableSpec, load_variables
from vista.evaluation.bootstrap import Interval, paired_difference, patient_interval
from vista.evaluation.errors import EvaluationError
from vista.evaluation.expected import Expected, expected_values
from vista.evaluation.judge import JudgeScore, judge_value
from vista.evaluation.report import EvaluationReport, ItemScore, MethodResult, VariableResult
from vista.evaluation.scorers import SCORERS
from vista.evaluation.truth import TruthCase
from vista.llm import LLMGateway, LLMResult
from vista.synth.ground_truth import OncologyRecord

METHOD_ORDER = ("vista", "rag")
DEFAULT_THRESHOLD = 8


def _cases(truths: Mapping[int, OncologyRecord | TruthCase]) -> dict[int, TruthCase]:
    out = {}
    for sid, truth in truths.items():
        case = truth if isinstance(truth, TruthCase) else TruthCase(truth)
        if case.subject_id != sid:
            raise EvaluationError(f"truths[{sid}] holds the record of subject {case.subject_id}")
        out[sid] = case
    return out


def _by_method(displays: Iterable[TumorBoardDisplay], cases: Mapping[int, TruthCase]) -> dict[str, list[TumorBoardDisplay]]:
    grouped: dict[str, dict[int, TumorBoardDisplay]] = defaultdict(dict)
    for display in displays:
        if display.subject_id not in cases:
            raise EvaluationError(f"subject {display.subject_id}: {display.method} display has no ground truth")
        if display.subject_id in grouped[display.method]:
            raise EvaluationError(f"subject {display.subject_id}: two {display.method} displays")
        grouped[display.method][display.subject_id] = display
    if not grouped:
        raise EvaluationError("no displays to evaluate")
    order = sorted(grouped, key=lambda m: (METHOD_ORDER.index(m) if m in METHOD_ORDER else len(METHOD_ORDER), m))
    return {m: [grouped[m][sid] for sid in sorted(grouped[m])] for m in order}


class _Judging:
    """Judge calls to make, each distinct question asked once."""

    def __init__(self, gateway: LLMGateway, max_tokens: int | None):
        self.gateway, self.max_tokens = gateway, max_tokens
        self.tasks: dict[tuple[str, str, str, str], asyncio.Task[LLMResult[JudgeScore]]] = {}

    def ask(self, spec: VariableSpec, expected: Expected, candidate: str, subject_id: int) -> tuple[str, str, str, str]:
        key = (spec.key, expected.reference, expected.rubric_hint, candidate)
        if key not in self.tasks:
            self.tasks[key] = asyncio.ensure_future(judge_value(
                self.gateway, spec, expected.reference, expected.rubric_hint, candidate, subject_id=subject_id,
                max_tokens=self.max_tokens))
        return key


def _item(display: TumorBoardDisplay, spec: VariableSpec, expected: Expected, **fields) -> ItemScore:
    value = _value(display, spec.key)
    return ItemScore(subject_id=display.subject_id, method=display.method, key=spec.key, comparison=spec.comparison,
                     reference=expected.reference, value=value.value, **fields)


def _value(display: TumorBoardDisplay, key: str):
    try:
        return display.value_of(key)
    except KeyError:
        raise EvaluationError(f"subject {display.subject_id}: the {display.method} display has no variable {key!r}") from None


async def score_items(by_method: Mapping[str, Sequence[TumorBoardDisplay]], cases: Mapping[int, TruthCase],
                      specs: Sequence[VariableSpec], judge_gateway: LLMGateway, *, threshold: int,
                      judge_max_tokens: int | None) -> tuple[list[ItemScore], int]:
    """Every (display, variable) scored, in display then variable order, and the number of judge calls made."""
    expected = {sid: expected_values(c.record, specs, c.as_of, demographics=c.demographics) for sid, c in cases.items()}
    judging = _Judging(judge_gateway, judge_max_tokens)
    pending: list[tuple[TumorBoardDisplay, VariableSpec, Expected, ItemScore | tuple[str, str, str, str]]] = []
    for displays in by_method.values():
        for display in displays:
            for spec in specs:
                exp = expected[display.subject_id][spec.key]
                value = _value(display, spec.key)
                if not exp.scorable:
                    item = _item(display, spec, exp, scorer="unscorable", rationale=exp.reason or "")
                elif value.origin == "failed":
                    item = _item(display, spec, exp, scorer="display_failed", score=0, correct=False,
                                 rationale=f"the display's call failed: {value.error or 'no reason given'}")
                elif spec.comparison in SCORERS:
                    rule = SCORERS[spec.comparison](exp, value.value)
                    item = _item(display, spec, exp, scorer=spec.comparison.value, score=rule.score,
                                 correct=rule.score >= threshold, rationale=rule.rationale)
                else:
                    pending.append((display, spec, exp, judging.ask(spec, exp, value.value, display.subject_id)))
                    continue
                pending.append((display, spec, exp, item))
    if judging.tasks:
        await asyncio.gather(*judging.tasks.values())
    items = []
    for display, spec, exp, outcome in pending:
        if isinstance(outcome, ItemScore):
            items.append(outcome)
            continue
        result = judging.tasks[outcome].result()
        if result.ok:
            verdict = result.output
            items.append(_item(display, spec, exp, scorer="judge", score=verdict.score,
                               correct=verdict.score >= threshold, rationale=verdict.rationale))
        else:
            error = result.error
            items.append(_item(display, spec, exp, scorer="judge_failed",
                               rationale=f"judge call failed: {error.kind.value}: {error.message}"[:500]))
    return items, len(judging.tasks)


def _interval(per_patient: Mapping[int, list[ItemScore]], value: str, **boot) -> Interval | None:
    rows = [(sum(_num(i, value) for i in scored), len(scored))
            for scored in ([i for i in items if i.evaluated] for items in per_patient.values()) if scored]
    if not rows:
        return None
    return patient_interval([r[0] for r in rows], [r[1] for r in rows], **boot)


def _num(item: ItemScore, value: str) -> float:
    return float(item.correct) if value == "accuracy" else float(item.score or 0)


def _counts(items: Sequence[ItemScore]) -> dict[str, int]:
    return {"n_evaluated": sum(i.evaluated for i in items), "n_correct": sum(bool(i.correct) for i in items),
            "display_failures": sum(i.scorer == "display_failed" for i in items),
            "judge_failures": sum(i.scorer == "judge_failed" for i in items),
            "unscorable": sum(i.scorer == "unscorable" for i in items)}


def summarize(items: Sequence[ItemScore], specs: Sequence[VariableSpec],
              displays: Mapping[str, Sequence[TumorBoardDisplay]], **boot) -> tuple[list[MethodResult], list[VariableResult]]:
    """Per method and per (method, variable): counts, accuracy and mean score with patient-bootstrap CIs."""
    methods, variables = [], []
    scored_keys = {s.key for s in specs if s.scored}
    for method in dict.fromkeys(i.method for i in items):
        mine = [i for i in items if i.method == method]
        patients = sorted({i.subject_id for i in mine})
        for spec in specs:
            rows = [i for i in mine if i.key == spec.key]
            per_patient = {i.subject_id: [i] for i in rows}
            variables.append(VariableResult(
                method=method, key=spec.key, label=spec.label, comparison=spec.comparison, scored=spec.scored,
                n_patients=len(rows), accuracy=_interval(per_patient, "accuracy", **boot),
                mean_score=_interval(per_patient, "score", **boot),
                unscorable_reasons=tuple(dict.fromkeys(i.rationale for i in rows if i.scorer == "unscorable")),
                **_counts(rows)))
        scored = [i for i in mine if i.key in scored_keys]
        per_patient = {sid: [i for i in scored if i.subject_id == sid] for sid in patients}
        made = displays.get(method, ())
        methods.append(MethodResult(
            method=method, display_models=tuple(sorted({d.model for d in made})), n_patients=len(patients),
            display_calls=sum(d.calls for d in made), display_prompt_tokens=sum(d.prompt_tokens for d in made),
            display_completion_tokens=sum(d.completion_tokens for d in made),
            accuracy=_interval(per_patient, "accuracy", **boot), mean_score=_interval(per_patient, "score", **boot),
            **_counts(scored)))
    return methods, variables


def _difference(items: Sequence[ItemScore], specs: Sequence[VariableSpec], a: str, b: str, **boot) -> Interval | None:
    scored_keys = {s.key for s in specs if s.scored}
    tallies: dict[str, dict[int, list[int]]] = {a: defaultdict(lambda: [0, 0]), b: defaultdict(lambda: [0, 0])}
    for item in items:
        if item.method in tallies and item.key in scored_keys and item.evaluated:
            tally = tallies[item.method][item.subject_id]
            tally[0] += bool(item.correct)
            tally[1] += 1
    common = sorted(set(tallies[a]) & set(tallies[b]))
    if not common:
        return None
    ta, tb = tallies[a], tallies[b]
    return paired_difference([ta[s][0] for s in common], [ta[s][1] for s in common],
                             [tb[s][0] for s in common], [tb[s][1] for s in common], **boot)


async def evaluate(displays: Iterable[TumorBoardDisplay], truths: Mapping[int, OncologyRecord | TruthCase],
                   judge_gateway: LLMGateway, *, variables: Sequence[VariableSpec] | None = None,
                   threshold: int = DEFAULT_THRESHOLD, level: float = 0.95, n_resamples: int = 2000, seed: int = 0,
                   judge_max_tokens: int | None = 256) -> EvaluationReport:
    """Score ``displays`` (any mix of methods, one per patient and method) against ``truths`` with ``judge_gateway``.

    ``truths`` maps subject id to its `OncologyRecord` or a `TruthCase` (adding demographics and the as-of date).
    """
    if not 0 <= threshold <= 10:
        raise EvaluationError(f"threshold must be within 0..10, not {threshold}")
    cases = _cases(truths)
    by_method = _by_method(displays, cases)
    specs = tuple(variables) if variables is not None else load_variables()
    items, judge_calls = await score_items(by_method, cases, specs, judge_gateway, threshold=threshold,
                                           judge_max_tokens=judge_max_tokens)
    boot = {"level": level, "n_resamples": n_resamples, "seed": seed}
    methods, per_variable = summarize(items, specs, by_method, **boot)
    names = list(by_method)
    pair = ("vista", "rag") if {"vista", "rag"} <= set(names) else (tuple(names[:2]) if len(names) >= 2 else ())
    difference = _difference(items, specs, *pair, **boot) if pair else None
    return EvaluationReport(
        judge_model=judge_gateway.config.model, judge_backend=judge_gateway.backend.name, threshold=threshold,
        level=level, n_resamples=n_resamples, seed=seed, methods=tuple(methods), variables=tuple(per_variable),
        difference=difference, difference_methods=pair if difference is not None else (), judge_calls=judge_calls,
        items=tuple(items))
