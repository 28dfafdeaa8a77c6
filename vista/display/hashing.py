"""The display's content hash: what determines a display, so an unchanged patient is served from the store.

It covers the format version of this code, the MEDS Graph's version (`vista.toa.refs.graph_version`), the timeline
(its own content hash and its events and episodes), the variable definitions, the prompt texts, the
`DisplayConfig`, the model-side settings that change answers (`vista.toa.pipeline.answer_settings`: backend, model,
decoding parameters such as temperature, seed and max_tokens, schema mode — not retries or timeouts — and the
endpoint's identity, as the response cache keys on it: two servers that both call their model ``local`` are not
the same model) and the structured values computed from the graph.
"""

from __future__ import annotations

import hashlib
import json

from vista.display.agent_prompts import PROMPT_NAMES, prompt_text
from vista.display.config import DisplayConfig
from vista.display.model import load_variables
from vista.display.structured import STRUCTURED_VARIABLES
from vista.graph import PatientGraph
from vista.shared.llm import LLMGateway
from vista.shared.llm.config import ANSWER_FIELDS
from vista.toa.model import PatientTimeline
from vista.toa.pipeline import answer_settings
from vista.toa.refs import graph_version

DISPLAY_FORMAT_VERSION = "vista.display/3"
"""Bump when the same inputs give a different display (2: graph version, endpoint and decoding settings hashed;
3: a value citing no timeline event is shown as "Not found")."""

__all__ = ["ANSWER_FIELDS", "DISPLAY_FORMAT_VERSION", "display_hash"]


def display_hash(graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway, config: DisplayConfig) -> str:
    """sha256 over everything a display build depends on (see the module docstring)."""
    specs = load_variables(config.variables)
    structured = [STRUCTURED_VARIABLES[s.key](graph).model_dump_json() for s in specs if s.key in STRUCTURED_VARIABLES]
    parts = [DISPLAY_FORMAT_VERSION, graph_version(graph), timeline.content_hash,
             json.dumps([e.model_dump(mode="json") for e in timeline.events]),
             json.dumps([ep.model_dump(mode="json") for ep in timeline.episodes]),
             *(spec.model_dump_json() for spec in specs), *(prompt_text(name) for name in PROMPT_NAMES),
             config.model_dump_json(exclude={"variables"}), answer_settings(gateway),
             str(gateway.context_tokens),  # the timeline view is fitted to the context window
             *structured]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part).encode())
    return digest.hexdigest()
