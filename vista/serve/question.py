"""The question box's one route to an answer: `answer_question`.

Until VISTA's query bridge lands, a question goes through `vista ask` (`vista.query.ask`: the stored TOA timeline,
cited timeline events, their graph source events). The bridge (issue "VISTA's query bridge") exposes
``answer_question(store, subject_id, question, llm) -> BridgeAnswer`` with answer / value / unit / date / cited; this
module's `answer_question` has that signature and returns `ServedAnswer`, the same fields, so switching is one line:
import the bridge's function in its place.

Question and answer text are never logged at INFO (a question names a patient's facts).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from vista.query import QueryConfig, ask, load_state
from vista.query.errors import QueryError
from vista.shared.llm import LLMGateway
from vista.toa.errors import StaleProvenanceError

logger = logging.getLogger(__name__)
MAX_QUESTION_CHARS = 500


@dataclass(frozen=True, slots=True)
class ServedAnswer:
    """An answer as the page shows it: the text, a value/unit/date when the route gives one, the graph event ids it
    cites (each opens its source), the timeline events it read, and its status (answered, not_in_timeline,
    uncited, failed, unavailable)."""

    answer: str
    status: str
    cited: tuple[str, ...] = ()
    timeline: tuple[str, ...] = ()
    value: str | None = None
    unit: str | None = None
    date: str | None = None


async def answer_question(store: str | os.PathLike, subject_id: int, question: str, llm: LLMGateway) -> ServedAnswer:
    """Answer ``question`` about ``subject_id`` from the store at ``store`` with ``llm`` (today: `vista ask`)."""
    logger.debug("question for subject %d: %r", subject_id, question)
    try:
        state = load_state(store, subject_id)
    except StaleProvenanceError as exc:
        return ServedAnswer(f"Cannot answer: {exc}", "unavailable")
    except QueryError as exc:  # no timeline built yet (the message names the command that builds it)
        return ServedAnswer(f"Cannot answer yet: {exc}", "unavailable")
    answer = await ask(question, state.timeline, state.graph, llm, QueryConfig())
    timeline = tuple(f"{e.event_id}: {e.date.isoformat()} {e.type} — {e.description}" for e in answer.cited)
    text = answer.answer if answer.status != "failed" else f"The model call failed: {answer.error}"
    if answer.status == "uncited":
        text = "Not found (the model's answer cited no timeline event)"
    return ServedAnswer(text, answer.status, answer.source_refs, timeline)
