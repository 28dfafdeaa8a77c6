"""The `vista` command line: build MEDS Graphs, build or show a patient's TOA timeline and display, ask questions
about a patient, and open the source events an answer cites.

    vista graph --dataset MEDS --store STORE [--subjects 3 7]     # or --xml-dir DIR
    vista timeline --store STORE --subject 7 [--llm KEY=VALUE ...]
    vista display --store STORE --subject 7
    vista ask --store STORE --subject 7 "When did first-line therapy start?" [--verify] [--json]
    vista source --store STORE --subject 7 e12 e13 t4
    vista evaluate --store STORE --truth MEDS [--subjects 7 9] [--judge-llm KEY=VALUE ...]   # VISTA vs RAG
    vista similar --store STORE --subject 7 --k 10                  # graph-guided patient similarity
    vista cohort-query --store STORE --code 'lung=ICD10CM//C34*' --text 'egfr=EGFR[^.]*detected' --before lung:egfr
    vista query --store STORE --subject 7 --plan '{"measure": "hemoglobin", "aggregate": "min"}' [--json]
    vista mcp --store STORE                                         # the store as MCP tools over stdio
    vista serve --store STORE [--port 8765]                         # the tumor-board dashboard (docs/vista-serve.md)

Each sub-command imports its machinery lazily so `vista --help` stays instant. Errors the user can fix (a missing
store or subject, an unknown event id, bad input data, a bad LLM setting) are printed as one line, exit status 2.
LLM settings: the embedded SmolLM2 model by default, then ``VISTA_LLM_*`` variables, then ``--llm KEY=VALUE``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from vista.shared.cli_kit import (
    AddCommands,
    ArgumentParser,
    HelpFormatter,
    add_commands,
    add_llm_option,
    add_profile_option,
    add_version,
    lazy_commands,
    run_command,
    subcommand,
    user_errors,
)
from vista.shared.errors import CommandLineError

# ---------------------------------------------------------------------------------------------------- graph
def _cmd_graph(args: argparse.Namespace) -> int:
    from vista.graph import GraphStore

    store = GraphStore(Path(args.store))
    if args.dataset is not None:
        from vista.shared.meds.reader import MedsDataset

        from vista.shared.storage import resolve_local

        root = Path(args.dataset)
        resolve_local(root)  # a symbolic link loop: one line
        if not root.is_dir():
            raise CommandLineError(f"--dataset {root}: no such directory")
        report = store.build_dataset(MedsDataset(root, profile=args.coding_profile), args.subjects)
    else:
        report = store.build(_xml_sources(Path(args.xml_dir), args.subjects, args.coding_profile, args.on_duplicate))
    print(f"{store.root}: built {report.built} graph(s) ({report.nodes_built:,} nodes), skipped {report.skipped} "
          f"unchanged, in {report.seconds:.2f} s; the store holds {len(store)} subject(s)")
    return 0


def _xml_sources(directory: Path, subjects: Sequence[int] | None, coding_profile: str | None = None,
                 on_duplicate: str = "error"):
    """The patients of the XML files under ``directory`` (`vista.graph.xml_files`: recursive, path order, one file
    per patient; only ``subjects`` when given, each must be found); ``<eventstream>`` files are read with
    ``coding_profile`` (default ``vista_xml``)."""
    from vista.graph.task_graphs import xml_source
    from vista.graph.xml_files import list_xml_patients

    from vista.shared.xml_reading import XmlLimits

    large = XmlLimits.from_env().progress_bytes
    files, skipped = list_xml_patients(directory, on_duplicate)  # type: ignore[arg-type]
    for line in skipped:
        print(line, file=sys.stderr)
    wanted = set(subjects) if subjects else None
    found: set[int] = set()
    for file in files:
        if wanted is not None and file.subject_id is not None and file.subject_id not in wanted:
            continue
        source = xml_source(file.path, coding_profile)
        if file.path.stat().st_size >= large:  # the build of a very large patient takes a while: say what comes
            print(f"{file.path}: {len(source.events):,} events read; building the graph", file=sys.stderr)
        if wanted is None or source.subject_id in wanted:
            found.add(source.subject_id)
            yield source
    if wanted is not None and wanted - found:
        raise CommandLineError(f"--subjects: no XML file in {directory} holds subject(s) "
                               f"{', '.join(map(str, sorted(wanted - found)))}")


# ---------------------------------------------------------------------------------------------------- LLM steps
async def _gateway(items: Sequence[str]):
    """A gateway for the ``--llm`` settings whose context window is known (asked of the endpoint once), so the
    timeline plan — and its content hash — is the same whichever command built it."""
    from vista.shared.llm import LLMConfig, open_gateway

    gateway = open_gateway(LLMConfig.from_cli(items))
    await gateway.discover_context_tokens()
    return gateway


def _usage_line(gateway, built: bool, what: str) -> str:
    if not built:
        return f"{what} loaded from the store (unchanged inputs; no model call)"
    total = gateway.ledger.total()
    return (f"{what} built with model {gateway.config.model}: {total.calls} call(s), {total.failed_calls} failed, "
            f"{total.prompt_tokens} prompt + {total.completion_tokens} completion tokens")


def _toa_config(args: argparse.Namespace):
    from vista.toa import TOAConfig

    return TOAConfig(profile=args.profile) if args.profile else TOAConfig()


def _cmd_timeline(args: argparse.Namespace) -> int:
    from vista.pipeline import timeline_stage
    from vista.query import load_graph, open_graph_store, timeline_text

    graph = load_graph(open_graph_store(args.store), args.subject)

    async def run():
        async with await _gateway(args.llm) as gateway:
            timeline, outcome = await timeline_stage(args.store, graph, gateway, _toa_config(args))
            return timeline, _usage_line(gateway, outcome.rebuilt, "timeline")

    timeline, status = asyncio.run(run())
    if args.json:
        print(timeline.model_dump_json(indent=1))
        return 0
    print(timeline_text(timeline, with_refs=True))
    stats = timeline.stats
    print(f"\n{stats.chunks} chunk(s) ({stats.failed_chunks} failed), {stats.proposed_events} events proposed, "
          f"{stats.reasked_events} sent back once, {stats.rejected_events} rejected ({stats.misdated_events} dated "
          f"outside their cited events' dates), {stats.dropped_refs} unknown refs dropped, "
          f"{stats.merged_groups} merged; "
          f"safety net: {stats.safety_net_added} of {stats.safety_net_candidates} imaging date(s) added; "
          f"{len(timeline.ambiguous_pairs)} ambiguous pair(s) left")
    print(status)
    return 0


async def _timeline_and_display(args: argparse.Namespace, graph, gateway):
    """The patient's stored TOA timeline and display (`vista.pipeline.stages`), each built first when missing or out
    of date; and whether anything was built (i.e. the model was asked)."""
    from vista.pipeline import display_stage, timeline_stage

    timeline, toa = await timeline_stage(args.store, graph, gateway, _toa_config(args))
    display, shown = await display_stage(args.store, graph, timeline, gateway)
    return timeline, display, toa.rebuilt or shown.rebuilt


def _cmd_display(args: argparse.Namespace) -> int:
    from rich.console import Console

    from vista.display import render_display
    from vista.display.render import citation_summary
    from vista.query import load_graph, open_graph_store

    graph = load_graph(open_graph_store(args.store), args.subject)

    async def run():
        async with await _gateway(args.llm) as gateway:
            timeline, display, built = await _timeline_and_display(args, graph, gateway)
            return timeline, display, _usage_line(gateway, built, "timeline and display")

    timeline, display, status = asyncio.run(run())
    if args.json:
        print(display.model_dump_json(indent=1))
        return 0
    Console().print(render_display(display, timeline))
    print(citation_summary(display))
    print(status)
    return 0


def _cmd_ask(args: argparse.Namespace) -> int:
    from vista.query import QueryConfig, answer_text, ask, load_state

    state = load_state(args.store, args.subject)

    async def run():
        async with await _gateway(args.llm) as gateway:
            return await ask(args.question, state.timeline, state.graph, gateway, QueryConfig(), verify=args.verify)

    answer = asyncio.run(run())
    print(answer.model_dump_json(indent=1) if args.json else answer_text(answer, store=args.store))
    return 1 if answer.status == "failed" else 0


def _cmd_source(args: argparse.Namespace) -> int:
    from vista.query import (
        UnknownEventError,
        load_graph,
        load_timeline,
        open_graph_store,
        open_sources,
        sources_text,
    )

    if args.chars < 1:
        raise CommandLineError(f"--chars must be positive, not {args.chars}")
    graph = load_graph(open_graph_store(args.store), args.subject)
    refs: list[str] = []
    events = {}
    timeline_ids = [i for i in args.ids if i.startswith("t")]
    if timeline_ids:  # a timeline id opens the source events behind it
        events = {e.event_id: e for e in load_timeline(args.store, args.subject).events}
        unknown = [i for i in timeline_ids if i not in events]
        if unknown:
            raise UnknownEventError(args.subject, unknown, where="its stored timeline", kind="timeline event",
                                    pattern="t<k>")
    for item in args.ids:
        refs.extend(events[item].source_event_refs if item.startswith("t") else [item])
    sources = open_sources(graph, refs, excerpt_chars=args.chars)
    if args.json:
        print("[" + ",\n".join(s.model_dump_json(indent=1) for s in sources) + "]")
    else:
        print(sources_text(sources, with_provenance=True))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from rich.console import Console

    from vista.evaluation import evaluate
    from vista.evaluation.options import judge_config, load_truth_sources, with_demographics
    from vista.shared.llm import LLMConfig, open_gateway
    from vista.query import load_graph, open_graph_store
    from vista.rag import RagConfig, generate_rag_display

    store = open_graph_store(args.store)
    truths_found = load_truth_sources(args.truth, args.references, args.subjects)
    if args.subjects:
        records = truths_found
    else:  # every stored patient the truth describes
        records = {sid: r for sid, r in truths_found.items() if sid in store}
        if not records:
            given = " / ".join(str(p) for p in (args.truth, args.references) if p)
            raise CommandLineError(f"{given}: none of the {len(store)} patient(s) in {args.store} has a truth; pass "
                                   "--subjects or build graphs of the patients the truth describes")
    graphs = {sid: load_graph(store, sid) for sid in sorted(records)}
    judge_settings, _ = judge_config(args.judge_llm, LLMConfig.from_cli(args.llm))  # evaluate() warns when the same

    async def run():
        async with await _gateway(args.llm) as writer:
            displays, truths = [], {}
            for sid, graph in graphs.items():
                _, vista, _ = await _timeline_and_display(args, graph, writer)
                rag = (await generate_rag_display(graph, writer, RagConfig())).display
                displays += [vista, rag]
                truths[sid] = with_demographics(records[sid], graph.info.demographics)
                print(f"subject {sid}: VISTA display ({vista.calls} new calls) and RAG display ({rag.calls} new calls)",
                      file=sys.stderr)
            async with open_gateway(judge_settings) as judge:
                return await evaluate(displays, truths, judge, n_resamples=args.resamples)

    report = asyncio.run(run())
    if args.json:
        print(report.model_dump_json(indent=1))
    else:
        Console(width=max(140, Console().width)).print(report.to_table())
    if args.out:
        out = Path(args.out)
        report.write(out)
        print(f"wrote {out}/evaluation.md and {out}/evaluation.json", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------------- parser
def add_on_duplicate_option(parser: argparse.ArgumentParser) -> None:
    """``--on-duplicate error|first``: what two XML files holding one patient do (`vista.graph.xml_files`)."""
    parser.add_argument("--on-duplicate", dest="on_duplicate", choices=("error", "first"), default="error",
                        help="two XML files with one patient id: error (default, exit 2 naming both) or first (keep "
                        "the first in path order, say which files are skipped)")


def _add_patient(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, help="graph store directory (made by `vista graph`)")
    parser.add_argument("--subject", type=int, required=True, help="subject_id")


def build_parser(extra: AddCommands | None = None) -> argparse.ArgumentParser:
    """The `vista` parser; ``extra`` adds the sub-commands that live above this package (the Ray build job), which
    the console script's entry point (`jobs.cli`) wires in."""
    parser = ArgumentParser(prog="vista", formatter_class=HelpFormatter,
                            description="VISTA Architect: MEDS Graphs, oncology timelines (TOA), tumor-board "
                                        "displays, and questions answered with cited evidence.",
                            epilog="Run `vista COMMAND --help` for a command's options and an example.")
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = subcommand(sub, "graph", "build (or update) the MEDS Graphs of a cohort in a graph store",
                   ["vista graph --dataset out/synth --store out/vista --subjects 52 77",
                    "vista graph --xml-dir patients/ --store out/vista-xml"],
                   details="A whole cohort on Ray: `vista build` (the same store layout).")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="MEDS dataset root")
    source.add_argument("--xml-dir", help="directory of patient XML files, searched recursively (*.xml, in path "
                        "order): the project's <patient> documents or the VISTA team's <eventstream> (meds2text) files "
                        "(vista.graph.xml_input)")
    add_on_duplicate_option(p)
    p.add_argument("--store", required=True, help="graph store directory (created if needed)")
    p.add_argument("--subjects", type=int, nargs="+", help="only these subject ids (default: every patient)")
    add_profile_option(p)
    p.set_defaults(handler=_cmd_graph)

    p = subcommand(sub, "timeline", "build (or load, when unchanged) a patient's TOA timeline and print it",
                   "vista timeline --store out/vista --subject 52")
    _add_patient(p)
    p.add_argument("--profile", help="event-definition profile: packaged name or TOML path (default thoracic)")
    add_llm_option(p)
    p.add_argument("--json", action="store_true", help="print the stored timeline as JSON")
    p.set_defaults(handler=_cmd_timeline)

    p = subcommand(sub, "display", "build (or load) a patient's timeline and tumor-board display and print it",
                   "vista display --store out/vista --subject 52")
    _add_patient(p)
    p.add_argument("--profile", help="event-definition profile of the timeline (default thoracic)")
    add_llm_option(p)
    p.add_argument("--json", action="store_true", help="print the display as JSON")
    p.set_defaults(handler=_cmd_display)

    p = subcommand(sub, "ask", "answer a question from a patient's stored timeline, citing timeline events",
                   'vista ask --store out/vista --subject 52 "When did first-line therapy start?" --verify')
    _add_patient(p)
    p.add_argument("question", help="the question, in quotes")
    p.add_argument("--verify", action="store_true", help="also check the answer against the cited source events "
                   "(one more model call)")
    add_llm_option(p)
    p.add_argument("--json", action="store_true", help="print the typed answer as JSON")
    p.set_defaults(handler=_cmd_ask)

    p = subcommand(sub, "source", "print source events of a patient's graph, with their MEDS row provenance",
                   "vista source --store out/vista --subject 52 t3 e120")
    _add_patient(p)
    p.add_argument("ids", nargs="+", metavar="ID", help="graph event ids (e12) or timeline event ids (t3: the source "
                   "events behind it)")
    p.add_argument("--chars", type=int, default=600, help="characters of note text shown per event (default 600)")
    p.add_argument("--json", action="store_true", help="print the source events as JSON")
    p.set_defaults(handler=_cmd_source)

    p = subcommand(sub, "evaluate", "score VISTA's displays and the BM25 RAG baseline's against the ground truth "
                   "(accuracy per variable with 95%% CIs, an LLM judge where rules cannot decide)",
                   ["vista evaluate --store out/vista --truth out/synth --judge-llm base_url=URL --judge-llm model=NAME",
                    "vista evaluate --store out/vista --references refs.csv --judge-llm model=gpt-4.1"],
                   details="A whole store on Ray, resumable: `vista evaluate-cohort`.")
    p.add_argument("--store", required=True, help="graph store directory (made by `vista graph` or `vista build`)")
    p.add_argument("--truth", help="synthetic dataset root holding ground_truth/oncology.jsonl (and/or --references)")
    p.add_argument("--references", metavar="CSV|JSON",
                   help="clinician reference answers used as the truth (columns subject_id, variable, answer [, as_of, "
                   "hint, reviewer]; see docs/clinician_references.md); with --truth too, a patient's clinician "
                   "answers replace the generator's record")
    p.add_argument("--subjects", type=int, nargs="+", help="only these subject ids (default: every stored patient "
                   "with an oncology record)")
    p.add_argument("--profile", help="event-definition profile of the timeline (default thoracic)")
    add_llm_option(p)
    add_llm_option(p, "--judge-llm", "LLM setting of the judge (repeatable); default: VISTA_JUDGE_LLM_* variables, "
                   "else the display model, with a warning (the paper judges with another, stronger model)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per CI (default 2000)")
    p.add_argument("--out", help="also write evaluation.md and evaluation.json here")
    p.add_argument("--json", action="store_true", help="print the evaluation report as JSON")
    p.set_defaults(handler=_cmd_evaluate)
    add_commands(sub, _PACKAGE_COMMANDS, extra)
    return parser


_PACKAGE_COMMANDS = (lazy_commands("vista.patient_search.cli", "add_similar_parser"),
                     lazy_commands("vista.patient_search.cli", "add_query_parser"),
                     lazy_commands("vista.query_cli", "add_parsers"),
                     lazy_commands("vista.serve.cli", "add_serve_parser"))
"""Sub-commands of this package that live in their own modules (patient similarity, cohort queries, the query
bridge and its MCP server, the dashboard)."""


def main(argv: Sequence[str] | None = None,
         extra: AddCommands | None = None) -> int:
    """The `vista` command (the console script adds the Ray build job through ``extra``, see `jobs.cli`)."""
    return run_command(build_parser(extra).parse_args(argv), user_errors())


if __name__ == "__main__":
    sys.exit(main())
