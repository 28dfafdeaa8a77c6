"""schema_mode="openai_strict": a strict-mode-compatible copy of the schema is sent, the full bounds are enforced locally."""

from __future__ import annotations

import asyncio
import json

from trajonco.agents.schemas import ManagerOutput, PreprocessorOutput
from vista.shared.llm import LLMConfig, LLMGateway
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.messages import user
from vista.shared.llm.schema import STRICT_KEYWORDS, response_format, response_schema, strict_schema


def _nodes(node):
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    yield from _nodes(sub)
            elif key in ("items", "anyOf"):
                yield from _nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _nodes(item)


def test_strict_copy_keeps_only_portable_keywords_and_restates_the_bounds():
    full = response_schema(ManagerOutput)
    strict = strict_schema(full)
    for node in _nodes(strict):
        assert set(node) <= STRICT_KEYWORDS, set(node) - STRICT_KEYWORDS
        if "properties" in node:
            assert node["additionalProperties"] is False and node["required"] == list(node["properties"])
    props = strict["properties"]
    assert "at most 4000 characters" in props["risk_evolution_summary"]["description"]
    assert props["risk_evolution_summary"]["description"].startswith("narrative of how the risk evolved")
    assert "at most 40 items" in props["final_events"]["description"]
    assert "(at most 10, at least 1)" in props["risk_score"]["description"]
    ids = props["final_events"]["items"]["properties"]["event_ids"]["items"]
    assert "matching ^e[0-9]{1,9}$" in ids["description"]
    assert full["properties"]["risk_evolution_summary"]["maxLength"] == 4000  # the original is untouched


def test_openai_strict_response_format():
    full = response_schema(PreprocessorOutput)
    form = response_format(full, "openai_strict", "PreprocessorOutput")
    assert form == {"type": "json_schema", "json_schema": {"name": "PreprocessorOutput", "schema": strict_schema(full), "strict": True}}
    assert "maxItems" not in json.dumps(form)


def test_gateway_sends_the_strict_copy_and_reasks_an_answer_beyond_the_stripped_bounds():
    too_long = PreprocessorOutput.model_construct(relevant_event_ids=["e1"], rationale="x" * 600).model_dump_json()
    good = '{"relevant_event_ids": ["e1"], "rationale": "kept the cough"}'
    backend = ScriptedBackend([too_long, good])

    async def run():
        async with LLMGateway(LLMConfig(schema_mode="openai_strict", max_reasks=1), backend=backend) as gateway:
            return await gateway.complete([user("filter")], PreprocessorOutput, agent="preprocessor")

    result = asyncio.run(run())
    assert result.output is not None and result.output.rationale == "kept the cough"
    assert result.usage.reasks == 1
    sent = backend.requests[0].response_format["json_schema"]["schema"]
    assert "maxLength" not in json.dumps(sent) and "(at most 500 characters)" in json.dumps(sent)
    assert "500" in backend.requests[1].messages[-1].content  # the re-ask quotes the validation error
