"""The AI query bridge: a question in words becomes a `Plan` (one model call), the plan runs deterministically over
the patient's store entry (`vista.query.execute`), and the answer states the value, its unit and date and the graph
node ids it cites. The model translates; it never does the arithmetic.

1. One call fills `PlanDraft` (a flat, bounded JSON schema, so it works under the embedded model's grammar and on
   any endpoint), shown the patient's own lab, vital and drug names.
2. Names are resolved against the patient's vocabulary; an unknown lab or drug is re-asked once, offering the
   nearest names this patient has.
3. The plan runs (`run_plan`). A template writes the answer (`template_answer`); with ``sentence="llm"`` a model
   writes it instead, and the sentence is kept only if every number and date in it is one of the result's
   (`sentence_agrees`), else the template is used.
4. A question the plan cannot express (the model says so, or its plan still names nothing the patient has) falls
   back to `vista ask` over the stored timeline: ``route="timeline"``.

Entry points: `answer_question` (async) and `answer_question_sync`; `vista query` (`vista.query_cli`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import time
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vista.graph import GraphStore
from vista.query.ask import check_question
from vista.query.entry import PatientEntry, open_entry
from vista.query.errors import PlanError, QueryError, UnknownNameError
from vista.query.execute import PlanResult, run_plan
from vista.query.model import QueryUsage
from vista.query.plan import Aggregate, EpisodeSelector, Plan, Window
from vista.shared.llm import CallRecord, LLMCaller, Message, system, user
from vista.shared.prompts import PromptFolder

PLAN_AGENT = "query_plan"
SENTENCE_AGENT = "query_sentence"
VOCABULARY_NAMES = 60
"""Most names of each kind shown to the planning model (the patient's most frequent)."""
PROMPTS = PromptFolder("vista.query", suffix=".md")
Route = Literal["plan", "timeline"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlanDraft(_Frozen):
    """What the planning model fills: flat and bounded (every field required, strings capped, enums closed)."""

    expressible: bool = Field(description="False when no value, date or count in the record answers the question.")
    target: Literal["measure", "events", "notes", "episodes"]
    name: str = Field(max_length=80, description="Lab, vital, drug or procedure name (or code); words for notes.")
    aggregate: Aggregate
    start: dt.date | None
    end: dt.date | None
    line: int | None = Field(ge=1, le=20, description="Treatment line number the question names.")
    during: str | None = Field(max_length=40, description="A drug the question asks 'during'.")


class SentenceDraft(_Frozen):
    sentence: str = Field(max_length=300)


class BridgeConfig(_Frozen):
    """Settings of the bridge: who writes the sentence, answer token caps, whether to fall back to `vista ask`."""

    sentence: Literal["template", "llm"] = "template"
    plan_max_tokens: int = Field(default=160, gt=0)
    sentence_max_tokens: int = Field(default=120, gt=0)
    fallback: bool = Field(default=True, description="Send questions the plan cannot express to `vista ask`.")


class BridgeAnswer(BaseModel):
    """The answer to one question: the plan and route taken, the value with its unit and date, the sentence, and the
    ids it cites (graph ``e<k>`` ids, or timeline ``t<k>`` ids, both opened by `vista source`)."""

    model_config = ConfigDict(frozen=True)

    subject_id: int
    question: str
    plan: Plan | None
    route: Route
    value: float | int | str | None
    unit: str | None
    date: dt.date | None
    answer: str
    cited: tuple[str, ...]
    status: Literal["answered", "no_rows", "failed"]
    sentence_by: Literal["template", "llm"] = "template"
    reasked: bool = False
    usage: QueryUsage = QueryUsage()
    error: str | None = None


# ---------------------------------------------------------------------------------------------------- answer text
def format_value(value: float | int | str | None) -> str:
    """A value as the answer writes it: integers plainly, other numbers with at most 6 significant digits.

    >>> format_value(13.2), format_value(91.30000305175781), format_value(7), format_value(2.0)
    ('13.2', '91.3', '7', '2')
    """
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def _span(result: PlanResult) -> str:
    s, e = result.window_start, result.window_end
    if s and e:
        return f" between {s} and {e}"
    return f" from {s}" if s else (f" up to {e}" if e else "")


_AGG_WORDS = {"min": "lowest", "max": "highest", "first": "first", "last": "most recent"}


def template_answer(result: PlanResult) -> str:
    """One sentence from the result alone (the default; numbers and dates copied, never computed by a model).

    >>> from vista.query.plan import Plan
    >>> r = PlanResult(subject_id=1, plan=Plan(measure="hgb", aggregate="min"), target="LOINC//718-7",
    ...                target_name="hemoglobin", aggregate="min", value=9.1, unit="g/dL", date=dt.date(2020, 2, 5), n=3,
    ...                cited=("e1",))
    >>> template_answer(r)
    'The lowest hemoglobin was 9.1 g/dL on 2020-02-05 (of 3 rows) [e1].'
    """
    name, agg, n = result.target_name, result.aggregate, result.n
    unit = f" {result.unit}" if result.unit else ""
    more = ", ..." if len(result.cited) > 12 or result.cited_omitted else ""
    cites = f" [{', '.join(result.cited[:12])}{more}]"
    span = _span(result)
    if n == 0:
        return f"No {name} rows were found{span}."
    return f"{_body(result, name, agg, n, unit, span)}{cites}."


def _rows(n: int) -> str:
    """``1 row``, ``3 rows``."""
    return f"{n} row" if n == 1 else f"{n} rows"


def _body(result: PlanResult, name: str, agg: str, n: int, unit: str, span: str) -> str:
    value = format_value(result.value)
    if result.plan.episodes is not None:
        if agg in ("count", "list"):
            return f"{n} episode(s) match {name}{span}, the first starting on {result.date}"
        return f"Episode {value} ({name}) started on {result.date}"
    if agg in _AGG_WORDS:
        if result.value is None:
            return f"The {_AGG_WORDS[agg]} {name}{span} was on {result.date}"
        return f"The {_AGG_WORDS[agg]} {name}{span} was {value}{unit} on {result.date} (of {_rows(n)})"
    if agg == "count":
        return f"{value} {name} row(s){span}, the last on {result.date}"
    if agg == "mean":
        return f"The mean {name}{span} was {value}{unit} over {_rows(n)}, the last on {result.date}"
    if agg == "change":
        return f"{name.capitalize()} changed by {value}{unit}{span} over {_rows(n)}, to the last on {result.date}"
    if agg == "trend":
        return f"{name.capitalize()} is {result.trend}{span}: slope {value}{unit} over {_rows(n)}, the last on {result.date}"
    return f"{n} {name} row(s){span}, the first on {result.date}"


_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)?")


def sentence_agrees(sentence: str, result: PlanResult, question: str = "") -> bool:
    """True when every date in ``sentence`` is one of the result's (its date, window ends, listed dates) or the
    question's, and every number equals the result's value, row count, or a number the question or the target's
    name holds (compared as written: the value to the digits the sentence gives).

    >>> from vista.query.plan import Plan
    >>> r = PlanResult(subject_id=1, plan=Plan(measure="hgb", aggregate="min"), target="LOINC//718-7",
    ...                target_name="hemoglobin", aggregate="min", value=9.1, unit="g/dL", date=dt.date(2020, 2, 5), n=3, cited=("e1",))
    >>> sentence_agrees("The lowest hemoglobin was 9.1 g/dL on 2020-02-05.", r)
    True
    >>> sentence_agrees("The lowest hemoglobin was 9.4 g/dL on 2020-02-05.", r), sentence_agrees("Hb 9.1 on 2020-02-06.", r)
    (False, False)
    """
    dates = {str(d) for d in (result.date, result.window_start, result.window_end, *result.dates) if d}
    dates |= set(_DATE.findall(question))
    found_dates = _DATE.findall(sentence)
    if any(d not in dates for d in found_dates):
        return False
    rest = _DATE.sub(" ", sentence)
    allowed = {float(x.replace(",", ".")) for x in _NUMBER.findall(f"{question} {result.target_name}")}
    allowed.add(float(result.n))
    for text in _NUMBER.findall(rest):
        number = float(text.replace(",", "."))
        if number in allowed:
            continue
        if isinstance(result.value, (int, float)) and not isinstance(result.value, bool):
            decimals = len(text.split(".")[1]) if "." in text else 0
            if round(abs(float(result.value)), decimals) == abs(number) and (decimals > 0 or float(result.value).is_integer()):
                continue
        return False
    return True


# ---------------------------------------------------------------------------------------------------- planning
def vocabulary_text(entry: PatientEntry) -> str:
    """The patient's names the planning model may use: measurements, then drugs and other coded events."""
    terms = sorted(entry.vocabulary.terms.values(), key=lambda t: (-t.rows, t.code))
    measures = [f"{t.name} ({t.unit})" if t.unit else t.name for t in terms if t.numeric][:VOCABULARY_NAMES]
    drugs = [t.name for t in terms if t.code.startswith("RXNORM//")][:VOCABULARY_NAMES]
    procedures = [t.name for t in terms if t.code.startswith(("CPT//", "HCPCS//"))][:VOCABULARY_NAMES]
    return "\n".join([f"Labs and vitals: {'; '.join(dict.fromkeys(measures))}",
                      f"Drugs: {'; '.join(dict.fromkeys(drugs)) or 'none'}",
                      f"Procedures and imaging: {'; '.join(dict.fromkeys(procedures)) or 'none'}"])


def plan_messages(question: str, entry: PatientEntry, correction: str | None = None) -> list[Message]:
    body = f"The patient's names:\n{vocabulary_text(entry)}\n\nQuestion: {question}"
    if correction:
        body += f"\n\n{correction}"
    return [system(PROMPTS.text("plan")), user(body)]


def plan_from_draft(draft: PlanDraft) -> Plan:
    """The `Plan` a draft describes (`PlanError` when it describes none, e.g. an empty name). A treatment line
    narrows by its timeline episode only when the question gives no dates: dates it gives are the window asked
    about.

    >>> d = PlanDraft(expressible=True, target="measure", name="hemoglobin", aggregate="min", start=None, end=None,
    ...               line=1, during=None)
    >>> plan_from_draft(d).compact()
    '{"measure":"hemoglobin","episode":{"kind":"treatment_line","line":1},"aggregate":"min"}'
    >>> plan_from_draft(d.model_copy(update={"start": dt.date(2023, 2, 1)})).compact()
    '{"measure":"hemoglobin","window":{"start":"2023-02-01"},"aggregate":"min"}'
    """
    name = draft.name.strip()
    window = Window(start=draft.start, end=draft.end) if (draft.start or draft.end) else None
    if window is not None and window.start and window.end and window.end < window.start:
        window = Window(start=window.end, end=window.start)
    line = EpisodeSelector(kind="treatment_line", line=draft.line) if draft.line and window is None else None
    during = (draft.during or "").strip() or None
    fields: dict[str, object] = {"aggregate": draft.aggregate, "window": window, "during": during}
    if draft.target == "episodes":
        selector = EpisodeSelector(kind="treatment_line", line=draft.line) if draft.line else EpisodeSelector(kind="treatment_line")
        return Plan(episodes=selector, **fields)
    if not name:
        raise PlanError(f"the plan names no {draft.target}")
    target = {"measure": name, "events": [name], "notes": re.escape(name)}[draft.target]
    return Plan(**{draft.target: target}, episode=line, **fields)


async def _draft(llm: LLMCaller, messages: list[Message], subject_id: int, config: BridgeConfig,
                 records: list[CallRecord]) -> PlanDraft | None:
    result = await llm.complete(messages, PlanDraft, agent=PLAN_AGENT, patient_id=subject_id,
                                max_tokens=config.plan_max_tokens)
    records.append(result.usage)
    return result.output if result.ok else None


def _unknown_names(error: UnknownNameError, entry: PatientEntry) -> str:
    """The re-ask: the name is not the patient's; the nearest names it has (or, when none is near — a small model
    may write a date there — its most frequent lab, vital and drug names)."""
    near = list(error.nearest)
    if not near:
        terms = sorted(entry.vocabulary.terms.values(), key=lambda t: (not t.numeric, -t.rows, t.code))
        near = list(dict.fromkeys(t.name for t in terms if t.numeric or t.code.startswith("RXNORM//")))[:12]
    return (f"The name {error.name!r} is not in this patient's record. The nearest names it has are: "
            f"{', '.join(near) or 'none'}. Answer again with one of them.")


async def _sentence(llm: LLMCaller, question: str, result: PlanResult, config: BridgeConfig,
                    records: list[CallRecord]) -> str | None:
    facts = (f"Question: {question}\nResult: {result.aggregate} of {result.target_name}{_span(result)} = "
             f"{format_value(result.value)} {result.unit or ''}, date {result.date}, {result.n} rows.")
    answer = await llm.complete([system(PROMPTS.text("sentence")), user(facts)], SentenceDraft, agent=SENTENCE_AGENT,
                                patient_id=result.subject_id, max_tokens=config.sentence_max_tokens)
    records.append(answer.usage)
    return answer.output.sentence.strip() if answer.ok else None


# ---------------------------------------------------------------------------------------------------- answering
def answer_plan(entry: PatientEntry, plan: Plan, question: str = "") -> BridgeAnswer:
    """Run ``plan`` (no model) and write its template answer; errors (unknown names...) are raised."""
    result = run_plan(entry, plan)
    return _answered(entry, question or plan.compact(), result)


def _answered(entry: PatientEntry, question: str, result: PlanResult, sentence: str | None = None,
              records: Sequence[CallRecord] = (), reasked: bool = False) -> BridgeAnswer:
    text, by = template_answer(result), "template"
    if sentence is not None and sentence_agrees(sentence, result, question):
        text, by = sentence, "llm"
    return BridgeAnswer(subject_id=entry.subject_id, question=question, plan=result.plan, route="plan",
                        value=result.value, unit=result.unit, date=result.date, answer=text, cited=result.cited,
                        status="answered" if result.n else "no_rows", sentence_by=by, reasked=reasked,
                        usage=QueryUsage.of(list(records)))


def _entry_of(entry_or_store: PatientEntry | GraphStore | str | os.PathLike, subject_id: int) -> PatientEntry:
    if isinstance(entry_or_store, PatientEntry):
        if entry_or_store.subject_id != subject_id:
            raise QueryError(f"the entry is of subject {entry_or_store.subject_id}, not {subject_id}")
        return entry_or_store
    root = entry_or_store.root if isinstance(entry_or_store, GraphStore) else entry_or_store
    return open_entry(root, subject_id)


async def answer_question(entry_or_store: PatientEntry | GraphStore | str | os.PathLike, subject_id: int,
                          question: str, llm: LLMCaller, config: BridgeConfig = BridgeConfig()) -> BridgeAnswer:
    """Answer ``question`` about ``subject_id`` (see the module docstring). ``entry_or_store`` is an opened
    `PatientEntry` (open it once per patient: its index is built on first use) or a graph store (path or
    `GraphStore`). Raises `QueryError` for a bad question, subject or store; model failures are reported in the
    answer (``status="failed"``), never raised."""
    started = time.perf_counter()
    entry = _entry_of(entry_or_store, subject_id)
    question = check_question(question, subject_id)
    records: list[CallRecord] = []
    draft = await _draft(llm, plan_messages(question, entry), subject_id, config, records)
    reasked, why = False, "the model's plan could not be read"
    result = None
    if draft is not None and draft.expressible:
        try:
            result = run_plan(entry, plan_from_draft(draft))
        except UnknownNameError as exc:
            reasked = True
            draft = await _draft(llm, plan_messages(question, entry, _unknown_names(exc, entry)), subject_id, config, records)
            try:
                result = run_plan(entry, plan_from_draft(draft)) if draft is not None and draft.expressible else None
            except PlanError as again:
                why = str(again)
        except PlanError as exc:
            why = str(exc)
    elif draft is not None:
        why = "the model judged the question not expressible as a plan"
    if result is not None:
        sentence = await _sentence(llm, question, result, config, records) if config.sentence == "llm" else None
        return _answered(entry, question, result, sentence, records, reasked)
    return await _fallback(entry, question, llm, why, records, reasked, config, started)


async def _fallback(entry: PatientEntry, question: str, llm: LLMCaller, why: str, records: list[CallRecord],
                    reasked: bool, config: BridgeConfig, started: float) -> BridgeAnswer:
    """`vista ask` over the stored timeline (route ``timeline``), or a failed answer saying why it could not."""
    common = {"subject_id": entry.subject_id, "question": question, "plan": None, "route": "timeline", "value": None,
              "unit": None, "date": None, "reasked": reasked}
    if not config.fallback or entry.timeline is None:
        missing = "no timeline is stored to read" if entry.timeline is None else "the fallback is off"
        return BridgeAnswer(**common, answer="", cited=(), status="failed", usage=QueryUsage.of(records),
                            error=f"{why}; {missing}")
    from vista.query.ask import ask

    answer = await ask(question, entry.timeline, entry.graph, llm)  # type: ignore[arg-type]
    usage = QueryUsage.of(records)
    total = QueryUsage(calls=usage.calls + answer.usage.calls, failed_calls=usage.failed_calls + answer.usage.failed_calls,
                       cache_hits=usage.cache_hits + answer.usage.cache_hits,
                       prompt_tokens=usage.prompt_tokens + answer.usage.prompt_tokens,
                       completion_tokens=usage.completion_tokens + answer.usage.completion_tokens,
                       cost_usd=None if usage.cost_usd is None or answer.usage.cost_usd is None
                       else usage.cost_usd + answer.usage.cost_usd,
                       latency_s=round(time.perf_counter() - started, 6))
    cited = tuple(e.event_id for e in answer.cited) + answer.source_refs
    return BridgeAnswer(**common, answer=answer.answer, cited=cited,
                        status="failed" if answer.status == "failed" else "answered", usage=total,
                        error=answer.error or f"plan route: {why}")


def answer_question_sync(entry_or_store: PatientEntry | GraphStore | str | os.PathLike, subject_id: int,
                         question: str, llm: LLMCaller, config: BridgeConfig = BridgeConfig()) -> BridgeAnswer:
    """`answer_question` for synchronous callers (not from inside a running event loop)."""
    return asyncio.run(answer_question(entry_or_store, subject_id, question, llm, config))
