"""``vista serve``: the dashboard over a graph store, or (``--export``) a board packet of self-contained pages.

Registered on the ``vista`` parser by `add_serve_parser` (`vista.cli` lists it lazily, so ``vista --help`` does not
import the web stack).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import secrets
import socket
from pathlib import Path

from vista.shared.errors import CommandLineError

SERVE_EXAMPLE = ["vista serve --store out/vista                     # prints http://127.0.0.1:8765/?token=…",
                 "vista serve --store out/vista --export out/board --subjects 21 22"]
logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """True for a loopback address or ``localhost``.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_url(host: str, port: int, token: str) -> str:
    """The URL to open (an IPv6 host in brackets).

    >>> serve_url("::1", 8765, "abc")
    'http://[::1]:8765/?token=abc'
    """
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def _cmd_serve(args: argparse.Namespace) -> int:
    from vista.graph.store import is_graph_store

    root = Path(args.store)
    if not is_graph_store(root):  # one line, exit 2; the manifest itself is read on the first request (lazily)
        from vista.query import open_graph_store

        open_graph_store(root)  # raises StoreMissingError naming the store and the command that makes one
    if args.export:
        if not args.subjects:
            raise CommandLineError("--export needs --subjects (the patients of the board packet)")
        try:
            from vista.serve.export import export_packet
        except ImportError as exc:
            raise CommandLineError(f"vista serve needs its web stack ({exc.name} is missing): pip install -e '.[serve]'") from None

        written = export_packet(root, args.export, args.subjects)
        print(f"wrote {len(written)} page(s) to {args.export}: open {written[0]} in a browser (no server needed)")
        return 0
    if args.subjects:
        raise CommandLineError("--subjects goes with --export (the server lists every patient)")
    if not is_loopback(args.host) and not args.allow_remote:
        raise CommandLineError(f"--host {args.host} is not a loopback address: pass --allow-remote to serve other "
                               "machines (the token still applies; use TLS in front of it)")
    if not 0 < args.port < 65536:
        raise CommandLineError(f"--port must be 1-65535, not {args.port}")
    _check_port(args.host, args.port)
    try:
        import uvicorn

        from vista.serve.app import create_app
    except ImportError as exc:
        raise CommandLineError(f"vista serve needs its web stack ({exc.name} is missing): pip install -e '.[serve]'") from None

    token = secrets.token_urlsafe(24)
    factory = None
    if not args.no_questions:
        from vista.shared.llm import LLMConfig, open_gateway

        config = LLMConfig.from_cli(args.llm)  # a bad setting fails now, not at the first question
        factory = lambda: open_gateway(config)  # noqa: E731
    app = create_app(root, token, gateway_factory=factory)
    print(f"serving {root} read-only; open\n\n    {serve_url(args.host, args.port, token)}"
          "\n\n(Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def _check_port(host: str, port: int) -> None:
    """A port already taken: one line naming it, before the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandLineError(f"--host {host} --port {port}: cannot listen there ({exc.strerror})") from None


def add_serve_parser(sub) -> None:
    """Register ``vista serve`` on an argparse subparsers object."""
    from vista.shared.cli_kit import add_llm_option, subcommand

    p = subcommand(sub, "serve", "serve a graph store as a tumor-board dashboard (read-only, token-protected), or "
                   "export patients' pages as a self-contained board packet", SERVE_EXAMPLE,
                   details="The cohort page lists every patient with diagnosis, histology, stage, current therapy and "
                   "build status; each patient page shows the tumor-board variables with their citations, the TOA "
                   "timeline by episode, lab trends, the summary note, similar patients and a question box; every "
                   "value opens its source events. See docs/vista-serve.md.")
    p.add_argument("--store", required=True, help="graph store directory (vista graph / vista build --out)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback unless --allow-remote)")
    p.add_argument("--port", type=int, default=8765, help="port to listen on")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host (the token still applies)")
    p.add_argument("--export", metavar="DIR", help="write the cohort and --subjects' pages as self-contained HTML "
                   "to DIR instead of serving")
    p.add_argument("--subjects", type=int, nargs="+", help="with --export: the patients of the packet")
    p.add_argument("--no-questions", action="store_true", help="turn the question box off (no model is loaded)")
    add_llm_option(p)
    p.set_defaults(handler=_cmd_serve)

