"""VISTA's query interface: answer a question about a patient from its timeline and episodes, citing event ids,
and open the cited source events from the MEDS Graph to verify.

    from vista.query import ask, load_state, open_sources

    state = load_state("store", 21)                      # the stored graph and TOA timeline (no model call)
    async with open_gateway(LLMConfig.from_env()) as gateway:
        answer = await ask("When did first-line therapy start?", state.timeline, state.graph, gateway, verify=True)
    answer.status, answer.answer, [e.event_id for e in answer.cited], answer.verification.verdict
    open_sources(state.graph, answer.source_refs)          # code, value/unit, note excerpt, shard + row

The same steps are the `vista ask` and `vista source` commands (`vista.cli`).

The query bridge answers value, date and count questions by a deterministic plan over the graph instead
(`vista.query.plan`, `vista.query.execute`, `vista.query.bridge`; ``vista query``, ``vista mcp``; docs/vista-query.md)::

    entry = open_entry("store", 21)                      # graph + stored timeline, indexed on first use
    run_plan(entry, Plan(measure="hemoglobin", aggregate="min")).cited
    answer = await answer_question(entry, 21, "Lowest hemoglobin on carboplatin?", gateway)
"""

from vista.query.ask import ANSWER_AGENT, VERIFY_AGENT, answer_messages, ask, fitted_view, verify_answer, verify_messages
from vista.query.errors import ContextTooLongError, QueryError, StoreMissingError, UnknownEventError, UnknownSubjectError
from vista.query.model import (
    AnswerDraft,
    QueryAnswer,
    QueryConfig,
    QueryUsage,
    SourceEvent,
    VerdictDraft,
    Verification,
    answer_draft_model,
    verdict_draft_model,
)
from vista.query.render import answer_text, source_lines, sources_text, timeline_lines, timeline_text
from vista.query.sources import excerpt, open_sources, source_refs_of
from vista.query.state import PatientState, load_graph, load_state, load_timeline, open_graph_store
from vista.query.bridge import BridgeAnswer, BridgeConfig, answer_plan, answer_question, answer_question_sync
from vista.query.entry import PatientEntry, open_entry
from vista.query.execute import PlanResult, run_plan
from vista.query.plan import Plan, parse_plan

__all__ = [
    "ANSWER_AGENT", "BridgeAnswer", "BridgeConfig", "PatientEntry", "Plan", "PlanResult", "answer_plan", "answer_question",
    "answer_question_sync", "open_entry", "parse_plan", "run_plan", "VERIFY_AGENT", "AnswerDraft", "ContextTooLongError", "PatientState", "QueryAnswer", "QueryConfig",
    "QueryError", "QueryUsage", "SourceEvent", "StoreMissingError", "UnknownEventError", "UnknownSubjectError",
    "VerdictDraft", "Verification", "answer_draft_model", "answer_messages", "answer_text", "ask", "excerpt", "fitted_view", "load_graph", "load_state",
    "load_timeline", "open_graph_store", "open_sources", "source_lines", "source_refs_of", "sources_text",
    "timeline_lines", "timeline_text", "verdict_draft_model", "verify_answer", "verify_messages",
]
