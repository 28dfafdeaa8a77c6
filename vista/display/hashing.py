"""The display's content hash: what determines a display, so an unchanged patient is served from the store.

It covers the timeline (its own content hash and its events and episodes), the variable definitions, the prompt
texts, the `DisplayConfig`, the gateway settings that change answers (backend, endpoint, model, decoding
parameters — not retries or timeouts) and the structured values computed from the graph.
"""

from __future__ import annotations

import hashlib
import json

from vista.display.agent_prompts import PROMPT_NAMES, prompt_text
from vista.display.config import DisplayConfig
from vista.display.model import load_variables
from vista.display.structured import STRUCTURED_VARIABLES
from vista.graph import PatientGraph
from vista.llm import LLMGateway
from vista.toa.model import PatientTimeline

DISPLAY_FORMAT_VERSION = "vista.display/1"
ANSWER_FIELDS = ("backend", "model", "schema_mode", "schema_in_prompt", "temperature", "max_tokens",
                 "max_tokens_field", "reasoning_effort", "seed", "model_path", "n_ctx", "context_tokens")
"""`LLMConfig` fields that can change a model's answers (part of the hash). Like the response cache key and the TOA
hash, the endpoint URL is not: the same model behind another host or port gives the same answers."""


def display_hash(graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway, config: DisplayConfig) -> str:
    """sha256 over everything a display build depends on (see the module docstring)."""
    specs = load_variables(config.variables)
    structured = [STRUCTURED_VARIABLES[s.key](graph).model_dump_json() for s in specs if s.key in STRUCTURED_VARIABLES]
    parts = [DISPLAY_FORMAT_VERSION, timeline.content_hash,
             json.dumps([e.model_dump(mode="json") for e in timeline.events]),
             json.dumps([ep.model_dump(mode="json") for ep in timeline.episodes]),
             *(spec.model_dump_json() for spec in specs), *(prompt_text(name) for name in PROMPT_NAMES),
             config.model_dump_json(exclude={"variables"}),
             gateway.config.model_dump_json(include=set(ANSWER_FIELDS)), *structured]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part).encode())
    return digest.hexdigest()
