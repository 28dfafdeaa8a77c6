"""The ``vista similar`` and ``vista cohort-query`` sub-commands: parsers and handlers (machinery imported lazily).

Wire them in `vista.cli.build_parser` with ``add_similar_parser(sub)`` and ``add_query_parser(sub)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vista.shared.errors import CommandLineError

SIMILAR_EXAMPLE = "vista similar --store out/vista --subject 7 --k 10 --method timeline"
QUERY_EXAMPLE = ["vista cohort-query --store out/vista --code 'lung=ICD10CM//C34*' \\",
                 "    --text 'egfr@NOTE//PATHOLOGY=EGFR: (?!no )[^.]*detected' \\",
                 "    --text 'pd1=progression of .* on line 1 therapy' --before egfr:pd1",
                 "  (lung cancer, an EGFR-positive pathology result, then progression on first-line therapy)"]


def _search_errors():
    from vista.patient_search.errors import PatientSearchError

    return PatientSearchError


def _cmd_similar(args: argparse.Namespace) -> int:
    from vista.patient_search.render import similar_json, similar_text
    from vista.patient_search.similarity import Method, similar_patients
    from vista.patient_search.source import open_source

    try:
        method = Method(args.method)
        neighbours = similar_patients(open_source(Path(args.store)), args.subject, args.k, method)
    except _search_errors() as exc:
        raise CommandLineError(str(exc)) from None
    render = similar_json if args.json else similar_text
    print(render(args.subject, method, neighbours))
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from vista.patient_search.evaluate import run_query
    from vista.patient_search.query import load_query, make_query, parse_code_term, parse_order, parse_text_term
    from vista.patient_search.render import query_json, query_text
    from vista.patient_search.source import open_source

    try:
        if args.query_file is not None:
            if args.code or args.text or args.before:
                raise CommandLineError("--query-file replaces --code/--text/--before; give one or the other")
            path = Path(args.query_file)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandLineError(f"--query-file {path}: {exc.strerror or exc}") from None
            query = load_query(text, str(path))
        else:
            terms = [*(parse_code_term(s) for s in args.code), *(parse_text_term(s) for s in args.text)]
            if not terms:
                raise CommandLineError("give at least one --code or --text term (or --query-file)")
            query = make_query(terms, [parse_order(s) for s in args.before])
        query, unmatched = _respelled(query, args.coding_profile)
        source = open_source(Path(args.store))
        result = run_query(source, query)
        for line in unmatched(source):
            print(line, file=sys.stderr)
    except _search_errors() as exc:
        raise CommandLineError(str(exc)) from None
    print(query_json(result) if args.json else query_text(result))
    return 0


def _respelled(query, coding_profile: str | None):
    """The query with its codes in canonical spelling (the notes said on stderr), and a function giving the hint
    lines for code terms that match nothing in a source."""
    from vista.patient_search.evaluate import code_evidence
    from vista.patient_search.query import CodeTerm
    from vista.patient_search.spelling import respell_term, unmatched_hint

    terms = []
    for term in query.terms:
        if isinstance(term, CodeTerm):
            term, notes = respell_term(term, coding_profile)
            for line in notes:
                print(line, file=sys.stderr)
        terms.append(term)
    query = query.model_copy(update={"terms": terms})

    def unmatched(source) -> list[str]:
        index = source.scan_index()
        return [unmatched_hint(t, index) for t in query.terms
                if isinstance(t, CodeTerm) and code_evidence(index, t).limit(1).collect().height == 0]

    return query, unmatched


METHODS = ("jaccard", "idf", "hierarchy", "timeline", "values", "episodes")
"""`vista.patient_search.similarity.Method` values, spelled here so ``--help`` imports no numpy or polars (a test keeps
them equal)."""
DEFAULT_METHOD = "timeline"


def add_similar_parser(sub) -> None:
    """Register ``vista similar`` on an argparse subparsers object."""
    from vista.shared.cli_kit import subcommand

    p = subcommand(
        sub, "similar", "rank the patients of a graph store by similarity to one patient", SIMILAR_EXAMPLE,
        details="Rank the other patients of a graph store by graph-guided similarity to one patient: shared "
                    "codes weighted by how specific they are in the store (IDF), the order of the timeline's "
                    "specific codes, and optionally short categorical values such as stage groups. Methods: "
                    "jaccard (plain code overlap, the baseline), idf, hierarchy (with the codes' catalog "
                    "ancestors), timeline (default), values (reads every graph; slower), episodes (adds the "
                    "episode structure of stored TOA timelines: codes per diagnosis episode and treatment line).")
    p.add_argument("--store", required=True, help="graph store directory (vista graph or jobs.build_graphs --out)")
    p.add_argument("--subject", type=int, required=True, help="subject_id of the patient to compare with")
    p.add_argument("--k", type=int, default=10, help="how many patients to list")
    p.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD, help="similarity method")
    p.add_argument("--json", action="store_true", help="print the ranking as JSON")
    p.set_defaults(handler=_cmd_similar)


def add_query_parser(sub) -> None:
    """Register ``vista cohort-query`` on an argparse subparsers object."""
    from vista.shared.cli_kit import subcommand

    p = subcommand(
        sub, "cohort-query", "list the patients of a graph store matching coded, text and time-order criteria",
        QUERY_EXAMPLE, details="Find the patients of a graph store for whom every term holds, with the evidence (node id, "
                    "date). Code terms run over the store's columnar node index without opening a graph; text "
                    "terms (regular expressions, case-insensitive) read the graphs of the patients the code terms "
                    "left; --before orders two terms' evidence in time.")
    p.add_argument("--store", required=True, help="graph store directory (vista graph or jobs.build_graphs --out)")
    p.add_argument("--code", action="append", default=[], metavar="NAME=CODE[,CODE...][OP NUMBER]",
                   help="an event with one of these codes (PREFIX* matches a prefix), optionally a numeric value test "
                        "(<, <=, >, >=, ==, !=), e.g. 'anemia=LOINC//718-7<10' (repeatable)")
    p.add_argument("--text", action="append", default=[], metavar="NAME[@CODE,...]=REGEX",
                   help="a note or event text matching REGEX, optionally only nodes with these codes, e.g. "
                        "'pd1@NOTE//PROGRESS=progression of .* on line 1' (repeatable)")
    p.add_argument("--before", action="append", default=[], metavar="FIRST:THEN[:DAYS]",
                   help="evidence of term FIRST dated before evidence of term THEN (within DAYS days) (repeatable)")
    p.add_argument("--query-file", help="the query as JSON (vista.patient_search.query.CohortQuery) instead of the flags")
    p.add_argument("--coding-profile", dest="coding_profile", metavar="NAME|TOML",
                   help="how the dataset spells codes (omop, synthea, mimic_iv, vista_xml, meds_synth or a TOML): "
                        "--code values in that spelling are respelled to the store's canonical codes; default: "
                        "through every built-in profile")
    p.add_argument("--json", action="store_true", help="print the matches as JSON")
    p.set_defaults(handler=_cmd_query)
