"""The response cache: hits on repeats, misses exactly when an input changes, atomic across processes."""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing

import pytest

from llm_models import Risk, WorkerAnswer
from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, user
from vista.shared.llm.errors import BackendError
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.cache import CachedAnswer, ResponseCache

GOOD = '{"level": "Low", "reason": "stable"}'


def gateway_for(tmp_path, backend, **overrides) -> LLMGateway:
    settings = {"cache_dir": tmp_path / "cache", "model": "gpt-4.1-mini"} | overrides
    return LLMGateway(LLMConfig(**settings), backend=backend)


def ask(gateway, text="chunk 1", model=Risk, patient_id=5, **kw):
    return asyncio.run(gateway.complete([user(text)], model, agent="worker", patient_id=patient_id, **kw))


def test_repeat_is_a_free_cache_hit_even_across_gateways(tmp_path):
    backend = ScriptedBackend(lambda request: GOOD)
    first = ask(gateway_for(tmp_path, backend))
    rerun = gateway_for(tmp_path, backend)  # a new process would build a new gateway
    again = ask(rerun)
    assert len(backend.requests) == 1
    assert again.output == first.output and again.content == GOOD
    hit = again.usage
    assert hit.cache_hit and hit.ok and hit.cost_usd == 0.0 and hit.attempts == 0 and hit.prompt_tokens == 0
    assert rerun.ledger.total().cache_hits == 1
    assert first.usage.cost_usd > 0


@pytest.mark.parametrize(
    "change",
    [
        {"text": "chunk 2"},  # the prompt
        {"config": {"model": "gpt-4.1"}},  # the model
        {"config": {"temperature": 0.7}},  # a sampling parameter
        {"config": {"max_tokens": 100}},
        {"config": {"schema_mode": "json_object"}},
        {"response_model": WorkerAnswer},  # the schema
    ],
    ids=["prompt", "model", "temperature", "max_tokens", "schema_mode", "schema"],
)
def test_any_input_change_misses(tmp_path, change):
    worker = WorkerAnswer(summary="s", risk="Low").model_dump_json()
    backend = ScriptedBackend(lambda request: worker if "summary" in json.dumps(request.response_format) else GOOD)
    ask(gateway_for(tmp_path, backend))
    assert len(backend.requests) == 1
    gateway = gateway_for(tmp_path, backend, **change.get("config", {}))
    ask(gateway, text=change.get("text", "chunk 1"), model=change.get("response_model", Risk))
    assert len(backend.requests) == 2 and gateway.ledger.total().cache_hits == 0
    ask(gateway_for(tmp_path, backend))  # the original call is still cached
    assert len(backend.requests) == 2


def test_only_validated_answers_are_cached(tmp_path):
    backend = ScriptedBackend(['{"level": "Maybe"}'] * 3 + [BackendError(ErrorKind.HTTP_ERROR, "400", status=400), GOOD])
    gateway = gateway_for(tmp_path, backend)
    assert ask(gateway).error.kind is ErrorKind.INVALID_OUTPUT
    assert ask(gateway).error.kind is ErrorKind.HTTP_ERROR
    assert len(ResponseCache(tmp_path / "cache")) == 0
    assert ask(gateway).ok and len(ResponseCache(tmp_path / "cache")) == 1


def test_use_cache_false_bypasses_it(tmp_path):
    backend = ScriptedBackend(lambda request: GOOD)
    gateway = gateway_for(tmp_path, backend)
    ask(gateway)
    ask(gateway, use_cache=False)
    assert len(backend.requests) == 2


def test_unreadable_entry_is_a_reported_miss(tmp_path, caplog):
    backend = ScriptedBackend(lambda request: GOOD)
    gateway = gateway_for(tmp_path, backend)
    ask(gateway, patient_id=None)  # no patient: the answer's own file
    (entry,) = (tmp_path / "cache").glob("??/*.json")
    entry.write_text("{half an entr")
    with caplog.at_level(logging.WARNING, logger="vista.shared.llm.cache"):
        assert ask(gateway, patient_id=None).ok
    assert len(backend.requests) == 2 and "unreadable" in caplog.text
    assert json.loads(entry.read_text())["content"] == GOOD  # rewritten whole


