"""Bounded JSON schemas from pydantic response models, and the `response_format` each endpoint accepts.

Small models only produce valid JSON when decoding is constrained by a schema with no open ends:
every object closed (``additionalProperties: false``) with every property required, every string
bounded (``maxLength``, an enum/const or a fixed format) and every array bounded (``maxItems``).
`response_schema` builds such a schema from a pydantic model (``$ref``s inlined, defaults and
titles dropped) and, by default, refuses models that leave a string or array unbounded.

>>> from typing import Annotated, Literal
>>> from pydantic import BaseModel, Field
>>> class Risk(BaseModel):
...     level: Literal["Low", "High"]
...     reasons: list[Annotated[str, Field(max_length=80)]] = Field(default_factory=list, max_length=3)
>>> response_schema(Risk)
{'properties': {'level': {'enum': ['Low', 'High'], 'type': 'string'}, 'reasons': {'items': {'maxLength': 80, 'type': 'string'}, 'maxItems': 3, 'type': 'array'}}, 'required': ['level', 'reasons'], 'type': 'object', 'additionalProperties': False}
>>> class Loose(BaseModel):
...     notes: list[str]
>>> unbounded_paths(response_schema(Loose, require_bounds=False))
['notes', 'notes[]']

OpenAI's strict mode accepts only a subset of JSON Schema (no ``maxLength``/``minLength`` and, on some models,
no ``pattern``, ``format``, ``maxItems`` or numeric bounds). ``schema_mode="openai_strict"`` sends `strict_schema`:
a copy keeping only the portable keywords, every bound it removes restated in the field's description (so the
model still sees it); the answer is then held to the full bounds by local validation (the pydantic model).

>>> strict_schema(response_schema(Risk))["properties"]["reasons"]
{'items': {'type': 'string', 'description': '(at most 80 characters)'}, 'type': 'array', 'description': '(at most 3 items)'}
"""


import copy
import json
import re
from typing import Literal

from pydantic import BaseModel

from vista.shared.llm.errors import SchemaError

SchemaMode = Literal["json_schema", "openai_strict", "json_object", "none"]
JSONSchema = dict[str, object]

# String formats whose values have a fixed, short shape: a bound as good as maxLength.
_BOUNDED_FORMATS = frozenset({"date", "date-time", "time", "uuid", "duration"})
_DROPPED_KEYS = frozenset({"title", "default", "examples"})
STRICT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
                             "description"})
"""Keywords every OpenAI strict-mode model accepts; `strict_schema` removes the others."""
_BOUND_WORDS = {
    "maxLength": "at most {} characters", "minLength": "at least {} characters", "maxItems": "at most {} items",
    "minItems": "at least {} items", "maximum": "at most {}", "minimum": "at least {}", "pattern": "matching {}",
    "format": "in {} format",
}


def schema_name(model: type[BaseModel]) -> str:
    """The model's name in the form OpenAI accepts for ``json_schema.name`` (``[A-Za-z0-9_-]{1,64}``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", model.__name__)[:64] or "response"


def response_schema(model: type[BaseModel], *, require_bounds: bool = True) -> JSONSchema:
    """The closed, fully-required, ``$ref``-free JSON schema of ``model`` (raises `SchemaError` if unbounded)."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise SchemaError(f"response_model must be a pydantic BaseModel subclass, got {model!r}")
    raw = model.model_json_schema(mode="validation")
    defs = raw.pop("$defs", {})
    schema = _normalise(raw, defs, model.__name__, ())
    if schema.get("type") != "object":
        raise SchemaError(f"response model {model.__name__}: the top level must be a JSON object")
    if require_bounds:
        loose = unbounded_paths(schema)
        if loose:
            raise SchemaError(
                f"response model {model.__name__}: unbounded field(s) {', '.join(loose)} — give every str a "
                "max_length (or Literal/enum) and every list a max_length, so small models cannot run on forever"
            )
    return schema


