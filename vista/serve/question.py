"""The question box's one route to an answer: `answer_question`, through VISTA's query bridge.

The model translates the question into a plan, the plan runs over the patient's graph with no model, and the answer
gives the value, its unit and date and the graph ids it came from (`vista.query.bridge`). A question no plan can
express falls back to `vista ask` over the stored timeline, and the page says so.

Question and answer text are never logged at INFO (a question names a patient's facts).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

from vista.query import open_entry
from vista.query.bridge import BridgeAnswer, format_value
from vista.query.bridge import answer_question as bridge_answer
from vista.query.entry import PatientEntry
from vista.query.errors import QueryError
from vista.shared.llm import LLMCaller
from vista.toa.errors import StaleProvenanceError

logger = logging.getLogger(__name__)
MAX_QUESTION_CHARS = 500
TIMELINE_ROUTE = "Read from the timeline's text (vista ask): no graph query expresses this question."


@dataclass(frozen=True, slots=True)
class ServedAnswer:
    """An answer as the page shows it: the text, a value/unit/date when a plan gave one, the graph event ids it
    cites (each opens its source), the timeline events it cites, its status (answered, no_rows, failed,
    unavailable) and the route taken (plan, timeline)."""

    answer: str
    status: str
    cited: tuple[str, ...] = ()
    timeline: tuple[str, ...] = ()
    value: str | None = None
    unit: str | None = None
    date: str | None = None
    route: str | None = None


def served(answer: BridgeAnswer, entry: PatientEntry) -> ServedAnswer:
    """The page's view of a bridge answer: graph ids open their sources; timeline ids (``t<k>``) are listed with
    their date, type and description."""
    timeline_ids = {c for c in answer.cited if c.startswith("t")}
    events = entry.timeline.events if entry.timeline is not None else ()
    timeline = tuple(f"{e.event_id}: {e.date.isoformat()} {e.type} — {e.description}" for e in events
                     if e.event_id in timeline_ids)
    text = answer.answer if answer.status != "failed" else f"Could not answer: {answer.error}"
    if answer.route == "timeline" and answer.status != "failed":
        text = f"{text} ({TIMELINE_ROUTE})"
    return ServedAnswer(text, answer.status, tuple(c for c in answer.cited if c not in timeline_ids), timeline,
                        value=None if answer.value is None else format_value(answer.value), unit=answer.unit,
                        date=None if answer.date is None else answer.date.isoformat(), route=answer.route)


async def answer_question(store: str | os.PathLike, subject_id: int, question: str, llm: LLMCaller) -> ServedAnswer:
    """Answer ``question`` about ``subject_id`` from the store at ``store`` with ``llm`` (the query bridge)."""
    logger.debug("question for subject %d: %r", subject_id, question)
    try:
        entry = await asyncio.to_thread(open_entry, store, subject_id)
        answer = await bridge_answer(entry, subject_id, question, llm)
    except StaleProvenanceError as exc:
        return ServedAnswer(f"Cannot answer: {exc}", "unavailable")
    except QueryError as exc:  # a bad question, or nothing stored to answer from (the message says which)
        return ServedAnswer(f"Cannot answer: {exc}", "unavailable")
    return served(answer, entry)