def test_answers_of_one_patient_go_to_one_bucket_file(tmp_path):
    backend = ScriptedBackend(lambda request: GOOD)
    gateway = gateway_for(tmp_path, backend)
    for n in range(20):
        assert ask(gateway, text=f"chunk {n}").ok
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert len(files) == 1 and files[0].suffix == ".jsonl"
    assert len(ResponseCache(tmp_path / "cache")) == 20
    rerun = gateway_for(tmp_path, backend)
    assert all(ask(rerun, text=f"chunk {n}").usage.cache_hit for n in range(20)) and len(backend.requests) == 20


ENTRY = CachedAnswer(GOOD, "m", "Risk", 3, 2)


def _put_one(root: str, key: str) -> None:
    ResponseCache(root).put(key, ENTRY, patient="p-7")


def test_an_answer_another_process_wrote_is_found_by_the_next_lookup(tmp_path):
    root = str(tmp_path / "c")
    reader = ResponseCache(root)
    reader.put("a" * 64, ENTRY, patient="p-7")  # the reader has the file open and has read it
    assert reader.get("b" * 64, patient="p-7") is None
    writer = multiprocessing.get_context("fork").Process(target=_put_one, args=(root, "b" * 64))
    writer.start()
    writer.join()
    assert writer.exitcode == 0 and reader.get("b" * 64, patient="p-7") == ENTRY  # no stale index
    assert ResponseCache(root).get("a" * 64, patient="p-7") == ENTRY  # and another instance sees the first
    reader.close()


def test_a_torn_last_line_is_a_quiet_miss_and_later_lines_still_hit(tmp_path, caplog):
    cache = ResponseCache(tmp_path)
    cache.put("a" * 64, ENTRY, patient="p")
    (path,) = (tmp_path / "buckets").glob("*.jsonl")
    whole = path.read_bytes()
    with path.open("ab") as f:
        f.write(b"b" * 64 + b'\t{"content": "{\\"lev')  # a writer killed mid-line (or still writing)
    with caplog.at_level(logging.WARNING, logger="vista.shared.llm.cache"):
        assert cache.get("b" * 64, patient="p") is None and "unreadable" not in caplog.text  # may be in progress
        cache.put("c" * 64, ENTRY, patient="p")  # glued to the torn line
        assert cache.get("c" * 64, patient="p") == ENTRY and cache.get("a" * 64, patient="p") == ENTRY
        assert cache.get("b" * 64, patient="p") is None and "unreadable" in caplog.text  # finished, but torn
    assert str(path) in caplog.text and GOOD not in caplog.text
    cache.put("b" * 64, ENTRY, patient="p")  # asked again: the last readable line wins
    assert cache.get("b" * 64, patient="p") == ENTRY and len(cache) == 3
    assert path.read_bytes().startswith(whole)


def test_the_per_key_layout_still_hits_and_counts(tmp_path):
    old = ResponseCache(tmp_path)
    old.put("d" * 64, ENTRY)  # as the code before the patient files wrote it
    assert (tmp_path / "dd" / f"{'d' * 64}.json").is_file()
    cache = ResponseCache(tmp_path)
    assert cache.get("d" * 64, patient="p") == ENTRY
    cache.put("e" * 64, ENTRY, patient="p")
    assert len(cache) == 2 and cache.get("e" * 64) is None  # without the patient, only the per-key file is asked


def _writer(root: str, worker: int, n: int) -> None:
    cache = ResponseCache(root)
    for i in range(n):
        key = f"{i % 7:064x}"
        cache.put(key, CachedAnswer(json.dumps({"worker": worker, "i": i, "pad": "x" * 5000}), "m", "S", 1, 1))


