"""Build one patient's tumor-board display (method "vista") from its MEDS Graph and TOA timeline.

Structured variables (demographics, height/weight, medications) are computed from the graph; every other variable
is asked of the model a group at a time (groups run concurrently; the gateway bounds how many are in flight) over
the rendered timeline and episodes, cut to what the model's context window holds next to the prompt and the answer
(`view_size`; tumor-board facts are kept first, see `vista.toa.timeline_view`). Each cited ``t<k>`` is checked:
ids the timeline lacks, or that the call was not shown, are dropped and counted; a value's ``source_refs`` are the
union of its cited events' ``source_event_refs`` (graph ``e<k>`` ids), so every value traces to MEDS rows. A value
left with no cited id is shown as "Not found" (origin "uncited", counted; `vista.display.citations`). A
failed call leaves its variables "Not available" (origin "failed", with the error) and the display is still
produced. A last call writes the summary note (over its own fitted view, as the filled sheet takes room too).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vista.display.agent_prompts import summary_messages, variables_messages
from vista.display.answers import (
    NOT_AVAILABLE,
    field_name,
    group_answer_model,
    summary_answer_model,
)
from vista.display.citations import cited_value
from vista.display.config import DisplayConfig
from vista.display.hashing import display_hash
from vista.display.model import DisplayError, TumorBoardDisplay, VariableSpec, VariableValue, load_variables
from vista.display.structured import STRUCTURED_VARIABLES
from vista.graph import PatientGraph
from vista.shared.llm import LLMCallFailed, LLMGateway, LLMResult, Message
from vista.toa.chunks import ChunkSize
from vista.toa.model import PatientTimeline, TimelineEvent
from vista.toa.timeline_view import TimelineView, fitted_view_size, timeline_view
from vista.shared.tokens import count_tokens

log = logging.getLogger(__name__)

VARIABLES_AGENT = "display_variables"
SUMMARY_AGENT = "display_summary"
FRAMING_TOKENS = 300
"""Tokens kept free beyond the counted prompt: chat-template framing, the schema when sent in the prompt is counted
separately (`_prompt_tokens`)."""
EMBEDDED_TOKEN_RATIO = 1.3
"""SmolLM2 tokens per cl100k token on timeline text (12k characters: 4.7k cl100k tokens, ≈5.3k SmolLM2 tokens,
rounded up for safety)."""


@dataclass(frozen=True, slots=True)
class DisplayStats:
    """What a build did beyond the display itself: groups asked, failed calls, cited ids dropped."""

    groups: int
    failed_calls: int
    dropped_refs: int
    summary_error: str | None = None
    uncited_values: int = 0


@dataclass(frozen=True, slots=True)
class DisplayBuild:
    display: TumorBoardDisplay
    stats: DisplayStats


@dataclass(frozen=True, slots=True)
class _Citations:
    timeline_refs: tuple[str, ...]
    source_refs: tuple[str, ...]
    dropped: int


def check_inputs(graph: PatientGraph, timeline: PatientTimeline) -> None:
    """Raise `DisplayError` unless ``timeline`` belongs to ``graph`` (same subject, every ref a graph event)."""
    if graph.subject_id != timeline.subject_id:
        raise DisplayError(f"subject {graph.subject_id}: the timeline given is subject {timeline.subject_id}'s")
    for event in timeline.events:
        missing = [r for r in event.source_event_refs if not graph.has_event(r)]
        if missing:
            raise DisplayError(f"subject {graph.subject_id}: timeline event {event.event_id} field source_event_refs "
                               f"cites {missing[:5]}, not events of this graph (timeline built from another graph?)")


def plan_groups(specs: Sequence[VariableSpec], group_size: int) -> list[tuple[VariableSpec, ...]]:
    """The model-answered variables (all but the structured ones) in file order, ``group_size`` per call."""
    asked = [spec for spec in specs if spec.key not in STRUCTURED_VARIABLES]
    return [tuple(asked[k:k + group_size]) for k in range(0, len(asked), group_size)]


def resolve_citations(cited: Iterable[str], view: TimelineView, events: dict[str, TimelineEvent]) -> _Citations:
    """Keep the cited ids the call was shown (deduplicated, in order); map them to the graph events they rest on."""
    wanted = list(dict.fromkeys(r.strip() for r in cited))
    kept = tuple(r for r in wanted if r in view.shown_ids and r in events)
    sources = tuple(dict.fromkeys(ref for r in kept for ref in events[r].source_event_refs))
    return _Citations(kept, sources, len(wanted) - len(kept))


def _failed(group: Sequence[VariableSpec], error: str) -> list[VariableValue]:
    return [VariableValue(key=spec.key, value=NOT_AVAILABLE, origin="failed", error=error) for spec in group]


async def _call(gateway: LLMGateway, messages, model, *, agent: str, subject_id: int,
                max_tokens: int | None) -> tuple[LLMResult | None, str | None]:
    """(the gateway's result, the error text when the call failed)."""
    try:
        result = await gateway.complete(messages, model, agent=agent, patient_id=subject_id, max_tokens=max_tokens)
    except LLMCallFailed as exc:
        return None, str(exc.error)
    return result, (None if result.ok else str(result.error))


async def ask_group(gateway: LLMGateway, subject_id: int, group: tuple[VariableSpec, ...], view: TimelineView,
                    events: dict[str, TimelineEvent],
                    config: DisplayConfig) -> tuple[list[VariableValue], int, LLMResult | None]:
    """One call for ``group``: (its values, cited ids dropped, the gateway result when there was one)."""
    answer_model = group_answer_model(group, value_max_chars=config.value_max_chars, max_cited=config.max_cited)
    result, error = await _call(gateway, variables_messages(group, view.text), answer_model, agent=VARIABLES_AGENT,
                                subject_id=subject_id, max_tokens=config.max_tokens)
    if error is not None:
        log.warning("subject %s: display call for %s failed (%s)", subject_id, [s.key for s in group], error[:200])
        return _failed(group, error), 0, result
    values, dropped = [], 0
    for k, spec in enumerate(group):
        answer = getattr(result.output, field_name(k))
        citations = resolve_citations(answer.timeline_refs, view, events)
        dropped += citations.dropped
        values.append(cited_value(spec.key, answer.value, citations.timeline_refs, citations.source_refs,
                                  asked=answer.timeline_refs, what="timeline"))
    return values, dropped, result


def _prompt_tokens(gateway: LLMGateway, messages: list[Message], answer_model) -> int:
    """Tokens of ``messages`` without the timeline (plus the schema when the gateway puts it in the prompt)."""
    used = sum(count_tokens(m.content) for m in messages) + FRAMING_TOKENS
    if gateway.config.schema_mode == "none" or gateway.config.schema_in_prompt:
        used += count_tokens(json.dumps(gateway.schema_for(answer_model)))
    return used


def view_size(gateway: LLMGateway, config: DisplayConfig, prompt_tokens: int) -> ChunkSize | None:
    """How much timeline one call may show: ``config.max_chars`` when set, else the model's context window minus
    the prompt and the answer, in counted tokens (None: the whole timeline — unknown or very large window)."""
    if config.max_chars is not None:
        return ChunkSize(limit=config.max_chars, unit="chars")
    ratio = config.token_ratio or (EMBEDDED_TOKEN_RATIO if gateway.config.backend == "embedded" else 1.0)
    context = gateway.context_tokens
    answer = config.max_tokens or gateway.config.max_tokens
    budget = fitted_view_size(context, answer_tokens=answer, prompt_tokens=prompt_tokens)
    if budget is None or ratio == 1.0:
        return budget
    return ChunkSize(limit=max(1, int(budget.limit / ratio)), unit="tokens")


def variables_view(timeline: PatientTimeline, groups: list[tuple[VariableSpec, ...]], gateway: LLMGateway,
                   config: DisplayConfig) -> TimelineView:
    """The one view every group's call shows (the same text, so a prefix cache reads it once), fitted to the
    largest group's prompt."""
    prompt = max((_prompt_tokens(gateway, variables_messages(g, ""), group_answer_model(
        g, value_max_chars=config.value_max_chars, max_cited=config.max_cited)) for g in groups), default=0)
    return timeline_view(timeline, config.max_events, budget=view_size(gateway, config, prompt))


async def generate_display(graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway,
                           config: DisplayConfig = DisplayConfig()) -> DisplayBuild:
    """The display and the build's counts (dropped citations, failed calls)."""
    check_inputs(graph, timeline)
    specs = load_variables(config.variables)
    events = {e.event_id: e for e in timeline.events}
    groups = plan_groups(specs, config.group_size)
    view = variables_view(timeline, groups, gateway, config)
    if view.omitted:
        log.info("subject %s: display calls show %d of %d timeline events (context window)", graph.subject_id,
                 len(view.shown_ids), len(timeline.events))
    answered = await asyncio.gather(*(ask_group(gateway, graph.subject_id, g, view, events, config) for g in groups))
    by_key = {spec.key: STRUCTURED_VARIABLES[spec.key](graph) for spec in specs if spec.key in STRUCTURED_VARIABLES}
    for values, _, _ in answered:
        by_key.update((v.key, v) for v in values)
    values = tuple(by_key[spec.key] for spec in specs)
    results = [r for _, _, r in answered if r is not None]
    dropped = sum(d for _, d, _ in answered)
    failed = sum(1 for values_, _, r in answered if values_ and values_[0].origin == "failed")
    note, note_refs, summary_error = "", (), None
    if config.summary_note:
        summary_model = summary_answer_model(config.summary_max_chars)
        prompt = _prompt_tokens(gateway, summary_messages(specs, values, ""), summary_model)
        view = timeline_view(timeline, config.max_events, budget=view_size(gateway, config, prompt))
        result, summary_error = await _call(gateway, summary_messages(specs, values, view.text),
                                            summary_model, agent=SUMMARY_AGENT,
                                            subject_id=graph.subject_id, max_tokens=config.max_tokens)
        if result is not None:
            results.append(result)
        if summary_error is None:
            citations = resolve_citations(result.output.timeline_refs, view, events)
            note, note_refs, dropped = result.output.note.strip(), citations.timeline_refs, dropped + citations.dropped
        else:
            failed += 1
            log.warning("subject %s: summary note call failed (%s)", graph.subject_id, summary_error[:200])
    display = TumorBoardDisplay(
        subject_id=graph.subject_id, method="vista", model=gateway.config.model,
        content_hash=display_hash(graph, timeline, gateway, config), values=values, summary_note=note,
        summary_refs=note_refs, calls=sum(1 for r in results if not r.usage.cache_hit),
        prompt_tokens=sum(r.usage.prompt_tokens for r in results),
        completion_tokens=sum(r.usage.completion_tokens for r in results), dropped_refs=dropped,
        summary_error=summary_error, uncited_values=sum(v.uncited for v in values))
    log.info("subject %s: display built with %d calls (%d failed), %d cited ids dropped, %d uncited value(s) shown "
             "as not found", graph.subject_id, display.calls, failed, dropped, display.uncited_values)
    return DisplayBuild(display, DisplayStats(groups=len(groups), failed_calls=failed, dropped_refs=dropped,
                                              summary_error=summary_error, uncited_values=display.uncited_values))


async def build_display(graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway,
                        config: DisplayConfig = DisplayConfig()) -> TumorBoardDisplay:
    """One patient's tumor-board display from its graph and timeline (see `generate_display` for the counts)."""
    return (await generate_display(graph, timeline, gateway, config)).display
