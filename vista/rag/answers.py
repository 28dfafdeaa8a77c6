"""The answer shape asked of the model by the RAG baseline: one field per variable (value + cited graph event ids).

It mirrors VISTA's group answer (`vista.display.answers.group_answer_model`) field for field, with graph ids
(``e<k>``) in place of timeline ids, and the same bounds, so both methods ask the model for the same thing.

>>> from vista.display import load_variables
>>> from vista.llm import response_schema
>>> specs = tuple(load_variables()[4:6])
>>> schema = response_schema(rag_answer_model(specs, value_max_chars=100, max_cited=4))
>>> schema["required"], schema["properties"]["stage"]["required"]
(['histology', 'stage'], ['value', 'source_refs'])
>>> schema["properties"]["histology"]["properties"]["source_refs"]["items"]["pattern"]
'^e[0-9]{1,7}$'
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, create_model

from vista.display import VariableSpec
from vista.display.answers import NOT_DOCUMENTED, field_name

SourceRef = Annotated[str, Field(min_length=2, max_length=8, pattern=r"^e[0-9]{1,7}$")]
"""A MEDS Graph event id as the model must write it (the pattern also steers constrained decoding)."""


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RagVariableAnswer(_Answer):
    """One variable as the model answers it (bounds narrowed by `rag_answer_model`)."""

    value: str
    source_refs: list[SourceRef]


class RagAnswer(_Answer):
    """Base of a group's answer: one `RagVariableAnswer` per variable, under the variable's key."""


@lru_cache(maxsize=256)
def rag_variable_model(value_max_chars: int, max_cited: int) -> type[RagVariableAnswer]:
    return create_model(  # type: ignore[call-overload]
        "RagVariableAnswer", __base__=RagVariableAnswer,
        value=(str, Field(min_length=1, max_length=value_max_chars,
                          description=f"Short answer; '{NOT_DOCUMENTED}' when the excerpts are silent.")),
        source_refs=(list[SourceRef], Field(max_length=max_cited, description="Ids of the supporting record lines.")))


@lru_cache(maxsize=256)
def rag_answer_model(specs: tuple[VariableSpec, ...], *, value_max_chars: int, max_cited: int) -> type[RagAnswer]:
    """The answer model of one group of variables (memoised: the gateway caches schemas per class)."""
    item = rag_variable_model(value_max_chars, max_cited)
    fields = {field_name(k): (item, Field(alias=spec.key, description=spec.question)) for k, spec in enumerate(specs)}
    return create_model("RagAnswer", __base__=RagAnswer, **fields)  # type: ignore[call-overload]
