"""Answer a question about one patient from its TOA timeline and episodes; optionally verify it against the sources.

`ask` makes one call: the model reads the timeline (grouped by episode, ``t<k>`` ids; never the raw record; cut to
the model's context window by `vista.toa.timeline_view`, which keeps the tumor-board facts, episode anchors and then the newest events)
and returns an `AnswerDraft`. Cited ids that are not events shown to it are dropped and counted; the kept ones bring their
graph ``source_event_refs``. With ``verify=True`` a second call reads the opened source events behind the cited
events (`open_sources`, no model call) and says whether they support the answer — the paper's "traverse to the
source only to verify" path. Both calls go through the `LLMGateway`, so they are validated, retried, cached and
costed like every other agent call; a failed call is reported in the answer, never raised.
"""

from __future__ import annotations

from collections.abc import Sequence

from vista.toa.timeline_view import TimelineView, event_line, timeline_view
from vista.graph import PatientGraph
from vista.shared.llm import CallRecord, LLMGateway, Message, system, user
from vista.shared.prompts import PromptFolder
from vista.query.errors import ContextTooLongError, QueryError
from vista.query.model import (
    QueryAnswer,
    QueryConfig,
    QueryUsage,
    SourceEvent,
    Verification,
    answer_draft_model,
    verdict_draft_model,
)
from vista.query.render import source_lines
from vista.query.sources import open_sources, source_refs_of
from vista.toa import PatientTimeline, TimelineEvent
from vista.toa.refs import check_provenance
from vista.shared.tokens import count_tokens

ANSWER_AGENT = "query_answer"
VERIFY_AGENT = "query_verifier"
QUESTION_MAX_CHARS = 2000
CHARS_PER_TOKEN = 4
"""First guess of characters per token when sizing the timeline view; the view is then measured and shrunk to fit."""
MIN_TIMELINE_TOKENS = 100
FIT_ROUNDS = 6


PROMPTS = PromptFolder("vista.query", suffix=".md")
prompt_text = PROMPTS.text
"""The packaged prompt ``vista/query/prompts/<name>.md``."""


def answer_messages(question: str, view_text: str) -> list[Message]:
    """System prompt (task and rules), then the timeline view and the question."""
    return [system(prompt_text("answer")), user(f"{view_text}\n\nQuestion: {question}")]


def verify_messages(question: str, answer: str, cited: Sequence[TimelineEvent], sources: Sequence[SourceEvent],
                    not_shown: int) -> list[Message]:
    """System prompt, then the question, the answer, the cited timeline events and their source entries."""
    body = [f"Question: {question}", f"Answer: {answer}", "", "Timeline events the answer cited:"]
    body += [event_line(e, with_refs=True) for e in cited]
    body += ["", "Source record entries:"]
    body += [line for source in sources for line in source_lines(source)]
    if not_shown:
        body.append(f"({not_shown} more source entries are not shown.)")
    return [system(prompt_text("verify")), user("\n".join(body))]


def check_question(question: str, subject_id: int) -> str:
    """The question with its whitespace folded; one-line `QueryError` when empty or too long (`ask` and the query
    bridge check questions alike).

    >>> check_question("  When did   line 2 start? ", 7)
    'When did line 2 start?'
    """
    text = " ".join(question.split())
    if not text:
        raise QueryError(f"subject {subject_id}: the question is empty")
    if len(text) > QUESTION_MAX_CHARS:
        raise QueryError(f"subject {subject_id}: the question has {len(text):,} characters (at most {QUESTION_MAX_CHARS:,})")
    return text


def _token_count(messages: Sequence[Message]) -> int:
    return sum(count_tokens(m.content) for m in messages)


def _answer_room(gateway: LLMGateway, max_tokens: int | None) -> int:
    return max_tokens or gateway.config.max_tokens


def fitted_view(question: str, timeline: PatientTimeline, gateway: LLMGateway, config: QueryConfig) -> TimelineView:
    """The timeline view (`vista.toa.timeline_view`: tumor-board facts and episode anchors first, then the newest events) that fits the
    model's context window with room for the answer; `ContextTooLongError` when not even the framing fits."""
    max_chars = config.max_timeline_chars
    context = gateway.context_tokens
    if context is None:
        return timeline_view(timeline, max_events=config.max_timeline_events, max_chars=max_chars)
    framing = _token_count(answer_messages(question, ""))
    budget = context - _answer_room(gateway, config.max_tokens) - config.prompt_room_tokens - framing
    if budget < MIN_TIMELINE_TOKENS:
        raise ContextTooLongError(
            f"subject {timeline.subject_id}: the question and instructions take {framing} tokens; with "
            f"{_answer_room(gateway, config.max_tokens)} answer tokens and {config.prompt_room_tokens} of framing, "
            f"the {context}-token context of model {gateway.config.model!r} leaves no room for the timeline")
    max_chars = min(max_chars, budget * CHARS_PER_TOKEN)
    for _ in range(FIT_ROUNDS):
        view = timeline_view(timeline, max_events=config.max_timeline_events, max_chars=max_chars)
        used = count_tokens(view.text)
        if used <= budget:
            return view
        if not view.shown_ids:
            break
        max_chars = int(max_chars * budget / used * 0.9)
    raise ContextTooLongError(
        f"subject {timeline.subject_id}: no view of its timeline fits the {budget} tokens the {context}-token context "
        f"of model {gateway.config.model!r} leaves (the shortest tried has {used} tokens)")


