"""`vista mcp` driven by the MCP client SDK over stdio: initialize, the tools listed with their JSON schemas, a plan
answered with cited ids that the ``source`` tool opens to their MEDS rows, and a bad plan as a one-line tool error."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from test_query_bridge import HGB, patient_with_most, store_root
from vista.query.entry import open_entry
from vista.query.execute import run_plan
from vista.query.plan import Plan

TOOLS = {"query", "query_cohort", "timeline", "display", "source", "similar", "cohort_query"}


def _text(result) -> str:
    return "".join(part.text for part in result.content)


async def _session_calls(store: Path, sid: int) -> dict:
    root = Path(__file__).parents[1]
    params = StdioServerParameters(command=sys.executable, args=["-m", "vista.cli", "mcp", "--store", str(store)],
                                   env={"PYTHONPATH": str(root), "HOME": os.environ.get("HOME", "/tmp")}, cwd=root)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            answer = await session.call_tool("query", {"subject_id": sid, "plan": {"measure": HGB, "aggregate": "min"}})
            cited = json.loads(_text(answer))["cited"]
            opened = await session.call_tool("source", {"subject_id": sid, "ids": cited})
            bad = await session.call_tool("query", {"subject_id": sid, "plan": {"measure": "hemoglobn"}})
            return {"init": init, "tools": tools, "answer": answer, "opened": opened, "bad": bad}


def test_mcp_server_lists_the_tools_and_a_plan_answer_cites_rows_source_opens():
    sid = patient_with_most(HGB)
    calls = asyncio.run(asyncio.wait_for(_session_calls(store_root(), sid), 300))
    assert calls["init"].server_info.name == "vista"
    by_name = {t.name: t for t in calls["tools"]}
    assert TOOLS <= set(by_name)
    assert "plan" in by_name["query"].input_schema["properties"] and by_name["source"].input_schema["required"]
    truth = run_plan(open_entry(store_root(), sid), Plan(measure="hemoglobin", aggregate="min"))
    answer = json.loads(_text(calls["answer"]))
    assert not calls["answer"].is_error and answer["route"] == "plan"
    assert answer["cited"] == list(truth.cited) and answer["value"] == truth.value
    sources = json.loads(_text(calls["opened"]))["sources"]
    assert [s["event_id"] for s in sources] == list(truth.cited) and sources[0]["code"] == HGB and sources[0]["row"] >= 0
    assert calls["bad"].is_error and "nearest: hemoglobin" in _text(calls["bad"])
