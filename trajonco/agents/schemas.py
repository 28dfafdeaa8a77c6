"""What each TrajOnco agent must return: bounded pydantic models whose JSON schema the gateway enforces.

Every string has a maxLength and every list a maxItems, and objects forbid extra keys, so a schema-constrained
small model (SmolLM2-135M on llama.cpp) always produces parseable output of bounded length. Two sets of bounds
exist: `STANDARD_LIMITS` for real endpoints (long, detailed summaries) and `COMPACT_LIMITS` for small-context
models, whose answers must fit a budget of about a thousand tokens. `output_models(limits)` returns the classes for a set of
bounds; the compact classes subclass the standard ones, so code typed against `WorkerOutput` accepts both.

>>> models = output_models(COMPACT_LIMITS)
>>> issubclass(models.worker, WorkerOutput)
True
>>> models.worker.model_json_schema()["properties"]["updated_summary"]["maxLength"]
280
>>> WorkerOutput.model_json_schema()["additionalProperties"]
False

A small model's answer can cost up to one token per character (runs of digits and dates do), and one cut off at
the answer budget fails validation, so `fit_limits` shrinks bounds until the longest valid answer fits the budget:

>>> max(worst_case_chars(m) for m in (models.worker, models.manager, models.preprocessor))
1004
>>> worst_case_chars(models.any_manager) <= worst_case_chars(models.manager)  # it also names the cancer
True
>>> fit_limits(COMPACT_LIMITS, max_tokens=1024) is COMPACT_LIMITS
True
>>> fitted = fit_limits(COMPACT_LIMITS, max_tokens=600)
>>> fitted.name, max(worst_case_chars(m) for m in (output_models(fitted).worker, output_models(fitted).manager)) <= 600
('compact-600', True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from datetime import date
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from trajonco.cancers import CANCERS
from vista.shared.llm.remote import ModelRef, ship_as

EVENT_ID_PATTERN = r"^e[0-9]{1,9}$"
EventId = Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN, max_length=10)]
"""A timeline element id, ``e<k>`` (k = row offset of the event inside the patient's MEDS block)."""


class RiskLevel(StrEnum):
    """A worker's categorical risk of a diagnosis within the horizon."""

    LOW = "Low"
    MODERATE = "Moderate"
    HIGH = "High"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExtractedEvent(_Strict):
    """One risk factor or clinical event an agent found, with its date and the timeline elements behind it."""

    timestamp: date = Field(description="date of the event as written in the timeline, YYYY-MM-DD")
    description: str = Field(min_length=1, max_length=400, description="what happened and why it may matter for the cancer")
    event_ids: list[EventId] = Field(max_length=10, description="ids (e<k>) of the timeline elements this event comes from; empty if none")


class WorkerOutput(_Strict):
    """A worker's answer for one chunk: running summary, new events for the memory, trends and a risk level."""

    updated_summary: str = Field(min_length=1, max_length=4000, description="summary of the whole record so far, with dates")
    new_events: list[ExtractedEvent] = Field(max_length=25, description="risk factors or clinical events not already in memory")
    temporal_analysis: str = Field(max_length=1500, description="changes and trends over time seen so far")
    risk_reasoning: str = Field(min_length=1, max_length=1500, description="why the risk level is what it is")
    risk_level: RiskLevel = Field(description="risk of a diagnosis within the horizon: Low, Moderate or High")


class ManagerOutput(_Strict):
    """The manager's (and the single-agent baseline's) final answer: narrative, consolidated events, score 1-10."""

    risk_evolution_summary: str = Field(min_length=1, max_length=4000, description="narrative of how the risk evolved over the record")
    final_events: list[ExtractedEvent] = Field(max_length=40, description="unique related events in chronological order")
    risk_reasoning: str = Field(min_length=1, max_length=2500, description="justification of the final score")
    risk_score: int = Field(ge=1, le=10, description="risk of a diagnosis within the horizon, 1 (lowest) to 10 (highest)")


CancerKey = Literal[tuple(CANCERS)]  # type: ignore[valid-type]
"""The key of one of the 15 cancers (`trajonco.cancers.CANCERS`)."""


class AnyCancerManagerOutput(ManagerOutput):
    """The any-cancer chain's final answer (the paper's any-cancer variant): the manager's answer plus the cancer
    type with the strongest signal; the score is the risk of any cancer."""

    likely_cancer: CancerKey = Field(description="key of the cancer type with the strongest signal in the record")


LIKELY_CANCER_CHARS = len(',"likely_cancer":""') + max(map(len, CANCERS))
"""Characters the any-cancer manager's extra field adds to its answer at most."""


class PreprocessorOutput(_Strict):
    """A two-stage preprocessor's answer: which events of its chunk are relevant to the cancer."""

    relevant_event_ids: list[EventId] = Field(max_length=300, description="ids (e<k>) of the elements to keep")
    rationale: str = Field(max_length=500, description="one or two sentences on what was kept and why")


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """Upper bounds of the agents' outputs (characters for strings, items for lists)."""

    name: str
    summary_chars: int
    reasoning_chars: int
    temporal_chars: int
    event_chars: int
    ids_per_event: int
    worker_events: int
    manager_events: int
    preprocessor_ids: int
    rationale_chars: int


STANDARD_LIMITS = OutputLimits("standard", summary_chars=4000, reasoning_chars=1500, temporal_chars=1500, event_chars=400,
                               ids_per_event=10, worker_events=25, manager_events=40, preprocessor_ids=300, rationale_chars=500)
"""Bounds for real endpoints (the classes above as written)."""

COMPACT_LIMITS = OutputLimits("compact", summary_chars=280, reasoning_chars=150, temporal_chars=100, event_chars=80,
                              ids_per_event=2, worker_events=2, manager_events=3, preprocessor_ids=40, rationale_chars=120)
"""Bounds for small models: the longest valid answer of every agent is at most 1,024 characters, so it fits the
embedded model's default 1,024-token answer budget even at one token per character (`fit_limits` shrinks them
for smaller budgets)."""


@dataclass(frozen=True, slots=True)
class OutputModels:
    """The response models of every agent for one set of limits."""

    limits: OutputLimits
    worker: type[WorkerOutput]
    manager: type[ManagerOutput]
    preprocessor: type[PreprocessorOutput]
    any_manager: type[AnyCancerManagerOutput]  # the manager (and single agent) of the any-cancer chain

    def for_any_cancer(self) -> OutputModels:
        """These models with the any-cancer manager answering for the manager (and the single agent)."""
        return replace(self, manager=self.any_manager)


def _tightened(base: type[BaseModel], prefix: str, **overrides: int | tuple[int, type[BaseModel]]) -> Any:
    """A subclass of ``base`` whose named fields get a new max length (and, for lists, a new item type)."""
    overridden: dict[str, Any] = {}
    for name, spec in overrides.items():
        info = base.model_fields[name]
        limit, item = spec if isinstance(spec, tuple) else (spec, None)
        annotation = list[item] if item is not None else info.annotation  # type: ignore[valid-type]
        kept = [m for m in info.metadata if not isinstance(m, annotated_types.MaxLen)]
        overridden[name] = (Annotated[(annotation, *kept, annotated_types.MaxLen(limit))], Field(description=info.description))
    return create_model(prefix + base.__name__, __base__=base, __doc__=base.__doc__, **overridden)


_LIMITS_OF: dict[type[BaseModel], OutputLimits] = {}


@lru_cache(maxsize=None)
def output_models(limits: OutputLimits) -> OutputModels:
    """The agents' response models bounded by ``limits`` (the same classes for the same limits)."""
    models = _build_models(limits)
    for role in _ROLES:
        model = getattr(models, role)
        _LIMITS_OF.setdefault(model, limits)
        ship_as(model, ModelRef(__name__, "agent_model", (role, limits.name)))  # how another process rebuilds it
    return models


_ROLES = tuple(f.name for f in fields(OutputModels) if f.name != "limits")


def agent_model(role: str, limits: str) -> type[BaseModel]:
    """The response model of agent ``role`` under the limits named ``limits`` (`vista.shared.llm.remote.ModelRef`'s factory)."""
    return getattr(output_models(resolve_limits(limits)), role)


def _build_models(limits: OutputLimits) -> OutputModels:
    if limits == STANDARD_LIMITS:
        return OutputModels(limits, WorkerOutput, ManagerOutput, PreprocessorOutput, AnyCancerManagerOutput)
    prefix = "".join(part.title() for part in limits.name.split("-"))
    event = _tightened(ExtractedEvent, prefix, description=limits.event_chars, event_ids=limits.ids_per_event)
    worker = _tightened(WorkerOutput, prefix, updated_summary=limits.summary_chars, temporal_analysis=limits.temporal_chars,
                        risk_reasoning=limits.reasoning_chars, new_events=(limits.worker_events, event))
    manager = _tightened(ManagerOutput, prefix, risk_evolution_summary=limits.summary_chars,
                         risk_reasoning=limits.reasoning_chars, final_events=(limits.manager_events, event))
    preprocessor = _tightened(PreprocessorOutput, prefix, relevant_event_ids=limits.preprocessor_ids,
                              rationale=limits.rationale_chars)
    # the cancer field's length comes off the narrative, so the any-cancer answer is never longer than the manager's
    any_manager = _tightened(AnyCancerManagerOutput, prefix,
                             risk_evolution_summary=max(1, limits.summary_chars - LIKELY_CANCER_CHARS),
                             risk_reasoning=limits.reasoning_chars, final_events=(limits.manager_events, event))
    return OutputModels(limits, worker, manager, preprocessor, any_manager)


@lru_cache(maxsize=256)
def worst_case_chars(model: type[BaseModel]) -> int:
    """Length of the longest whitespace-free JSON answer ``model`` accepts (an upper bound on its tokens); memoised:
    the agents' models are fixed classes and their schema costs ~1 ms to build, on every assessment otherwise."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})

    def size(node: dict) -> int:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        if "enum" in node:
            return max(len(json.dumps(v)) for v in node["enum"])
        kind = node.get("type")
        if kind == "object":
            props = node["properties"]
            return 2 + sum(len(json.dumps(k)) + 1 + size(v) for k, v in props.items()) + max(0, len(props) - 1)
        if kind == "array":
            n = node["maxItems"]
            return 2 + n * size(node["items"]) + max(0, n - 1)
        if kind == "string":
            return 2 + (10 if node.get("format") == "date" else node["maxLength"])
        if kind == "integer":
            return len(str(node["maximum"]))
        raise ValueError(f"{model.__name__}: no size bound for schema {node}")

    return size(schema)


@lru_cache(maxsize=64)
def fit_limits(limits: OutputLimits, max_tokens: int) -> OutputLimits:
    """``limits`` scaled down (every bound by the same factor, at least 1) until each agent's longest answer has at
    most ``max_tokens`` characters, so a model writing one token per character is never cut off.

    The result is named ``<name>-<max_tokens>`` (``limits`` itself when it already fits), which `resolve_limits`
    turns back into the same bounds in another process.
    """
    def longest(candidate: OutputLimits) -> int:
        models = output_models(candidate)
        return max(worst_case_chars(m) for m in (models.worker, models.manager, models.preprocessor))

    factor, fitted = 1.0, limits
    while longest(fitted) > max_tokens:
        factor *= 0.9
        if factor < 0.01:
            raise ValueError(f"max_tokens={max_tokens} cannot hold even the smallest agent answers; raise it")
        scaled = {f.name: max(1, int(getattr(limits, f.name) * factor)) for f in fields(limits) if f.name != "name"}
        fitted = replace(limits, name=f"{limits.name}-{max_tokens}", **scaled)
    return fitted


_BASE_LIMITS = {STANDARD_LIMITS.name: STANDARD_LIMITS, COMPACT_LIMITS.name: COMPACT_LIMITS}


def resolve_limits(name: str) -> OutputLimits:
    """The limits called ``name``: ``standard``, ``compact`` or a fitted ``compact-<max_tokens>``.

    >>> resolve_limits("compact-1024") == fit_limits(COMPACT_LIMITS, 1024)
    True
    """
    base, dash, budget = name.partition("-")
    if base in _BASE_LIMITS and (not dash or budget.isdigit()):
        return fit_limits(_BASE_LIMITS[base], int(budget)) if budget else _BASE_LIMITS[base]
    raise ValueError(f"unknown output limits {name!r}; expected standard, compact or compact-<max_tokens>")


def limits_of(model: type[BaseModel]) -> OutputLimits | None:
    """The limits whose `output_models` produced ``model`` (None for any other class), to rebuild it elsewhere."""
    return _LIMITS_OF.get(model)


for _limits in _BASE_LIMITS.values():  # register the base classes, so limits_of knows them from the start
    output_models(_limits)