def test_concurrent_processes_never_leave_partial_entries(tmp_path):
    root = str(tmp_path / "shared")
    ctx = multiprocessing.get_context("fork")  # the writers touch only os, json and tempfile: safe to fork
    procs = [ctx.Process(target=_writer, args=(root, w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    cache = ResponseCache(root)
    seen = 0
    while any(p.is_alive() for p in procs):  # read while they write: every entry read is whole
        for path in list((tmp_path / "shared").glob("??/*.json")):
            entry = cache.get(path.stem)
            if entry is not None:
                assert json.loads(entry.content)["pad"] == "x" * 5000
                seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    assert len(cache) == 7 and not list((tmp_path / "shared").glob("??/*.tmp"))


def test_a_lookup_reads_only_what_was_appended_and_a_replaced_file_anew(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put("a" * 64, ENTRY, patient="p")
    assert cache.get("a" * 64, patient="p") == ENTRY
    (path,) = (tmp_path / "buckets").glob("*.jsonl")
    read = path.stat().st_size
    other = CachedAnswer('{"level": "High"}', "m", "Risk", 3, 2)
    ResponseCache(tmp_path).put("b" * 64, other, patient="p")  # another writer appends
    index = cache._indexes[str(path)]
    assert cache.get("b" * 64, patient="p") == other and index.read_to == path.stat().st_size > read
    cache.close()
    path.unlink()  # a cleared cache, then a longer file written there by another process
    writer = ResponseCache(tmp_path)
    for n in range(5):
        writer.put(f"{n:064x}", other, patient="p")
    assert path.stat().st_size > index.read_to
    assert cache.get("a" * 64, patient="p") is None  # not served from the index of the removed file
    assert cache.get(f"{4:064x}", patient="p") == other


def test_the_key_is_the_sha256_of_the_whole_material_in_canonical_json_so_earlier_caches_still_hit():
    import hashlib

    from vista.shared.llm.cache import CACHE_FORMAT, canonical_json, cache_key
    from vista.shared.llm.messages import Message

    schema = {"type": "object", "properties": {"level": {"enum": ["Low", "Élevé"]}}, "required": ["level"]}
    ask = dict(endpoint="http://a:8000/v1", model="m", messages=[Message("system", "naïve"), Message("user", "hi")],
               schema_mode="json_schema", parameters={"temperature": 0.0, "seed": 0}, backend="openai",
               served_model="m.gguf")
    material = {"format": CACHE_FORMAT, "backend": "openai", "endpoint": "http://a:8000/v1", "model": "m",
                "served_model": "m.gguf", "messages": [m.to_wire() for m in ask["messages"]], "schema": schema,
                "schema_mode": "json_schema", "parameters": {"temperature": 0.0, "seed": 0}}
    recipe = hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False).encode()).hexdigest()
    assert cache_key(schema=schema, **ask) == recipe == cache_key(schema=None, schema_json=canonical_json(schema), **ask)


def _whole_file_lookup(data: bytes, key: str) -> CachedAnswer | None:
    """The lookup as it was before the index: the last readable finished line of ``key`` in the whole file."""
    needle, end = f"{key}\t".encode(), len(data)
    while (at := data.rfind(needle, 0, end)) >= 0:
        end = at
        stop = data.find(b"\n", at)
        if stop < 0:
            continue
        try:
            return CachedAnswer(**json.loads(data[at + len(needle):stop]))
        except (ValueError, TypeError):
            continue
    return None


def test_the_index_answers_as_a_read_of_the_whole_file_would_through_appends_tears_and_a_cleared_cache(tmp_path):
    import random

    rng = random.Random(7)
    keys = [f"{n:064x}" for n in range(12)]
    reader, writers = ResponseCache(tmp_path), [ResponseCache(tmp_path) for _ in range(2)]
    writers[0].put(keys[0], ENTRY, patient="p")
    (path,) = (tmp_path / "buckets").glob("*.jsonl")
    for step in range(400):
        roll = rng.random()
        if roll < 0.5:
            answer = CachedAnswer(json.dumps({"step": step}), "m", "Risk", step, 1)
            rng.choice(writers).put(rng.choice(keys), answer, patient="p")
        elif roll < 0.56:  # a writer killed mid-line (its torn entry then glued to the next line)
            with path.open("ab") as f:
                f.write(rng.choice(keys).encode() + b'\t{"content": "tor')
        elif roll < 0.58:  # the cache cleared, and written again from scratch
            for cache in (reader, *writers):
                cache.close()
            path.unlink()
            writers[1].put(rng.choice(keys), ENTRY, patient="p")
        key = rng.choice(keys)
        assert reader.get(key, patient="p") == _whole_file_lookup(path.read_bytes(), key), step


def test_a_cache_of_one_file_per_patient_still_answers_and_counts(tmp_path, caplog):
    import hashlib

    digest = hashlib.sha256(b"p-old").hexdigest()  # as the code before the buckets wrote it
    old = tmp_path / "patients" / digest[:2] / f"{digest[:32]}.jsonl"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"a" * 64 + b"\t" + ENTRY.to_json().encode() + b"\n" + b"b" * 64 + b'\t{"content": "tor\n')
    cache = ResponseCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="vista.shared.llm.cache"):
        assert cache.get("a" * 64, patient="p-old") == ENTRY and cache.get("b" * 64, patient="p-old") is None
    assert str(old) in caplog.text and cache.get("a" * 64, patient="another") is None
    newer = CachedAnswer('{"level": "High"}', "m", "Risk", 3, 2)
    cache.put("a" * 64, newer, patient="p-old")  # asked again: written to the bucket, which is read first
    cache.put("c" * 64, ENTRY, patient="p-old")
    assert ResponseCache(tmp_path).get("a" * 64, patient="p-old") == newer and len(cache) == 2
    assert old.read_bytes().startswith(b"a" * 64) and len(list((tmp_path / "buckets").glob("*.jsonl"))) == 1


