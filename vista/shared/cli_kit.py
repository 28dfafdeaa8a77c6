"""What every command of the project's command lines shares: help with a summary, an example and the defaults,
``--version``, and the checks made before any work (output paths, dates), each failing as one `CommandLineError`
line (exit 2). Imports nothing heavy, so ``--help`` stays instant.

>>> parser = argparse.ArgumentParser(prog="tool")
>>> sub = parser.add_subparsers(dest="command")
>>> p = subcommand(sub, "hello", "greet someone", "tool hello --name Ada")
>>> _ = p.add_argument("--name", default="world", help="who to greet")
>>> "example:" in p.format_help() and "(default: world)" in p.format_help()
True
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path

from vista.shared.atomic import apply_data_umask
from vista.shared.errors import CommandLineError, UserError

DIST_NAME = "trajonco"
"""The distribution that installs both command lines (pyproject.toml's project name)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with a usage mistake reported as one line (``prog: error: ...; see prog --help``, exit 2) instead
    of the whole usage block. Sub-command parsers inherit it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions kept as written (examples stay on their lines); ``(default: X)`` added to an option's help when
    it has a real default and its help does not already say one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, False, [], argparse.SUPPRESS) or action.option_strings == []
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        return f"{text} (default: %(default)s)"


def subcommand(sub: argparse._SubParsersAction, name: str, summary: str, example: str | list[str], *,
               details: str = "", aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A sub-command whose help shows ``summary``, optional ``details`` and one or more examples."""
    examples = [example] if isinstance(example, str) else example
    description = summary[0].upper() + summary[1:] + "."
    if details:
        description += "\n\n" + details.strip("\n")
    description += "\n\nexample:\n" + "\n".join(f"  {line}" for line in examples)
    return sub.add_parser(name, help=summary, description=description, formatter_class=HelpFormatter,
                          aliases=list(aliases))


AddCommands = Callable[[argparse._SubParsersAction], None]
"""What adds sub-commands to a parser: a package's commands kept in their own modules, a layer's ``extra``."""


def lazy_commands(module: str, function: str = "add_parser") -> AddCommands:
    """The sub-commands ``module.function`` adds, imported only when the parser is built (not with the CLI module)."""

    def add(sub: argparse._SubParsersAction) -> None:
        getattr(importlib.import_module(module), function)(sub)

    return add


def add_commands(sub: argparse._SubParsersAction, commands: Sequence[AddCommands], extra: AddCommands | None) -> None:
    """Add a package's sub-commands kept in their own modules, then ``extra`` (those of the layer above it)."""
    for add in (*commands, *(() if extra is None else (extra,))):
        add(sub)


def version_text() -> str:
    """``trajonco 0.x.y`` (the installed distribution's version; ``unknown`` when run from an uninstalled tree)."""
    try:
        return f"{DIST_NAME} {metadata.version(DIST_NAME)}"
    except metadata.PackageNotFoundError:
        return f"{DIST_NAME} (version unknown: not installed)"


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print the version and exit")


def parse_when(text: str | None, option: str) -> datetime | None:
    """An ISO date/time from the command line (None when not given), or one line naming the option.

    >>> parse_when("2019-06-30", "--prediction-time")
    datetime.datetime(2019, 6, 30, 0, 0)
    >>> parse_when("2014-13-45", "--prediction-time")
    Traceback (most recent call last):
    ...
    vista.shared.errors.CommandLineError: --prediction-time: '2014-13-45' is not a valid ISO date or date-time (e.g. 2019-06-30)
    """
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise CommandLineError(f"{option}: {text!r} is not a valid ISO date or date-time (e.g. 2019-06-30)") from None


def local_path(value: str) -> Path:
    """An argparse ``type`` for the options of commands that work on local (or mounted) paths only: a URI is
    refused in one line instead of being folded into a local folder named ``s3:``.

    >>> local_path("s3://bucket/out")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: s3://bucket/out: object storage is not supported by this command yet; use a local or mounted path
    """
    if is_uri(value) and not value.startswith("file://"):
        raise argparse.ArgumentTypeError(f"{value.partition('?')[0]}: object storage is not supported by this command "
                                         "yet; use a local or mounted path")
    path = Path(value.removeprefix("file://"))
    from vista.shared.storage import StorageError, resolve_local

    try:
        resolve_local(path)  # a symbolic link loop is one line here, not a traceback later
    except StorageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path


def is_uri(location: str) -> bool:
    """True for an object-store URI such as ``s3://bucket/key`` (checked by the storage layer, not here)."""
    return "://" in location


def check_output_dir(location: str | os.PathLike[str], option: str = "--out", *, overwrite: bool | None = None,
                     resumable: bool = False) -> Path | None:
    """Check, before any work, that a command can write its output directory; one line naming ``option`` if not.

    - the path, or a parent of it, is an existing file: refused;
    - the nearest existing parent is not writable: refused;
    - the directory exists and is not empty: allowed when ``resumable`` (jobs continue where they stopped) or with
      ``overwrite=True``; refused with "pass --overwrite" when ``overwrite`` is False (``None``: the command has no
      such choice and writes into it).

    Returns the path (None for an object-store URI, which the storage layer checks).
    """
    text = os.fspath(location)
    if is_uri(text):
        return None
    path = Path(text).expanduser()
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == path else f"cannot be created: {probe} is a file"
        raise CommandLineError(f"{option} {path}: {where}; choose a directory path")
    if not _can_write_in(probe):
        raise CommandLineError(f"{option} {path}: {probe} is not writable; choose a directory you can write to")
    if path.is_dir() and any(path.iterdir()) and not resumable and overwrite is False:
        raise CommandLineError(f"{option} {path} already exists and is not empty; pass --overwrite to replace it, "
                               "or choose a new directory")
    return path


def _can_write_in(directory: Path) -> bool:
    """True when a file can really be made in ``directory`` (permission bits alone miss read-only mounts and root)."""
    import tempfile

    if not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".write-check-"):
            return True
    except OSError:
        return False


