"""``job.json``: the settings that decide a job's outputs, written by the first run into its output directory.

A restart with the same command resumes; a restart whose result-determining settings differ (another model, cancer,
chunk size, input file...) would mix two kinds of rows in one table, so it stops with the list of differences.
Settings that only change how fast the job runs (actors, CPUs, --limit, --sample) are not part of it.

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> check_manifest(root, "predict", {"model": "a", "chunk_tokens": 1500})
>>> check_manifest(root, "predict", {"model": "b", "chunk_tokens": 1500})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
jobs.errors.JobSettingsMismatch: ...other settings (model: 'a' -> 'b'); resume with the same settings or choose another --out
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from jobs.errors import JobInputError, JobSettingsMismatch
from jobs.outputs import atomic_write_text

MANIFEST = "job.json"
JsonValue = str | int | float | bool | None | list | dict


def check_manifest(root: Path, job: str, settings: Mapping[str, JsonValue]) -> None:
    """Write ``job.json`` on the first run; on later runs raise `JobSettingsMismatch` if ``settings`` changed."""
    path = Path(root) / MANIFEST
    wanted = {"job": job, "settings": json.loads(json.dumps(dict(settings), sort_keys=True, default=str))}
    if not path.is_file():
        atomic_write_text(path, json.dumps(wanted, indent=2, sort_keys=True))
        return
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JobInputError(f"{path}: unreadable job manifest ({exc}); remove it only if the outputs beside it are yours") from None
    if found.get("job") != job:
        raise JobSettingsMismatch(f"{root}: holds outputs of the {found.get('job')!r} job, not {job!r}; choose another --out")
    old, new = found.get("settings", {}), wanted["settings"]
    changes = [f"{name}: {old.get(name)!r} -> {new.get(name)!r}" for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    if changes:
        raise JobSettingsMismatch(
            f"{root}: was written with other settings ({'; '.join(changes)}); resume with the same settings or choose another --out"
        )
