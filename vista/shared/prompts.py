"""Loading the prompt text files that ship inside a package: one loader for VISTA's layers and TrajOnco's agents.

Each layer keeps its prompts as text files beside its code (``vista/toa/prompts/extract.md``,
``trajonco/prompts/judge/system.txt``, …) and names them with a `PromptFolder`; this module reads them through
`importlib.resources` (so they load from an installed wheel or a zip as well as from the source tree), caches
each file's text for the life of the process (a prompt is read once, not once per patient), and turns a missing
file into one `PromptNotFoundError` naming the file — never a bare resources traceback.

Fill placeholders the way the prompt is written: ``str.format`` fields (``{event_types}``) with
`PromptFolder.text`, or ``string.Template`` ``$name`` placeholders (the TrajOnco templates, whose JSON examples
keep their braces) with `PromptFolder.template`.

>>> toa = PromptFolder("vista.toa", suffix=".md")
>>> toa.text("extract") == toa.text("extract") and "{event_types}" in toa.text("extract")
True
>>> toa.path("extract")
'vista/toa/prompts/extract.md'
>>> toa.text("nope")
Traceback (most recent call last):
...
vista.shared.prompts.PromptNotFoundError: prompt file vista/toa/prompts/nope.md does not exist
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template


class PromptNotFoundError(FileNotFoundError):
    """A packaged prompt file that does not exist (names the file)."""


@cache
def load_prompt(package: str, relative: str) -> str:
    """The text (UTF-8) of the file ``relative`` (``/``-separated) inside ``package``; cached per file."""
    try:
        return resources.files(package).joinpath(*relative.split("/")).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, ModuleNotFoundError) as exc:
        where = "/".join([*package.split("."), relative])
        raise PromptNotFoundError(f"prompt file {where} does not exist") from exc


@cache
def load_template(package: str, relative: str) -> Template:
    """`load_prompt`'s text as a ``string.Template`` (``$name`` placeholders); cached per file."""
    return Template(load_prompt(package, relative))


@dataclass(frozen=True, slots=True)
class PromptFolder:
    """Where one layer's prompts live: ``<package>/<folder>/<name><suffix>`` (``folder`` may be empty)."""

    package: str
    folder: str = "prompts"
    suffix: str = ".txt"

    def relative(self, name: str) -> str:
        return f"{self.folder}/{name}{self.suffix}" if self.folder else f"{name}{self.suffix}"

    def path(self, name: str) -> str:
        """The file's path in the source tree, as error messages name it."""
        return "/".join([*self.package.split("."), self.relative(name)])

    def text(self, name: str) -> str:
        """The prompt ``name``'s text (cached)."""
        return load_prompt(self.package, self.relative(name))

    def template(self, name: str) -> Template:
        """The prompt ``name`` as a ``string.Template`` (cached)."""
        return load_template(self.package, self.relative(name))
