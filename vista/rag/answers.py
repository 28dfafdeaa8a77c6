"""The answer shape asked of the model by the RAG baseline: one field per variable (value + cited graph event ids).

It is made by VISTA's answer factory (`vista.display.answers.group_answer_model`) with a different `CitationStyle`:
graph ids (``e<k>``) in place of timeline ids, the same bounds, so both methods ask the model for the same thing.

>>> from vista.display import load_variables
>>> from vista.shared.llm.schema import response_schema
>>> specs = tuple(load_variables()[4:6])
>>> schema = response_schema(rag_answer_model(specs, value_max_chars=100, max_cited=4))
>>> schema["required"], schema["properties"]["stage"]["required"]
(['histology', 'stage'], ['value', 'source_refs'])
>>> schema["properties"]["histology"]["properties"]["source_refs"]["items"]["pattern"]
'^e[0-9]{1,7}$'
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from vista.display import VariableSpec
from vista.display.answers import CitationStyle, group_answer_model, variable_answer_model

SourceRef = Annotated[str, Field(min_length=2, max_length=8, pattern=r"^e[0-9]{1,7}$")]
"""A MEDS Graph event id as the model must write it."""


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RagVariableAnswer(_Answer):
    """One variable as the model answers it (bounds narrowed by `rag_answer_model`)."""

    value: str
    source_refs: list[SourceRef]


class RagAnswer(_Answer):
    """Base of a group's answer: one `RagVariableAnswer` per variable, under the variable's key."""


SOURCE_CITATIONS = CitationStyle(field="source_refs", pattern=r"^e[0-9]{1,7}$", max_id_chars=8,
                                 refs_description="Ids of the supporting record lines.", silent_source="excerpts",
                                 item_base=RagVariableAnswer, group_base=RagAnswer, group_name="RagAnswer")
"""The RAG baseline cites MEDS Graph event ids (the pattern also steers constrained decoding)."""


def rag_variable_model(value_max_chars: int, max_cited: int) -> type[RagVariableAnswer]:
    return variable_answer_model(value_max_chars, max_cited, SOURCE_CITATIONS)  # type: ignore[return-value]


def rag_answer_model(specs: tuple[VariableSpec, ...], *, value_max_chars: int, max_cited: int) -> type[RagAnswer]:
    """The answer model of one group of variables: VISTA's factory (`vista.display.answers.group_answer_model`)
    with graph-id citations."""
    return group_answer_model(specs, value_max_chars=value_max_chars, max_cited=max_cited,  # type: ignore[return-value]
                              style=SOURCE_CITATIONS)
