"""``job.json``: what decides a job's outputs — its settings and the code that made them — written by the first run
into its output directory.

A restart with the same command and the same code resumes. A restart whose result-determining settings differ
(another model, cancer, chunk size, input file...) would mix two kinds of rows in one table, so it stops, naming
the settings that changed (``pipeline.chunk_tokens: 1500 -> 4000``), never whole nested settings. The same holds
for the code: the package version, the git commit (when the code runs from a git checkout) and a hash of every
prompt file the job uses are recorded; after an upgrade the run stops naming what changed (``git commit``,
``prompt trajonco/prompts/worker_first.system.txt``), unless ``--resume-with-changed-code`` says to go on (the
manifest then records the new code and keeps the old one under ``code_history``). Settings that only change how
fast the job runs (actors, CPUs, --limit, --sample, the endpoint URL) are not part of it. Which prompt folders a
job depends on is the job's to say (``PromptDir``s, given to `CodeVersion.current`).

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> code = CodeVersion(version="0.1.0", git_commit="abc", git_dirty=False, prompts={"p/a.txt": "1"})
>>> check_manifest(root, "predict", {"model": "a", "pipeline": {"chunk_tokens": 1500}}, code=code)
>>> check_manifest(root, "predict", {"model": "a", "pipeline": {"chunk_tokens": 4000}}, code=code)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vista.shared.runs.errors.JobSettingsMismatch: ...other settings (pipeline.chunk_tokens: 1500 -> 4000); resume with the same settings or choose another --out
>>> newer = CodeVersion(version="0.1.0", git_commit="def", git_dirty=False, prompts={"p/a.txt": "2"})
>>> check_manifest(root, "predict", {"model": "a", "pipeline": {"chunk_tokens": 1500}}, code=newer)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vista.shared.runs.errors.JobSettingsMismatch: ...other code (git commit: abc -> def; prompt p/a.txt changed)...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import NamedTuple

from vista.shared.runs.errors import JobInputError, JobSettingsMismatch

MANIFEST = "job.json"
JsonValue = str | int | float | bool | None | list | dict
CODE_FLAG = "--resume-with-changed-code"


class PromptDir(NamedTuple):
    """A folder of prompt files a job's answers depend on: a package and a sub-folder of it ("" for the package)."""

    package: str
    sub: str = ""


@dataclass(frozen=True)
class CodeVersion:
    """The code a run used: package version, git commit (None outside a git checkout) and its prompts' hashes."""

    version: str | None
    git_commit: str | None
    git_dirty: bool | None  # uncommitted changes to tracked files (recorded, not compared: prompts are hashed)
    prompts: dict[str, str] = field(default_factory=dict)  # "trajonco/prompts/x.txt" -> sha256 (first 16 hex)

    @classmethod
    def current(cls, prompts: Iterable[PromptDir]) -> CodeVersion:
        """The running code, with the hashes of the files in ``prompts``."""
        commit, dirty = _git_state(Path(__file__).resolve().parents[3])
        return cls(version=_package_version(), git_commit=commit, git_dirty=dirty, prompts=prompt_hashes(prompts))

    def changes_from(self, old: Mapping[str, object]) -> list[str]:
        """What differs from an earlier run's recorded code (names only, not whole lists of hashes)."""
        changes = []
        if old.get("version") != self.version:
            changes.append(f"package version: {old.get('version')} -> {self.version}")
        if old.get("git_commit") != self.git_commit:
            changes.append(f"git commit: {_short(old.get('git_commit'))} -> {_short(self.git_commit)}")
        before = old.get("prompts") if isinstance(old.get("prompts"), dict) else {}
        for name in sorted(set(before) | set(self.prompts)):
            if name not in self.prompts:
                changes.append(f"prompt {name} removed")
            elif name not in before:
                changes.append(f"prompt {name} added")
            elif before[name] != self.prompts[name]:
                changes.append(f"prompt {name} changed")
        return changes


