"""The ``vista query`` and ``vista mcp`` sub-commands (the query bridge, `vista.query.bridge`, and its MCP server):
parsers and handlers, outside the `vista.query` package so building the parser imports nothing heavy.

Wired in `vista.cli` with ``add_parsers(sub)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from vista.shared.errors import CommandLineError

QUERY_EXAMPLES = [
    "vista query --store out/vista --subject 52 \"What was the lowest hemoglobin during first-line therapy?\"",
    "vista query --store out/vista --subject 52 --plan '{\"measure\": \"LOINC//718-7\", \"aggregate\": \"min\"}' --json",
    "vista query --store out/vista --subject 52 --plan '{\"measure\": \"wbc\", \"during\": \"carboplatin\", \"aggregate\": \"min\"}'",
    "vista query --plan-schema",
]
MCP_EXAMPLE = "vista mcp --store out/vista     # an MCP server on stdin/stdout (see docs/vista-query.md)"
JSON_FIELDS = ("question", "plan", "route", "value", "unit", "date", "answer", "cited", "status", "sentence_by",
               "reasked", "usage", "error")


def answer_json(answer) -> str:
    """The answer as `vista query --json` prints it: question, plan, route, value, unit, date, answer, cited, ..."""
    data = answer.model_dump(mode="json", exclude_none=False)
    if answer.plan is not None:
        data["plan"] = json.loads(answer.plan.compact())
    return json.dumps({k: data[k] for k in JSON_FIELDS}, indent=1)


def answer_lines(answer, store: str) -> list[str]:
    lines = [answer.answer or f"(no answer: {answer.error})"]
    lines.append(f"route: {answer.route}" + (f"; plan: {answer.plan.compact()}" if answer.plan is not None else "")
                 + ("; re-asked once for a name" if answer.reasked else ""))
    if answer.cited:
        shown = " ".join(answer.cited[:20])
        lines.append(f"open the cited rows: vista source --store {store} --subject {answer.subject_id} {shown}")
    if answer.usage.calls:
        u = answer.usage
        lines.append(f"{u.calls} model call(s), {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens")
    return lines


def _cmd_query(args: argparse.Namespace) -> int:
    if args.plan_schema:
        from vista.query.plan import plan_schema

        print(json.dumps(plan_schema(), indent=1))
        return 0
    if args.store is None or args.subject is None:
        raise CommandLineError("--store and --subject are required (except with --plan-schema)")
    if (args.plan is None) == (args.question is None):
        raise CommandLineError("give a question or --plan PLAN (one of them)")
    from vista.query.bridge import BridgeConfig, answer_plan, answer_question, check_question
    from vista.query.entry import open_entry
    from vista.query.plan import parse_plan

    if args.plan is not None:
        plan = parse_plan(args.plan)
        answer = answer_plan(open_entry(args.store, args.subject), plan)
    else:
        question = check_question(args.question, args.subject)
        entry = open_entry(args.store, args.subject)
        from vista.cli import _gateway

        async def run():
            async with await _gateway(args.llm) as gateway:
                return await answer_question(entry, args.subject, question, gateway,
                                             BridgeConfig(sentence=args.sentence))

        answer = asyncio.run(run())
    print(answer_json(answer) if args.json else "\n".join(answer_lines(answer, args.store)))
    return 1 if answer.status == "failed" else 0


def _cmd_mcp(args: argparse.Namespace) -> int:
    from vista.query.mcp_server import serve
    from vista.query.state import open_graph_store

    open_graph_store(args.store)  # a missing store: one line before the server starts
    serve(args.store, args.llm)
    return 0


def add_parsers(sub) -> None:
    """Register ``vista query`` and ``vista mcp`` on an argparse subparsers object."""
    from vista.shared.cli_kit import add_llm_option, subcommand

    p = subcommand(sub, "query", "answer a question about a patient by a deterministic graph query (the plan), "
                   "citing the MEDS rows", QUERY_EXAMPLES,
                   details="One model call turns the question into a plan; the plan runs over the patient's graph "
                           "(no model); the answer gives the value, unit, date and cited node ids. --plan runs a "
                           "plan with no model. Questions no plan expresses fall back to `vista ask` (route "
                           "timeline). The plan language: docs/vista-query.md, or --plan-schema.")
    p.add_argument("--store", help="graph store directory (made by `vista graph` or `vista build`)")
    p.add_argument("--subject", type=int, help="subject_id")
    p.add_argument("question", nargs="?", help="the question, in quotes")
    p.add_argument("--plan", metavar="PLAN", help="run this plan (JSON, or a JSON file) instead of asking a model")
    p.add_argument("--plan-schema", action="store_true", help="print the plan's JSON schema and exit")
    p.add_argument("--sentence", choices=("template", "llm"), default="template",
                   help="who writes the answer sentence: the template, or the model (kept only if every number and "
                        "date in it equals the result)")
    add_llm_option(p)
    p.add_argument("--json", action="store_true", help="print question, plan, route, value, unit, date, answer, "
                   "cited as JSON")
    p.set_defaults(handler=_cmd_query)

    p = subcommand(sub, "mcp", "serve a graph store to agents as MCP tools over stdio (query, timeline, display, "
                   "source, similar, cohort-query)", MCP_EXAMPLE)
    p.add_argument("--store", required=True, help="graph store directory")
    add_llm_option(p)
    p.set_defaults(handler=_cmd_mcp)
