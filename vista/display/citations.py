"""The citation contract of a model-written display value: it stands only on the events it cites.

A value the model wrote without citing an id that survives the checks (an id of the timeline the call was shown, for
VISTA; a graph event of the passages it was shown, for the RAG baseline) is not a fact of the record: it is shown
and scored as `NOT_FOUND` (origin ``"uncited"``), the model's words kept apart in ``uncited_answer`` for a reader
who wants to see them, and counted. A value saying the record is silent ("Not documented") needs no citation.

>>> v = cited_value("stage", "Stage IVB", (), (), asked=("t99",), what="timeline")
>>> v.value, v.origin, v.uncited_answer, v.error
('Not found', 'uncited', 'Stage IVB', 'cited t99, not an event of the timeline shown; shown as Not found')
>>> cited_value("stage", "Not documented.", (), (), asked=(), what="timeline").origin
'llm'
"""

from __future__ import annotations

from collections.abc import Sequence

from vista.display.model import NOT_DOCUMENTED, NOT_FOUND, VariableValue, states_nothing


def uncited_reason(asked: Sequence[str], what: str) -> str:
    """Why a value stands on nothing: it cited no id, or only ids that are not events of ``what``."""
    if not asked:
        return f"no id of the {what} cited; shown as {NOT_FOUND}"
    listed = ", ".join(list(dict.fromkeys(asked))[:5])
    return f"cited {listed}, not an event of the {what} shown; shown as {NOT_FOUND}"


def cited_value(key: str, answer: str, timeline_refs: tuple[str, ...], source_refs: tuple[str, ...], *,
                asked: Sequence[str], what: str) -> VariableValue:
    """The value of ``key``: the model's ``answer`` when it kept a citation (or says nothing), else `NOT_FOUND`.

    ``timeline_refs`` / ``source_refs`` are the citations that survived the checks, ``asked`` what the model cited,
    ``what`` the evidence it was shown ("timeline", "passages")."""
    text = answer.strip() or NOT_DOCUMENTED
    if timeline_refs or source_refs or states_nothing(text):
        return VariableValue(key=key, value=text, origin="llm", timeline_refs=timeline_refs, source_refs=source_refs)
    return VariableValue(key=key, value=NOT_FOUND, origin="uncited", uncited_answer=text,
                         error=uncited_reason(asked, what))