def prompt_hashes(dirs: Iterable[PromptDir]) -> dict[str, str]:
    """sha256 (first 16 hex digits) of every prompt file in ``dirs``, by path relative to the project root."""
    hashes: dict[str, str] = {}
    for package, sub in dirs:
        folder = resources.files(package).joinpath(sub) if sub else resources.files(package)
        prefix = package.replace(".", "/") + (f"/{sub}" if sub else "")
        for entry in sorted(_prompt_files(folder), key=lambda e: e.name):
            hashes[f"{prefix}/{entry.name}"] = hashlib.sha256(entry.read_bytes()).hexdigest()[:16]
    return hashes


def _prompt_files(folder) -> Iterator:
    for entry in folder.iterdir():
        if entry.is_file() and not entry.name.endswith((".py", ".pyc")):
            yield entry


def _package_version() -> str | None:
    """The version of the distribution that installs `vista` (None when it is not installed)."""
    names = metadata.packages_distributions().get(__name__.partition(".")[0], [])
    return metadata.version(names[0]) if names else None


def _git_state(root: Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty) of the checkout the code runs from; (None, None) when it is not one or git is missing."""
    if not (root / ".git").exists():
        return None, None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def _short(commit: object) -> str:
    return str(commit)[:10] if commit else "unknown"


def add_manifest_arguments(parser: argparse.ArgumentParser) -> None:
    """The option that lets a run resume in an output directory made by other code."""
    parser.add_argument(CODE_FLAG, action="store_true", dest="resume_with_changed_code",
                        help="resume in --out although its outputs were made by another version of the code or "
                             "prompts (rows of both versions then share one table; default: refuse)")


def flatten(settings: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Nested settings as dotted names, so a difference names the one field that changed.

    >>> flatten({"model": "m", "pipeline": {"chunk_tokens": 1500, "limits": {"k": 10}}})
    {'model': 'm', 'pipeline.chunk_tokens': 1500, 'pipeline.limits.k': 10}
    """
    flat: dict[str, object] = {}
    for name, value in settings.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{key}."))
        else:
            flat[key] = value
    return flat


def check_manifest(root: Path | str, job: str, settings: Mapping[str, JsonValue], *, code: CodeVersion,
                   allow_code_change: bool = False) -> None:
    """Write ``job.json`` on the first run; on later runs raise `JobSettingsMismatch` if ``settings`` or the code
    (``code``: `CodeVersion.current` for a job) changed — code changes pass with ``allow_code_change``. ``root``
    may be an object-store URI (`vista.shared.storage`)."""
    from vista.shared.storage import resolve  # pyarrow: not at import (``--help`` answers at once)

    path = resolve(root) / MANIFEST
    wanted = {"job": job, "settings": json.loads(json.dumps(dict(settings), sort_keys=True, default=str)),
              "code": asdict(code)}
    if not path.is_file():
        path.write_text(json.dumps(wanted, indent=2, sort_keys=True))
        return
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JobInputError(f"{path}: unreadable job manifest ({exc}); remove it only if the outputs beside it are yours") from None
    if found.get("job") != job:
        raise JobSettingsMismatch(f"{root}: holds outputs of the {found.get('job')!r} job, not {job!r}; choose another --out")
    old, new = flatten(found.get("settings", {})), flatten(wanted["settings"])
    changes = [f"{name}: {old.get(name)!r} -> {new.get(name)!r}" for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    if changes:
        raise JobSettingsMismatch(
            f"{root}: was written with other settings ({'; '.join(changes)}); resume with the same settings or choose another --out"
        )
    recorded = found.get("code")
    code_changes = code.changes_from(recorded) if isinstance(recorded, dict) else [
        "code version not recorded (the outputs predate code versions in job.json)"]
    if not code_changes:
        return
    if not allow_code_change:
        raise JobSettingsMismatch(
            f"{root}: its outputs were made by other code ({'; '.join(code_changes)}); resuming would mix rows of both "
            f"versions in one table: choose another --out, or pass {CODE_FLAG} to continue here anyway"
        )
    history = list(found.get("code_history", [])) + ([recorded] if isinstance(recorded, dict) else [])
    path.write_text(json.dumps({**wanted, "code_history": history}, indent=2, sort_keys=True))
