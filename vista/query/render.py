"""Text forms of timelines, source events and answers, as the `vista` command prints them and the verifier reads them.

A timeline is printed grouped by episode, one line per event led by its ``t<k>`` id (``with_refs`` adds the graph
ids behind each event); source events are one line each (notes add their text lines, each led by the note's id, so
a cited line can always be traced). (The answering model reads the timeline through `vista.toa.timeline_view`,
which cuts it to the context window.)

>>> import datetime as dt
>>> from vista.query.model import SourceEvent
>>> note = SourceEvent(event_id="e7", kind="note", time=dt.datetime(2020, 3, 2, 9), code="NOTE//RADIOLOGY",
...                    description=None, value=None, unit=None, text="Findings: mass.\\nImpression: suspicious.",
...                    text_chars=39, encounter="e5", source="data/train/0.parquet", row=507, provenance_unit="row")
>>> print("\\n".join(source_lines(note, with_provenance=True)))
[e7] 2020-03-02 09:00 NOTE//RADIOLOGY (note; data/train/0.parquet row 507)
[e7]   Findings: mass.
[e7]   Impression: suspicious.
"""

from __future__ import annotations

from collections.abc import Sequence

from vista.query.model import QueryAnswer, SourceEvent
from vista.query.sources import version_tag
from vista.toa import PatientTimeline
from vista.toa.serialize import record_head
from vista.toa.timeline_view import episode_header, event_line

def timeline_lines(timeline: PatientTimeline, *, with_refs: bool = False) -> list[str]:
    """The timeline's events grouped under their episodes (events in no episode listed last), in date order."""
    by_id = {e.event_id: e for e in timeline.events}
    lines = [f"Patient {timeline.subject_id}: oncology timeline (profile {timeline.profile}), "
             f"{len(timeline.events)} events in {len(timeline.episodes)} episodes."]
    gaps = timeline.incomplete_reason()
    if gaps:
        lines.append(f"INCOMPLETE: {gaps}; events from those parts of the record are missing "
                     "(the next `vista timeline` run asks again).")
    placed: set[str] = set()
    for episode in timeline.episodes:
        lines.append("")
        lines.append(episode_header(episode))
        members = [by_id[i] for i in episode.event_ids if i in by_id]
        lines.extend(event_line(e, with_refs=with_refs) for e in members)
        if not members:
            lines.append("(no events)")
        placed.update(episode.event_ids)
    loose = [e for e in timeline.events if e.event_id not in placed]
    if loose:
        lines.append("")
        lines.append("Outside every episode")
        lines.extend(event_line(e, with_refs=with_refs) for e in loose)
    return lines


def timeline_text(timeline: PatientTimeline, *, with_refs: bool = False) -> str:
    return "\n".join(timeline_lines(timeline, with_refs=with_refs))


def source_lines(source: SourceEvent, *, with_provenance: bool = False) -> list[str]:
    """One head line (id, time, code, description, value and unit) and, for text values, the text's lines."""
    when = "static" if source.time is None else source.time.strftime("%Y-%m-%d %H:%M")
    head = record_head(source.event_id, when, source.code, source.description, source.value, source.unit)
    if with_provenance:
        head += f" ({source.kind}; {source.source} {source.provenance_unit} {source.row})"
    text = [line.strip() for line in (source.text or "").splitlines() if line.strip()]
    if source.kind != "note" and len(text) == 1:
        return [f"{head}: {text[0]}"]
    lines = [head] + [f"[{source.event_id}]   {line}" for line in text]
    if source.text_truncated:
        lines.append(f"[{source.event_id}]   (excerpt: {len(source.text or '')} of {source.text_chars} characters)")
    return lines


def sources_text(sources: Sequence[SourceEvent], *, with_provenance: bool = True) -> str:
    return "\n".join(line for source in sources for line in source_lines(source, with_provenance=with_provenance))


def answer_text(answer: QueryAnswer, *, store: str | None = None) -> str:
    """The answer as the `vista ask` command prints it: answer, cited events, verification, usage, next step."""
    confidence = f", confidence {answer.confidence}" if answer.confidence else ""
    lines = [f"Q: {answer.question}", f"A ({answer.status.replace('_', ' ')}{confidence}): {answer.answer or '-'}"]
    if answer.error:
        lines.append(f"Error: {answer.error}")
    if answer.timeline_incomplete:
        lines.append(f"Warning: the timeline is INCOMPLETE ({answer.timeline_incomplete}); the answer may miss facts")
    if answer.cited:
        lines.append("Cited timeline events:")
        lines.extend("  " + event_line(e, with_refs=True) for e in answer.cited)
    if answer.events_omitted:
        lines.append(f"Note: {answer.events_omitted} older timeline event(s) were left out to fit the model's context")
    if answer.dropped_citations:
        lines.append(f"Dropped citations (not timeline events): {', '.join(answer.dropped_citations)}")
    check = answer.verification
    if check is not None:
        line = f"Verification: {check.verdict.replace('_', ' ')}: {check.explanation}"
        if check.evidence_event_ids:
            line += f" (evidence {', '.join(check.evidence_event_ids)})"
        lines.append(line)
        if check.dropped_ids:
            lines.append(f"  verifier cited ids it was not shown (dropped): {', '.join(check.dropped_ids)}")
        if check.sources_not_shown:
            lines.append(f"  {check.sources_not_shown} source event(s) over the cap were not shown to the verifier")
    usage = answer.usage
    cost = "unpriced" if usage.cost_usd is None else f"${usage.cost_usd:.6f}"
    lines.append(f"Model: {answer.model}; {usage.calls} call(s), {usage.prompt_tokens} prompt + "
                 f"{usage.completion_tokens} completion tokens, {cost}, {usage.latency_s:.2f} s")
    if answer.source_refs:
        where = f" --store {store}" if store else ""
        pin = f" {version_tag(answer.graph_hash)}" if answer.graph_hash else ""
        lines.append(f"Open the sources: vista source{where} --subject {answer.subject_id}{pin} "
                     f"{' '.join(answer.source_refs)}")
    return "\n".join(lines)