def test_a_hundred_thousand_patients_make_a_few_thousand_private_files(tmp_path):
    import hashlib

    from vista.shared.atomic import data_mode
    from vista.shared.llm.cache import BUCKET_DIGITS

    cache = ResponseCache(tmp_path)
    small = CachedAnswer("1", "m", "S", 1, 1)
    patients = 100_000
    # bucket by bucket, as an actor writes a patient's answers together (a bucket file stays open between them)
    for n in sorted(range(patients), key=lambda n: hashlib.sha256(f"patient-{n}".encode()).digest()):
        cache.put(f"{n:064x}", small, patient=f"patient-{n}")
    cache.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 16 ** BUCKET_DIGITS == 4096  # every bucket used, none more
    assert {p.stat().st_mode & 0o777 for p in files} == {data_mode().file}
    assert (tmp_path / "buckets").stat().st_mode & 0o777 == data_mode().folder
    reader = ResponseCache(tmp_path)
    assert all(reader.get(f"{n:064x}", patient=f"patient-{n}") == small for n in range(0, patients, 997))
    assert reader.get(f"{patients:064x}", patient="patient-0") is None


def test_the_indexes_hold_a_bounded_number_of_lines_and_an_evicted_file_is_read_again(tmp_path, monkeypatch):
    from vista.shared.llm import cache as cache_module

    monkeypatch.setattr(cache_module, "INDEXED_ENTRIES", 10)
    writer, reader = ResponseCache(tmp_path), ResponseCache(tmp_path)
    patients = [f"p{n}" for n in range(40)]  # about 40 buckets, 4 lines each
    for n, patient in enumerate(patients):
        for i in range(4):
            writer.put(f"{n * 4 + i:064x}", CachedAnswer(str(n * 4 + i), "m", "S", 1, 1), patient=patient)
    for _ in range(2):  # the second round reads again what the bound dropped
        for n, patient in enumerate(patients):
            assert reader.get(f"{n * 4 + 3:064x}", patient=patient).content == str(n * 4 + 3)
            assert reader._indexed == sum(i.count for i in reader._indexes.values()) <= 10 + 4


def _bucket_writer(root: str, worker: int, n: int) -> None:
    cache = ResponseCache(root)
    for i in range(n):
        entry = CachedAnswer(json.dumps({"worker": worker, "i": i, "pad": "x" * 5000}), "m", "S", 1, 1)
        cache.put(f"{i % 7:064x}", entry, patient=f"p-{i % 2}")  # two patients, so one or two bucket files
    cache.close()


def test_concurrent_processes_appending_to_a_bucket_leave_whole_lines(tmp_path):
    root = str(tmp_path / "shared")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_bucket_writer, args=(root, w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    cache = ResponseCache(root)
    seen = 0
    while any(p.is_alive() for p in procs):  # read while they write: every entry read is whole
        for i in range(7):
            entry = cache.get(f"{i:064x}", patient=f"p-{i % 2}")
            if entry is not None:
                assert json.loads(entry.content)["pad"] == "x" * 5000
                seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    lines = b"".join(path.read_bytes() for path in (tmp_path / "shared" / "buckets").glob("*.jsonl")).splitlines()
    assert len(lines) == 3 * 60 and all(json.loads(line[65:])["content"].endswith('"x' + "x" * 4999 + '"}') for line in lines)
    assert len(ResponseCache(root)) == 7