def add_overwrite(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--overwrite", action="store_true", help=f"replace an existing {what} (refused otherwise)")


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception classes whose message alone tells the user what to fix: every `UserError`, and FileNotFoundError.

    >>> from vista.shared.meds.errors import MedsDataError
    >>> issubclass(MedsDataError, user_errors()) and issubclass(CommandLineError, user_errors())
    True
    """
    return (UserError, FileNotFoundError)


def run_command(args: argparse.Namespace, errors: tuple[type[BaseException], ...]) -> int:
    """Run a parsed sub-command (``args.handler``); ``errors`` print as one line on stderr with exit status 2."""
    try:
        apply_data_umask()  # what this command writes is private (VISTA_DATA_MODE, vista.shared.atomic)
        return args.handler(args)
    except errors as exc:  # errors the user can act on: one line, no traceback
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


LLM_OPTION_HELP = ("LLM setting (repeatable), e.g. --llm base_url=http://127.0.0.1:8000/v1 --llm model=NAME; a base "
                   "URL (here or in VISTA_LLM_BASE_URL) means that endpoint; default: the embedded model")


class _LLMShortcut(argparse.Action):
    """``--model NAME`` / ``--base-url URL`` / ``--backend B``: appended to the ``--llm`` list as ``key=value``, so
    shortcuts and ``--llm`` items apply in the order given (a base URL selects the openai backend by the rule of
    `vista.shared.llm.LLMConfig.resolve`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest) or [])
        key = self.metavar.lower().replace("-", "_")
        items.append(f"{key}={values}")
        setattr(namespace, self.dest, items)


def add_llm_option(parser: argparse.ArgumentParser, flag: str = "--llm", help_text: str = LLM_OPTION_HELP) -> None:
    """A repeatable ``KEY=VALUE`` option read with `vista.shared.llm.LLMConfig.from_cli` (the same as
    ``LLMConfig.add_cli_argument``, without importing the LLM layer, so ``--help`` stays instant); for ``--llm``
    also the shortcuts every command shares with the Ray jobs: ``--backend``, ``--base-url``, ``--model``."""
    parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help=help_text)
    if flag != "--llm":
        return
    dest = flag.lstrip("-").replace("-", "_")
    parser.add_argument("--backend", dest=dest, action=_LLMShortcut, metavar="BACKEND",
                        help="shortcut for --llm backend=B (embedded or openai)")
    parser.add_argument("--base-url", dest=dest, action=_LLMShortcut, metavar="BASE-URL",
                        help="shortcut for --llm base_url=URL: ask this OpenAI-compatible endpoint (backend openai)")
    parser.add_argument("--model", dest=dest, action=_LLMShortcut, metavar="MODEL",
                        help="shortcut for --llm model=NAME")


def add_profile_option(parser: argparse.ArgumentParser) -> None:
    """``--coding-profile NAME|TOML``: how the dataset spells codes (`vista.shared.coding`); detected when not given.

    (Not ``--profile``: `vista timeline` already uses that for its event-definition profile.)"""
    parser.add_argument("--coding-profile", dest="coding_profile", metavar="NAME|TOML", help="coding profile: a built-in (meds_synth, omop, synthea, mimic_iv, vista_xml) or "
                        "a profile TOML path; default: detected from the data (see `trajonco profile`)")
