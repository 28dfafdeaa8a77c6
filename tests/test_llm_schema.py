"""The JSON schema sent to the model is closed, fully required, $ref-free and bounded."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from llm_models import WorkerAnswer
from vista.shared.llm.errors import SchemaError
from vista.shared.llm.schema import response_format, response_schema, schema_instructions, schema_name, unbounded_paths


def _objects(node):
    if isinstance(node, dict):
        if "properties" in node:
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def test_every_object_is_closed_and_fully_required():
    schema = response_schema(WorkerAnswer)
    objects = list(_objects(schema))
    assert len(objects) == 2  # the answer and the nested Event
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    # fields with defaults are still required (strict mode), optional ones stay nullable
    assert set(schema["required"]) == {"summary", "events", "risk", "score", "tags"}
    assert {"type": "null"} in schema["properties"]["score"]["anyOf"]


def test_refs_are_inlined_and_noise_dropped():
    text = json.dumps(response_schema(WorkerAnswer))
    assert "$ref" not in text and "$defs" not in text
    assert '"title"' not in text and '"default"' not in text


def test_declared_bounds_reach_the_schema():
    props = response_schema(WorkerAnswer)["properties"]
    assert props["summary"]["maxLength"] == 200
    assert props["events"]["maxItems"] == 3
    assert props["events"]["items"]["properties"]["what"]["maxLength"] == 60
    assert props["tags"]["items"]["maxLength"] == 20
    assert unbounded_paths(response_schema(WorkerAnswer)) == []


class Unbounded(BaseModel):
    note: str
    items: list[Annotated[str, Field(max_length=5)]]


def test_unbounded_fields_are_refused_with_their_paths():
    with pytest.raises(SchemaError, match=r"Unbounded: unbounded field\(s\) note, items"):
        response_schema(Unbounded)
    assert unbounded_paths(response_schema(Unbounded, require_bounds=False)) == ["note", "items"]


def test_enums_dates_and_patterns_count_as_bounded():
    from datetime import date

    class Fine(BaseModel):
        level: Literal["a", "b"]
        when: date
        code: str = Field(pattern=r"^[A-Z]\d{2}$")

    assert unbounded_paths(response_schema(Fine)) == []


def test_free_form_mappings_and_recursion_are_refused():
    class Mapping_(BaseModel):
        counts: dict[str, int]

    class Node(BaseModel):
        name: str = Field(max_length=5)
        children: list["Node"] = Field(max_length=2)

    with pytest.raises(SchemaError, match="free-form mapping"):
        response_schema(Mapping_)
    with pytest.raises(SchemaError, match="recursive type 'Node'"):
        response_schema(Node)
    with pytest.raises(SchemaError, match="pydantic BaseModel"):
        response_schema(dict)  # type: ignore[arg-type]


def test_response_format_forms():
    schema = response_schema(WorkerAnswer)
    assert response_format(schema, "json_schema", "WorkerAnswer") == {
        "type": "json_schema",
        "json_schema": {"name": "WorkerAnswer", "schema": schema, "strict": True},
    }
    assert response_format(schema, "json_object", "WorkerAnswer") == {"type": "json_object", "schema": schema}
    assert response_format(schema, "none", "WorkerAnswer") is None
    with pytest.raises(SchemaError):
        response_format(schema, "xml", "x")  # type: ignore[arg-type]
    assert json.loads(schema_instructions(schema).split("\n", 1)[1]) == schema


def test_schema_name_is_openai_safe():
    Weird = type("Risk Answer.v2", (BaseModel,), {"__annotations__": {"x": int}})
    assert schema_name(Weird) == "Risk_Answer_v2"
