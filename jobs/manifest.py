"""The prompt folders each job's answers depend on, recorded with its code version in ``job.json``
(`vista.shared.runs.manifest`): a prompt edited since the first run stops the next one, naming the file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vista.shared.runs import manifest
from vista.shared.runs.manifest import CodeVersion, JsonValue, PromptDir

PROMPT_DIRS: dict[str, tuple[PromptDir, ...]] = {
    "predict": (PromptDir("trajonco.prompts"),),
    "build-graphs": (PromptDir("vista.toa", "prompts"), PromptDir("vista.display", "prompts")),
    "evaluate": (PromptDir("vista.evaluation", "prompts"),),
}
"""The prompt folders each job's answers depend on; other jobs hash all of them."""


def prompt_dirs(job: str) -> tuple[PromptDir, ...]:
    return PROMPT_DIRS.get(job) or tuple(d for dirs in PROMPT_DIRS.values() for d in dirs)


def check_manifest(root: Path | str, job: str, settings: Mapping[str, JsonValue], *, code: CodeVersion | None = None,
                   allow_code_change: bool = False) -> None:
    """`vista.shared.runs.manifest.check_manifest` for ``job``: ``code`` defaults to the running code with its prompts."""
    manifest.check_manifest(root, job, settings, code=code or CodeVersion.current(prompt_dirs(job)),
                            allow_code_change=allow_code_change)