def _fitting_sources(question: str, answer: str, cited: Sequence[TimelineEvent], sources: list[SourceEvent],
                     gateway: LLMGateway, config: QueryConfig) -> list[SourceEvent]:
    """The longest prefix of ``sources`` (at most ``max_verify_sources``) whose verifier prompt fits the context."""
    shown = sources[: config.max_verify_sources]
    context = gateway.context_tokens
    if context is None:
        return shown
    budget = context - _answer_room(gateway, config.verify_max_tokens) - config.prompt_room_tokens
    base = _token_count(verify_messages(question, answer, cited, [], len(sources)))
    used, kept = base, []
    for source in shown:
        used += count_tokens("\n".join(source_lines(source))) + 1
        if used > budget:
            break
        kept.append(source)
    return kept


async def verify_answer(question: str, answer: str, cited: Sequence[TimelineEvent], graph: PatientGraph,
                        gateway: LLMGateway, config: QueryConfig = QueryConfig()) -> tuple[Verification, CallRecord | None]:
    """Check ``answer`` against the source events behind ``cited`` (one call; none when nothing is cited)."""
    if not cited:
        return Verification(verdict="not_checked", explanation="no timeline event was cited, so there is no source "
                            "evidence to check the answer against"), None
    sources = open_sources(graph, source_refs_of(cited), excerpt_chars=config.excerpt_chars)
    shown = _fitting_sources(question, answer, cited, sources, gateway, config)
    not_shown = len(sources) - len(shown)
    if not shown:
        return Verification(verdict="not_checked", explanation="no source event fits the model's context window",
                            sources_not_shown=not_shown), None
    messages = verify_messages(question, answer, cited, shown, not_shown)
    shape = verdict_draft_model(config.explanation_chars, config.max_citations)
    result = await gateway.complete(messages, shape, agent=VERIFY_AGENT, patient_id=graph.subject_id,
                                    max_tokens=config.verify_max_tokens)
    checked = tuple(s.event_id for s in shown)
    if not result.ok:
        return Verification(verdict="not_checked", explanation="the verifier call failed", sources_checked=checked,
                            sources_not_shown=not_shown, error=f"{result.error.kind.value}: {result.error.message}"), result.usage
    draft = result.output
    cited_ids = list(dict.fromkeys(i.strip() for i in draft.evidence_event_ids))
    return Verification(
        verdict="supported" if draft.supported else "not_supported", explanation=draft.explanation.strip(),
        evidence_event_ids=tuple(i for i in cited_ids if i in checked),
        dropped_ids=tuple(i for i in cited_ids if i not in checked), sources_checked=checked,
        sources_not_shown=not_shown), result.usage


async def ask(question: str, timeline: PatientTimeline, graph: PatientGraph, gateway: LLMGateway,
              config: QueryConfig = QueryConfig(), *, verify: bool = False) -> QueryAnswer:
    """Answer ``question`` from ``timeline`` (its events and episodes), citing timeline ids; see the module docstring.

    Raises `QueryError` for unusable input (empty question, timeline of another patient) and `ContextTooLongError`
    when the model's context window cannot hold the instructions, the question and the answer.
    """
    question = check_question(question, graph.subject_id)
    if timeline.subject_id != graph.subject_id:
        raise QueryError(f"the timeline is of subject {timeline.subject_id} but the graph of subject {graph.subject_id}")
    check_provenance(graph, what="the timeline the question is asked of", graph_hash=timeline.graph_hash,
                     fingerprints=timeline.ref_fingerprints,
                     rebuild=f"rebuild it (`vista timeline --subject {graph.subject_id}`) before asking")
    view = fitted_view(question, timeline, gateway, config)
    messages = answer_messages(question, view.text)
    shape = answer_draft_model(config.answer_chars, config.max_citations)
    result = await gateway.complete(messages, shape, agent=ANSWER_AGENT, patient_id=graph.subject_id,
                                    max_tokens=config.max_tokens)
    common = {"subject_id": graph.subject_id, "question": question, "model": gateway.config.model,
              "timeline_hash": timeline.content_hash, "events_shown": len(view.shown_ids), "events_omitted": view.omitted,
              "timeline_incomplete": timeline.incomplete_reason(), "graph_hash": timeline.graph_hash}
    if not result.ok:
        return QueryAnswer(**common, status="failed", answer="", confidence=None, cited=(), source_refs=(),
                           usage=QueryUsage.of([result.usage]), error=f"{result.error.kind.value}: {result.error.message}")
    draft = result.output
    by_id = {e.event_id: e for e in timeline.events}
    cited_ids = list(dict.fromkeys(i.strip() for i in draft.cited_event_ids))
    cited = tuple(by_id[i] for i in cited_ids if i in view.shown_ids)
    dropped = tuple(i for i in cited_ids if i not in view.shown_ids)
    status = "not_in_timeline" if not draft.in_timeline else ("answered" if cited else "uncited")
    answer = draft.answer.strip()
    records = [result.usage]
    verification = None
    if verify:
        if status == "answered":
            verification, record = await verify_answer(question, answer, cited, graph, gateway, config)
            records += [record] if record is not None else []
        else:
            verification = Verification(verdict="not_checked",
                                        explanation=f"the answer is {status.replace('_', ' ')}: nothing to check")
    return QueryAnswer(**common, status=status, answer=answer, confidence=draft.confidence, cited=cited,
                       source_refs=source_refs_of(cited), dropped_citations=dropped, verification=verification,
                       usage=QueryUsage.of(records))
