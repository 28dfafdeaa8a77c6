"""`evaluate`: score every display value against the truth and sum it up per variable and per method.

Per (patient, method, variable): the truth's `Expected` answer (any `TruthSource`: the generator's records via
`TruthCase`, or a clinician's reference answers via `vista.evaluation.references`); an unscorable variable is
counted as such; a value whose display call failed scores 0; a value whose answer cited no event is scored as the
"Not found" it shows (right only when the truth is silent) and counted (``uncited``); ``exact``/``date``/``set``
comparisons use the deterministic scorers; ``judge`` comparisons ask the judge LLM (identical questions are asked
once). A judge call
that fails also scores 0: it is counted as wrong and reported in its own column, never dropped from the denominator
(otherwise a failing judge would raise the accuracy). Accuracy is the share of evaluations scoring at least
``threshold``; CIs come from the patient bootstrap.

The headline accuracy is over the scored tumor-board variables; the patient-information variables (demographics,
height/weight, allergies, prior conditions, medications) are reported apart — the display copies demographics from
the same structured data the generator's reference is built from, so they would always score 10/10. With VISTA and
RAG both present the paired headline accuracy difference is reported too. When the judge is the model that wrote
the displays a one-line warning is logged and the report says so (the paper judges with a different, stronger
model).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from vista.display import TumorBoardDisplay, VariableSpec, load_variables
from vista.shared.bootstrap import Interval, paired_difference, patient_interval
from vista.evaluation.errors import EvaluationError
from vista.evaluation.answer import Expected, TruthSource
from vista.evaluation.judge import JudgeScore, judge_value
from vista.evaluation.report import EvaluationReport, ItemScore, MethodResult, VariableResult
from vista.evaluation.scorers import SCORERS
from vista.shared.llm import LLMGateway, LLMResult
from vista.shared.llm.config import redact_url

log = logging.getLogger(__name__)

METHOD_ORDER = ("vista", "rag")
DEFAULT_THRESHOLD = 8


def as_truth_sources(truths: Mapping[int, object]) -> dict[int, TruthSource]:
    """Every truth as a `TruthSource` (a bare generator `OncologyRecord` is wrapped in a `TruthCase`)."""
    out = {}
    for sid, truth in truths.items():
        if hasattr(truth, "expected"):
            case = truth
        else:  # the generator's record: adapt it (imported here so clinician truth needs no vista.shared.synth)
            from vista.evaluation.truth import TruthCase

            case = TruthCase(truth)  # type: ignore[arg-type]
        if case.subject_id != sid:
            raise EvaluationError(f"truths[{sid}] holds the record of subject {case.subject_id}")
        out[sid] = case
    return out


def _by_method(displays: Iterable[TumorBoardDisplay], cases: Mapping[int, TruthSource]) -> dict[str, list[TumorBoardDisplay]]:
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
    """One scored item; the value is the one shown (an uncited answer is scored as the 'Not found' it shows)."""
    value = _value(display, spec.key)
    return ItemScore(subject_id=display.subject_id, method=display.method, key=spec.key, comparison=spec.comparison,
                     reference=expected.reference, value=value.shown, uncited=value.uncited, **fields)


def _value(display: TumorBoardDisplay, key: str):
    try:
        return display.value_of(key)
    except KeyError:
        raise EvaluationError(f"subject {display.subject_id}: the {display.method} display has no variable {key!r}") from None


async def score_items(by_method: Mapping[str, Sequence[TumorBoardDisplay]], cases: Mapping[int, TruthSource],
                      specs: Sequence[VariableSpec], judge_gateway: LLMGateway, *, threshold: int,
                      judge_max_tokens: int | None) -> tuple[list[ItemScore], int]:
    """Every (display, variable) scored, in display then variable order, and the number of judge calls made."""
    expected = {sid: _expected_of(c, specs) for sid, c in cases.items()}
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
                elif spec.comparison in SCORERS:  # `shown`: an uncited answer is scored as the Not found it shows
                    rule = SCORERS[spec.comparison](exp, value.shown)
                    item = _item(display, spec, exp, scorer=spec.comparison.value, score=rule.score,
                                 correct=rule.score >= threshold, rationale=rule.rationale)
                else:
                    pending.append((display, spec, exp, judging.ask(spec, exp, value.shown, display.subject_id)))
                    continue
                pending.append((display, spec, exp, item))
    if judging.tasks:
        await asyncio.gather(*judging.tasks.values(), return_exceptions=True)
    items = []
    for display, spec, exp, outcome in pending:
        if isinstance(outcome, ItemScore):
            items.append(outcome)
            continue
        failure = _judge_failure(judging.tasks[outcome])
        if failure is None:
            verdict = judging.tasks[outcome].result().output
            items.append(_item(display, spec, exp, scorer="judge", score=verdict.score,
                               correct=verdict.score >= threshold, rationale=verdict.rationale))
        else:  # counted as wrong (score 0), so a failing judge cannot raise the accuracy
            items.append(_item(display, spec, exp, scorer="judge_failed", score=0, correct=False,
                               rationale=f"judge call failed: {failure}"[:500]))
    return items, len(judging.tasks)


def _judge_failure(task: asyncio.Task[LLMResult[JudgeScore]]) -> str | None:
    """Why a judge call gave no verdict (an error result or an exception), or None when it gave one."""
    if (exc := task.exception()) is not None:
        return f"{type(exc).__name__}: {exc}"
    result = task.result()
    if result.ok:
        return None
    error = result.error
    return f"{error.kind.value}: {error.message}" if error is not None else "no verdict"


def _expected_of(case: TruthSource, specs: Sequence[VariableSpec]) -> dict[str, Expected]:
    expected = case.expected(specs)
    if missing := [s.key for s in specs if s.key not in expected]:
        raise EvaluationError(f"subject {case.subject_id}: the truth gives no expected answer for {missing}")
    return expected


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
            "unscorable": sum(i.scorer == "unscorable" for i in items),
            "uncited": sum(i.uncited and i.scorer != "unscorable" for i in items)}


def _overall(method: str, items: Sequence[ItemScore], keys: set[str], patients: Sequence[int],
             made: Sequence[TumorBoardDisplay], **boot) -> MethodResult:
    chosen = [i for i in items if i.key in keys]
    per_patient = {sid: [i for i in chosen if i.subject_id == sid] for sid in patients}
    return MethodResult(
        method=method, display_models=tuple(sorted({d.model for d in made})), n_patients=len(patients),
        display_calls=sum(d.calls for d in made), display_prompt_tokens=sum(d.prompt_tokens for d in made),
        display_completion_tokens=sum(d.completion_tokens for d in made),
        accuracy=_interval(per_patient, "accuracy", **boot), mean_score=_interval(per_patient, "score", **boot),
        **_counts(chosen))


def summarize(items: Sequence[ItemScore], specs: Sequence[VariableSpec], displays: Mapping[str, Sequence[TumorBoardDisplay]],
              **boot) -> tuple[list[MethodResult], list[VariableResult], list[MethodResult]]:
    """Per method: the headline (scored tumor-board variables), per variable, and the patient information apart —
    counts, accuracy and mean score with patient-bootstrap CIs."""
    methods, variables, patient_info = [], [], []
    headline = {s.key for s in specs if s.headline}
    patient = {s.key for s in specs if s.scored and s.section == "patient"}
    for method in dict.fromkeys(i.method for i in items):
        mine = [i for i in items if i.method == method]
        patients = sorted({i.subject_id for i in mine})
        for spec in specs:
            rows = [i for i in mine if i.key == spec.key]
            per_patient = {i.subject_id: [i] for i in rows}
            variables.append(VariableResult(
                method=method, key=spec.key, label=spec.label, comparison=spec.comparison, scored=spec.scored,
                section=spec.section, n_patients=len(rows), accuracy=_interval(per_patient, "accuracy", **boot),
                mean_score=_interval(per_patient, "score", **boot),
                unscorable_reasons=tuple(dict.fromkeys(i.rationale for i in rows if i.scorer == "unscorable")),
                **_counts(rows)))
        made = displays.get(method, ())
        methods.append(_overall(method, mine, headline, patients, made, **boot))
        if patient:
            patient_info.append(_overall(method, mine, patient, patients, made, **boot))
    return methods, variables, patient_info


def _difference(items: Sequence[ItemScore], specs: Sequence[VariableSpec], a: str, b: str, **boot) -> Interval | None:
    """Headline accuracy of ``a`` minus ``b`` over the patients both were evaluated on (resampled together)."""
    scored_keys = {s.key for s in specs if s.headline}
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


def judge_is_display_model(judge_gateway: LLMGateway, displays: Iterable[TumorBoardDisplay]) -> bool:
    """True when the judge is a model that wrote some of the displays (by model name)."""
    return judge_gateway.config.model in {d.model for d in displays}


async def evaluate(displays: Iterable[TumorBoardDisplay], truths: Mapping[int, object],
                   judge_gateway: LLMGateway, *, variables: Sequence[VariableSpec] | None = None,
                   threshold: int = DEFAULT_THRESHOLD, level: float = 0.95, n_resamples: int = 2000, seed: int = 0,
                   judge_max_tokens: int | None = 256) -> EvaluationReport:
    """Score ``displays`` (any mix of methods, one per patient and method) against ``truths`` with ``judge_gateway``.

    ``truths`` maps subject id to a `TruthSource`: a `TruthCase` (the generator's record with demographics and the
    as-of date; a bare `OncologyRecord` is wrapped in one) or a `ClinicianCase` (clinician reference answers).
    """
    if not 0 <= threshold <= 10:
        raise EvaluationError(f"threshold must be within 0..10, not {threshold}")
    cases = as_truth_sources(truths)
    by_method = _by_method(displays, cases)
    specs = tuple(variables) if variables is not None else load_variables()
    all_displays = [d for made in by_method.values() for d in made]
    same = judge_is_display_model(judge_gateway, all_displays)
    if same:
        log.warning("the judge %s is also the model that wrote the displays; set a different, stronger judge "
                    "(--judge-llm or VISTA_JUDGE_LLM_*) for a fair evaluation", judge_gateway.config.model)
    items, judge_calls = await score_items(by_method, cases, specs, judge_gateway, threshold=threshold,
                                           judge_max_tokens=judge_max_tokens)
    return report_from_items(
        items, specs, by_method, judge_model=judge_gateway.config.model, judge_backend=judge_gateway.backend.name,
        judge_endpoint=redact_url(judge_gateway.endpoint), judge_is_display_model=same, judge_calls=judge_calls,
        truth_sources=tuple(sorted({source_name(c) for c in cases.values()})), threshold=threshold, level=level,
        n_resamples=n_resamples, seed=seed)


def report_from_items(items: Sequence[ItemScore], specs: Sequence[VariableSpec],
                      by_method: Mapping[str, Sequence[TumorBoardDisplay]], *, judge_model: str, judge_backend: str,
                      judge_endpoint: str = "", judge_is_display_model: bool = False, judge_calls: int = 0,
                      truth_sources: Sequence[str] = (), threshold: int = DEFAULT_THRESHOLD, level: float = 0.95,
                      n_resamples: int = 2000, seed: int = 0) -> EvaluationReport:
    """The report of scored items (all patients at once, or gathered from a cohort job's per-patient parts)."""
    boot = {"level": level, "n_resamples": n_resamples, "seed": seed}
    methods, per_variable, patient_info = summarize(items, specs, by_method, **boot)
    names = list(by_method)
    pair = ("vista", "rag") if {"vista", "rag"} <= set(names) else (tuple(names[:2]) if len(names) >= 2 else ())
    difference = _difference(items, specs, *pair, **boot) if pair else None
    return EvaluationReport(
        judge_model=judge_model, judge_backend=judge_backend, judge_endpoint=judge_endpoint,
        judge_is_display_model=judge_is_display_model, truth_sources=tuple(truth_sources), threshold=threshold,
        level=level, n_resamples=n_resamples, seed=seed, methods=tuple(methods), variables=tuple(per_variable),
        patient_info=tuple(patient_info), difference=difference,
        difference_methods=pair if difference is not None else (), judge_calls=judge_calls, items=tuple(items))


def source_name(case: TruthSource) -> str:
    """Where a patient's truth came from, in words (for the report header)."""
    source = getattr(case, "source", "")
    kind = "clinician reference answers" if hasattr(case, "answers") else "generator ground truth"
    return f"{kind} ({source})" if source else kind
