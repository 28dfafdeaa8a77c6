"""Content-addressed on-disk cache of validated answers, shared safely by concurrent processes.

The key is the sha256 of everything that determines an answer (the backend kind, the endpoint's identity, the
model asked for and the model the endpoint serves under that name, sampling parameters, messages, schema, schema
mode), so a rerun pays nothing for calls already made
and changing a prompt, the model, a parameter, the schema or the server misses exactly the affected
calls. The endpoint identity is the backend's (`Backend` ``identity``): an HTTP endpoint's base URL,
or the embedded GGUF file's sha256 and context size; two servers that both call their model
``local`` never share answers, and neither do two models one server answers the same name with (a llama.cpp
server answers any name with the file it loaded: its ``/v1/models`` listing names it). Entries are JSON
files in 256 sharded folders, written to a temporary file and renamed into place (atomic on
POSIX), so readers never see half an entry and concurrent writers of the same key both win.

The cache may also live on an object store (``cache_dir`` an ``s3://…`` URI, `vista.storage`; a job whose
``--out`` is a URI keeps it under ``OUT/llm_cache`` there by default): each entry is then one object, written with
one PUT of the whole entry, so the same guarantees hold without a rename, and every node of a cluster — including
one that replaces a lost node — sees every answer already paid for. A lookup costs one GET (tens of ms next to an
LLM call's seconds).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from vista.atomic import atomic_write_text, make_dirs
from vista.llm.messages import Message
from vista.storage import Location, is_remote, resolve

log = logging.getLogger(__name__)

CACHE_FORMAT = 3  # bump when the key recipe or the entry layout changes (2: the endpoint; 3: backend, served model)


def cache_key(
    *,
    endpoint: str,
    model: str,
    messages: Sequence[Message],
    schema: Mapping[str, object] | None,
    schema_mode: str,
    parameters: Mapping[str, object],
    backend: str = "",
    served_model: str | None = None,
) -> str:
    """sha256 (hex) of the canonical JSON of one request's answer-determining inputs.

    >>> ask = dict(model="m", messages=[Message("user", "hi")], schema=None, schema_mode="none", parameters={})
    >>> k = cache_key(endpoint="http://a:8000/v1", **ask)
    >>> k == cache_key(endpoint="http://a:8000/v1", **ask)
    True
    >>> k == cache_key(endpoint="http://b:8000/v1", **ask)  # another server with a model of the same name
    False
    >>> k == cache_key(endpoint="http://a:8000/v1", **(ask | {"messages": [Message("user", "hi!")]}))
    False
    >>> k == cache_key(endpoint="http://a:8000/v1", served_model="B.gguf", **ask)  # the server now serves another model
    False
    """
    material = {
        "format": CACHE_FORMAT,
        "backend": backend,
        "endpoint": endpoint,
        "model": model,
        "served_model": served_model,
        "messages": [m.to_wire() for m in messages],
        "schema": schema,
        "schema_mode": schema_mode,
        "parameters": dict(parameters),
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A validated answer as it was first received."""

    content: str
    model: str
    schema_name: str
    prompt_tokens: int
    completion_tokens: int
    served_model: str | None = None  # the model as the server named it when it answered


class ResponseCache:
    """``<root>/<key[:2]>/<key>.json`` files; unreadable entries count as misses and are reported."""

    def __init__(self, root: Path | str):
        self.store: Location | None = resolve(root) if is_remote(root) else None  # an object store, else None
        self.root: Path | str = self.store.uri if self.store is not None else Path(root)
        if self.store is None:
            make_dirs(self.root)  # private, like its entries (vista.atomic)

    def path(self, key: str) -> Path | Location:
        if self.store is not None:
            return self.store / key[:2] / f"{key}.json"
        return self.root / key[:2] / f"{key}.json"  # type: ignore[operator]

    def get(self, key: str) -> CachedAnswer | None:
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return CachedAnswer(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("LLM cache entry %s is unreadable (%s); treating it as a miss", path, type(exc).__name__)
            return None

    def put(self, key: str, answer: CachedAnswer) -> None:
        path = self.path(key)
        if isinstance(path, Location):  # one PUT of the whole entry
            path.write_text(json.dumps(asdict(answer), ensure_ascii=False))
            return
        atomic_write_text(path, json.dumps(asdict(answer), ensure_ascii=False))

    def __len__(self) -> int:
        if self.store is not None:
            return sum(1 for f in self.store.files(suffix=".json") if len(f.parent.name) == 2)
        return sum(1 for _ in self.root.glob("??/*.json"))  # type: ignore[union-attr]
