"""The single-agent baseline: the same model reads the whole timeline in one call and answers like the manager.

When the timeline does not fit the model's context it is left-truncated (oldest whole timestamps dropped,
`vista.shared.timeline.truncate_left`); the root of the XML says so and the result records the flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajonco.agents.context_fit import ContextFitError, ContextFit
from trajonco.agents.calls import AgentCall, call_agent
from trajonco.agents.evidence import CleanedEvents, EventRules
from trajonco.agents.manager import consolidate
from trajonco.agents.prompts import PromptContext, render_pair
from trajonco.agents.results import Stage
from trajonco.agents.schemas import ManagerOutput
from vista.shared.timeline import Timeline, TimelineError, truncate_left
from vista.shared.llm.caller import LLMCaller


@dataclass(frozen=True, slots=True)
class SingleAgentOutcome:
    """The single call, its cleaned events, and what was cut to fit."""

    call: AgentCall[ManagerOutput]
    final: CleanedEvents
    truncated: bool
    truncation_note: str | None
    timeline: Timeline


def _truncation_note(original: Timeline, kept: Timeline) -> str | None:
    dropped = kept.root.dropped_events - original.root.dropped_events
    if dropped <= 0:
        return None
    since = kept.root.truncated_before.isoformat(sep=" ") if kept.root.truncated_before is not None else "the prediction time"
    return f"left-truncated to fit the context: the {dropped} oldest events (before {since}) are not shown"


def fit_timeline(ctx: PromptContext, timeline: Timeline, fit: ContextFit | None) -> tuple[Timeline, str | None]:
    """``timeline`` or its newest part that fits the room for the prompt, with a note when something was cut."""
    if fit is None:
        return timeline, None
    note = " (left-truncated: its oldest events are not shown)"
    system, user = render_pair("single_agent", ctx, timeline_xml="", truncation_note=note)
    available = fit.input_tokens - fit.count(system) - fit.count(user)
    try:
        kept = truncate_left(timeline, available) if available > 0 else None
    except TimelineError:
        kept = None
    if kept is None:
        raise ContextFitError(
            f"subject {timeline.root.subject_id}: a {fit.context_tokens}-token context leaves {available} tokens "
            "for the timeline, not enough for the patient root"
        )
    return kept, _truncation_note(timeline, kept)


async def run_single_agent(
    gateway: LLMCaller,
    ctx: PromptContext,
    timeline: Timeline,
    *,
    response_model: type[ManagerOutput],
    patient_id: int,
    fit: ContextFit | None,
    rules: EventRules,
) -> SingleAgentOutcome:
    """One call over the (possibly left-truncated) timeline; its events are checked against ``rules`` plus its ids."""
    kept, note = fit_timeline(ctx, timeline, fit)
    system, user = render_pair(
        "single_agent", ctx, timeline_xml=kept.to_xml().rstrip("\n"),
        truncation_note=" (left-truncated: its oldest events are not shown)" if note else "",
    )
    call = await call_agent(
        gateway, agent=Stage.SINGLE.value, system=system, user=user, response_model=response_model, patient_id=patient_id
    )
    final = consolidate(call.output.final_events, rules.with_ids(kept.event_ids())) if call.output is not None else CleanedEvents()
    return SingleAgentOutcome(call, final, note is not None, note, kept)
