"""`vista mcp --store S`: a graph store served to agents as MCP tools over stdio (PyPI ``mcp``, its `MCPServer`).

Tools (each with a JSON schema of its arguments; results are JSON objects):

- ``query``: a plan (no model) or a question (the bridge: one model call for the plan) about one patient; returns
  the value, unit, date, answer and the cited node ids (`vista.query.bridge.BridgeAnswer`);
- ``query_cohort``: one plan over every patient of the store (or the ones given), one row per patient;
- ``timeline``: a patient's stored TOA timeline as text, grouped by episode, with ``t<k>`` ids and their ``e<k>`` refs;
- ``display``: a patient's stored tumor-board display (JSON);
- ``source``: open cited ids (``e<k>``, or ``t<k>``: the source events behind a timeline event) with their MEDS row;
- ``similar``: the store's patients most similar to one (`vista similar`);
- ``cohort_query``: patients matching coded, text and time-order criteria (`vista cohort-query`'s JSON query).

Patients are opened once and kept (their plan index is built on first use). Errors the user can fix come back as
tool errors with the one-line message the command line would print.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from vista.patient_search.cli import METHODS
from vista.query.bridge import BridgeConfig, answer_plan, answer_question
from vista.query.entry import PatientEntry, open_entry
from vista.query.plan import Plan

SERVER_NAME = "vista"
MAX_COHORT_ROWS = 10_000
Subject = Annotated[int, Field(description="subject_id of a patient of the store")]
MethodName = Literal[METHODS]  # type: ignore[valid-type]
Question = Annotated[str | None, Field(max_length=2000)]
Ids = Annotated[list[str], Field(min_length=1, max_length=200)]
Chars = Annotated[int, Field(ge=40, le=20_000)]
K = Annotated[int, Field(ge=1, le=100)]


class StoreTools:
    """The tools' work over one store, without the MCP layer (so it is testable and reusable)."""

    def __init__(self, store: str | os.PathLike, llm: Sequence[str] = ()):
        self.store = Path(store)
        self.llm = list(llm)
        self._entries: dict[int, PatientEntry] = {}

    def entry(self, subject_id: int) -> PatientEntry:
        if subject_id not in self._entries:
            self._entries[subject_id] = open_entry(self.store, subject_id)
        return self._entries[subject_id]

    async def query(self, subject_id: int, plan: Plan | None, question: str | None) -> dict:
        from vista.shared.errors import CommandLineError

        if (plan is None) == (question is None):
            raise CommandLineError("give a plan or a question (one of them)")
        if plan is not None:
            return answer_plan(self.entry(subject_id), plan).model_dump(mode="json")
        from vista.query.bridge import check_question
        from vista.shared.llm import LLMConfig, open_gateway

        check_question(question, subject_id)  # type: ignore[arg-type]
        async with open_gateway(LLMConfig.from_cli(self.llm)) as gateway:
            await gateway.discover_context_tokens()
            answer = await answer_question(self.entry(subject_id), subject_id, question, gateway, BridgeConfig())  # type: ignore[arg-type]
        return answer.model_dump(mode="json")

    def query_cohort(self, plan: Plan, subjects: list[int] | None) -> dict:
        from vista.query.cohort import cohort_rows
        from vista.query.state import open_graph_store

        ids = subjects or open_graph_store(self.store).subject_ids()
        rows = cohort_rows(self.store, plan, ids[:MAX_COHORT_ROWS])
        return {"plan": json.loads(plan.compact()), "rows": [r.model_dump(mode="json") for r in rows]}

    def timeline(self, subject_id: int) -> dict:
        from vista.query import load_timeline, timeline_text

        timeline = load_timeline(self.store, subject_id, self.entry(subject_id).graph)
        return {"subject_id": subject_id, "text": timeline_text(timeline, with_refs=True)}

    def display(self, subject_id: int) -> dict:
        from vista.display.store import DisplayStore
        from vista.query.errors import StoreMissingError

        displays = DisplayStore(self.store)
        if not displays.path_of(subject_id).is_file():
            raise StoreMissingError(f"{displays.path_of(subject_id)}: no display for subject {subject_id}; build it "
                                    f"with `vista display --store {self.store} --subject {subject_id}`")
        return displays.load(subject_id, self.entry(subject_id).graph).model_dump(mode="json")

    def source(self, subject_id: int, ids: list[str], chars: int) -> dict:
        from vista.query import UnknownEventError, open_sources

        refs: list[str] = []
        timeline_ids = [i for i in ids if i.startswith("t")]
        events = {}
        if timeline_ids:
            events = {e.event_id: e for e in self.entry_timeline(subject_id).events}
            unknown = [i for i in timeline_ids if i not in events]
            if unknown:
                raise UnknownEventError(subject_id, unknown, where="its stored timeline", kind="timeline event",
                                        pattern="t<k>")
        for item in ids:
            refs.extend(events[item].source_event_refs if item.startswith("t") else [item])
        opened = open_sources(self.entry(subject_id).graph, refs, excerpt_chars=chars)
        return {"subject_id": subject_id, "sources": [s.model_dump(mode="json") for s in opened]}

    def entry_timeline(self, subject_id: int):
        from vista.query import load_timeline

        entry = self.entry(subject_id)
        return entry.timeline or load_timeline(self.store, subject_id, entry.graph)

    def similar(self, subject_id: int, k: int, method: str) -> dict:
        from vista.patient_search.render import similar_json
        from vista.patient_search.similarity import Method, similar_patients
        from vista.patient_search.source import open_source

        chosen = Method(method)
        return json.loads(similar_json(subject_id, chosen, similar_patients(open_source(self.store), subject_id, k, chosen)))

    def cohort_query(self, query: dict) -> dict:
        from vista.patient_search.evaluate import run_query
        from vista.patient_search.query import load_query
        from vista.patient_search.render import query_json
        from vista.patient_search.source import open_source

        parsed = load_query(json.dumps(query), "cohort_query")
        return json.loads(query_json(run_query(open_source(self.store), parsed)))


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """A mistake the user can fix comes back as the tool's error, one line (as the command line prints it)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from vista.shared.cli_kit import user_errors

    try:
        yield
    except user_errors() as exc:
        raise ToolError(" ".join(str(exc).split())) from None


def build_server(store: str | os.PathLike, llm: Sequence[str] = ()):
    """The `MCPServer` of ``store`` with the seven tools (see the module docstring)."""
    from mcp.server.mcpserver import MCPServer

    tools = StoreTools(store, llm)
    server = MCPServer(SERVER_NAME, log_level="WARNING", instructions=(
        f"Patients of the VISTA graph store {Path(store).name}. Ask `query` with a plan (exact, no model) or a "
        "question; every answer cites node ids that `source` opens to their MEDS rows."))

    @server.tool(description="Answer about one patient by a deterministic graph query: give `plan` (see its schema: "
                 "measure/events/notes/episodes, window, episode, during, where, unit, aggregate) or a `question` "
                 "in words. Returns value, unit, date, answer and cited node ids.")
    async def query(subject_id: Subject, plan: Plan | None = None, question: Question = None) -> dict:
        with _as_tool_errors():
            return await tools.query(subject_id, plan, question)

    @server.tool(description="Run one plan over every patient of the store (or `subjects`): one row per patient "
                 "with value, unit, date, rows matched and cited ids.")
    def query_cohort(plan: Plan, subjects: list[int] | None = None) -> dict:
        with _as_tool_errors():
            return tools.query_cohort(plan, subjects)

    @server.tool(description="A patient's stored oncology timeline (TOA): events grouped by episode with t<k> ids "
                 "and the e<k> graph events behind them.")
    def timeline(subject_id: Subject) -> dict:
        with _as_tool_errors():
            return tools.timeline(subject_id)

    @server.tool(description="A patient's stored tumor-board display (JSON), each value citing its sources.")
    def display(subject_id: Subject) -> dict:
        with _as_tool_errors():
            return tools.display(subject_id)

    @server.tool(description="Open source events by id (e<k> graph events, or t<k> timeline events: the events "
                 "behind them) with code, value, unit, note excerpt and the MEDS shard and row.")
    def source(subject_id: Subject, ids: Ids, chars: Chars = 600) -> dict:
        with _as_tool_errors():
            return tools.source(subject_id, ids, chars)

    @server.tool(description="The store's patients most similar to one (graph-guided similarity).")
    def similar(subject_id: Subject, k: K = 10, method: MethodName = "timeline") -> dict:
        with _as_tool_errors():
            return tools.similar(subject_id, k, method)

    @server.tool(description="Patients matching coded, text and time-order criteria: a CohortQuery JSON object "
                 "({\"terms\": [{\"kind\": \"code\", \"name\": ..., \"codes\": [...]}, ...], \"order\": [...]}), "
                 "as `vista cohort-query --query-file` reads it.")
    def cohort_query(query: dict) -> dict:
        with _as_tool_errors():
            return tools.cohort_query(query)

    return server


def serve(store: str | os.PathLike, llm: Sequence[str] = ()) -> None:
    """Serve ``store`` over stdin/stdout until the client closes the connection."""
    asyncio.run(build_server(store, llm).run_stdio_async())