def _normalise(node: object, defs: dict, model_name: str, seen: tuple[str, ...]) -> object:
    if isinstance(node, list):
        return [_normalise(item, defs, model_name, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise SchemaError(f"response model {model_name}: recursive type {name!r} cannot be bounded")
        if name not in defs:
            raise SchemaError(f"response model {model_name}: unresolved schema reference {ref!r}")
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        merged = {**copy.deepcopy(defs[name]), **siblings}
        return _normalise(merged, defs, model_name, (*seen, name))
    out = {key: _normalise(value, defs, model_name, seen) for key, value in node.items() if key not in _DROPPED_KEYS}
    if "properties" in node:
        if isinstance(node.get("additionalProperties"), dict):
            raise SchemaError(f"response model {model_name}: an object mixes fixed properties and free-form extra keys")
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])
    elif out.get("type") == "object":
        raise SchemaError(
            f"response model {model_name}: a free-form mapping (dict) cannot be constrained; use a model or a list of pairs"
        )
    return out


def unbounded_paths(schema: JSONSchema) -> list[str]:
    """Paths of the strings and arrays in ``schema`` that have no upper bound (``[]`` marks array items)."""
    found: list[str] = []
    _collect_unbounded(schema, "", found)
    return found


def _collect_unbounded(node: object, path: str, found: list[str]) -> None:
    if not isinstance(node, dict):
        return
    for branch in node.get("anyOf", []) + node.get("oneOf", []) + node.get("allOf", []):
        _collect_unbounded(branch, path, found)
    types = node.get("type")
    types = set(types) if isinstance(types, list) else {types}
    fixed = "enum" in node or "const" in node
    if "string" in types and not fixed and "maxLength" not in node and "pattern" not in node:
        if node.get("format") not in _BOUNDED_FORMATS:
            found.append(path or "<root>")
    if "array" in types and "maxItems" not in node and "prefixItems" not in node:
        found.append(path or "<root>")
    for name, sub in node.get("properties", {}).items():
        _collect_unbounded(sub, f"{path}.{name}" if path else name, found)
    if isinstance(node.get("items"), dict):
        _collect_unbounded(node["items"], f"{path}[]", found)
    for i, sub in enumerate(node.get("prefixItems", [])):
        _collect_unbounded(sub, f"{path}[{i}]", found)


def strict_schema(schema: JSONSchema) -> JSONSchema:
    """A copy of a `response_schema` for OpenAI strict mode: only `STRICT_KEYWORDS` kept, each removed bound
    (length, items, numeric range, pattern, format) written into the description; objects stay closed and
    fully required. The answer must still be validated against the full schema (the gateway does, with pydantic).
    """
    return _strict(schema)


def _strict(node: object) -> object:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, object] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = _strict(value)
        elif key in STRICT_KEYWORDS:
            out[key] = value
        elif key in _BOUND_WORDS:
            notes.append(_BOUND_WORDS[key].format(value))
    if "properties" in out:
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])  # type: ignore[arg-type]
    if notes:
        text = f"({', '.join(notes)})"
        out["description"] = f"{out['description']} {text}" if out.get("description") else text
    return out


def response_format(schema: JSONSchema, mode: SchemaMode, name: str) -> dict[str, object] | None:
    """The ``response_format`` request field for ``mode`` (None when the schema travels in the prompt only).

    >>> response_format({"type": "object"}, "json_object", "X")
    {'type': 'json_object', 'schema': {'type': 'object'}}
    """
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == "openai_strict":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    if mode == "none":
        return None
    raise SchemaError(f"unknown schema_mode {mode!r} (expected json_schema, openai_strict, json_object or none)")


def schema_instructions(schema: JSONSchema) -> str:
    """The prompt text that carries the schema when the endpoint cannot enforce it."""
    return (
        "Answer with one JSON object and nothing else (no prose, no code fences). "
        "It must match this JSON schema exactly:\n" + json.dumps(schema, separators=(",", ":"), sort_keys=True)
    )
