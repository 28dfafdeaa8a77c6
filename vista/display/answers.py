"""The answer shapes asked of the model: one field per variable of a group (value + cited timeline ids), the note.

The models are generated per group (field names are the variable keys, via aliases so any key is safe) by one
factory shared with the RAG baseline (`group_answer_model` with a `CitationStyle`: timeline ids here, graph ids
there) and bounded everywhere — value length, number and shape of cited ids — so the embedded small model emits valid JSON under the
schema. Nothing from an answer reaches a display before `vista.display.generate` has checked every cited id.

>>> from vista.display.model import load_variables
>>> from vista.shared.llm.schema import response_schema
>>> specs = load_variables()[1:3]
>>> schema = response_schema(group_answer_model(tuple(specs), value_max_chars=100, max_cited=4))
>>> schema["required"], schema["properties"]["smoking_history"]["required"]
(['smoking_history', 'primary_site'], ['value', 'timeline_refs'])
>>> schema["properties"]["primary_site"]["properties"]["timeline_refs"]["maxItems"]
4
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, create_model

from vista.display.model import NOT_AVAILABLE, NOT_DOCUMENTED, NOT_FOUND, VariableSpec

TimelineRef = Annotated[str, Field(min_length=2, max_length=8, pattern=r"^t[0-9]{1,6}$")]
"""A timeline event id as the model must write it (the pattern also steers constrained decoding)."""
SUMMARY_MAX_REFS = 12
__all__ = ["NOT_AVAILABLE", "NOT_DOCUMENTED", "NOT_FOUND", "SUMMARY_MAX_REFS", "TimelineRef"]


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class VariableAnswer(_Answer):
    """One variable as the model answers it (bounds narrowed by `group_answer_model`)."""

    value: str
    timeline_refs: list[TimelineRef]


class VariablesAnswer(_Answer):
    """Base of a group's answer: one `VariableAnswer` per variable, under the variable's key."""


class SummaryAnswer(_Answer):
    """The summary note and the timeline ids it rests on."""

    note: str
    timeline_refs: list[TimelineRef]


def field_name(index: int) -> str:
    """The Python attribute of a group's ``index``-th variable (its JSON key is the variable key, as an alias)."""
    return f"v{index}"


@dataclass(frozen=True, slots=True)
class CitationStyle:
    """How one method's answers cite evidence: the field name, the id pattern and the classes the models extend.

    VISTA cites timeline ids (``t<k>``, `TIMELINE_CITATIONS`); the RAG baseline cites graph ids (``e<k>``,
    `vista.rag.answers.SOURCE_CITATIONS`). Both build their answer models with `variable_answer_model` and
    `group_answer_model`, so the two methods ask the model for the same shape with the same bounds."""

    field: str
    pattern: str
    max_id_chars: int
    refs_description: str
    silent_source: str = "timeline"
    item_base: type[BaseModel] = BaseModel
    group_base: type[BaseModel] = BaseModel
    group_name: str = "VariablesAnswer"


TIMELINE_CITATIONS = CitationStyle(field="timeline_refs", pattern=r"^t[0-9]{1,6}$", max_id_chars=8,
                                   refs_description="Ids of the supporting events.", silent_source="timeline",
                                   item_base=VariableAnswer, group_base=VariablesAnswer,
                                   group_name="VariablesAnswer")


@lru_cache(maxsize=256)
def variable_answer_model(value_max_chars: int, max_cited: int,
                          style: CitationStyle = TIMELINE_CITATIONS) -> type[BaseModel]:
    """One variable's answer (value + cited ids in ``style``), bounded for constrained decoding."""
    ref = Annotated[str, Field(min_length=2, max_length=style.max_id_chars, pattern=style.pattern)]
    fields = {
        "value": (str, Field(min_length=1, max_length=value_max_chars,
                             description=f"Short answer; '{NOT_DOCUMENTED}' when the {style.silent_source} is silent.")),
        style.field: (list[ref], Field(max_length=max_cited, description=style.refs_description)),
    }
    return create_model(style.item_base.__name__, __base__=style.item_base, **fields)  # type: ignore[call-overload]


@lru_cache(maxsize=256)
def group_answer_model(specs: tuple[VariableSpec, ...], *, value_max_chars: int, max_cited: int,
                       style: CitationStyle = TIMELINE_CITATIONS) -> type[BaseModel]:
    """The answer model of one group of variables (memoised: the gateway caches schemas per class): one
    `variable_answer_model` field per variable, under the variable's key."""
    item = variable_answer_model(value_max_chars, max_cited, style)
    fields = {field_name(k): (item, Field(alias=spec.key, description=spec.question)) for k, spec in enumerate(specs)}
    return create_model(style.group_name, __base__=style.group_base, **fields)  # type: ignore[call-overload]


@lru_cache(maxsize=32)
def summary_answer_model(max_chars: int, max_refs: int = SUMMARY_MAX_REFS) -> type[SummaryAnswer]:
    return create_model(  # type: ignore[call-overload]
        "SummaryAnswer", __base__=SummaryAnswer,
        note=(str, Field(min_length=1, max_length=max_chars, description="A few sentences for the tumor board.")),
        timeline_refs=(list[TimelineRef], Field(max_length=max_refs)))
