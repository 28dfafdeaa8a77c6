"""The unifier's LLM step: the ambiguous residue — same-type events within the date window that the rules kept
apart (they share only a hub ref, or no ref) — is judged by a sub-agent.

`vista.toa.unify` merges certain duplicates; what remains ambiguous (`vista.toa.unify.ambiguous_pairs`) is sent,
one pair per call and at most ``max_pairs`` calls, to a judge that sees both events and their record lines — each
event's own evidence first, the lines both cite (typically a recap note) after, so a hub cannot crowd out what tells
the two apart. Pairs
it calls the same are joined (transitively, by union-find over the confirmed links); pairs it does not judge — over
the cap, or a failed call — stay listed as ambiguous on the timeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from vista.graph import NodeType, PatientGraph
from vista.shared.llm import LLMGateway, system, user
from vista.toa.model import TimelineEvent
from vista.toa.agent_prompts import prompt_text
from vista.toa.serialize import note_lines, record_line
from vista.toa.unify import merge_group, ref_groups

JUDGE_AGENT = "toa_merge_judge"
MAX_LINES_PER_EVENT = 12


class SameEventVerdict(BaseModel):
    """The judge's answer for one pair."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    same_event: bool
    reason: str = Field(max_length=160)


def _evidence(graph: PatientGraph, event: TimelineEvent, shared: frozenset[str] = frozenset()) -> str:
    """The event and the record lines it cites (at most `MAX_LINES_PER_EVENT`), refs in ``shared`` last."""
    lines = []
    for ref in sorted(event.source_event_refs, key=lambda r: r in shared):
        source = graph.event(ref)
        lines.extend(note_lines(graph, source) if source.type is NodeType.NOTE else [record_line(source)])
    shown = lines[:MAX_LINES_PER_EVENT]
    return f"{event.date.isoformat()} {event.type}/{event.subtype}: {event.description}\n" + "\n".join(shown)


async def _judge(gateway: LLMGateway, graph: PatientGraph, a: TimelineEvent, b: TimelineEvent,
                 max_tokens: int | None) -> bool | None:
    shared = frozenset(a.source_event_refs) & frozenset(b.source_event_refs)
    messages = [system(prompt_text("same_event")),
                user(f"Event A:\n{_evidence(graph, a, shared)}\n\nEvent B:\n{_evidence(graph, b, shared)}")]
    result = await gateway.complete(messages, SameEventVerdict, agent=JUDGE_AGENT, patient_id=graph.subject_id,
                                    max_tokens=max_tokens)
    return result.output.same_event if result.ok else None


async def resolve_ambiguous(gateway: LLMGateway, graph: PatientGraph, events: Sequence[TimelineEvent],
                            pairs: Sequence[tuple[str, str]], *, max_pairs: int = 50,
                            max_tokens: int | None = None) -> tuple[list[TimelineEvent], int, list[tuple[str, str]]]:
    """(events after merging confirmed pairs — a merged event keeps its lead member's id, so call `renumber_with_map`
    next; number of pairs confirmed; pairs left unjudged, named by the ids of the events that now hold them)."""
    by_id = {e.event_id: e for e in events}
    judged = list(pairs[:max_pairs])
    verdicts = await asyncio.gather(*(_judge(gateway, graph, by_id[a], by_id[b], max_tokens) for a, b in judged))
    links: dict[str, list[str]] = {e.event_id: [] for e in events}
    confirmed = 0
    for k, ((a, b), same) in enumerate(zip(judged, verdicts)):
        if same:
            links[a].append(f"link{k}")
            links[b].append(f"link{k}")
            confirmed += 1
    unjudged = [p for p, same in zip(judged, verdicts) if same is None] + list(pairs[max_pairs:])
    if not confirmed:
        return list(events), 0, unjudged
    groups = ref_groups([links[e.event_id] or [f"self:{e.event_id}"] for e in events])
    merged, holder = [], {}
    for group in groups:
        event = merge_group([events[i] for i in group])
        merged.append(event)
        holder.update({events[i].event_id: event.event_id for i in group})
    left = list(dict.fromkeys((holder[a], holder[b]) for a, b in unjudged if holder[a] != holder[b]))
    return merged, confirmed, left
