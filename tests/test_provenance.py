"""Stable provenance and honest caching (issue 13): refs are read only against the graph version they were made
from, the TOA and display caches key on every setting that changes answers, and incomplete results are run again.

Each test first shows the defect's precondition (e.g. after a data change the old ref still passes ``has_event`` but
opens another row), then that it is refused, rebuilt or marked."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re

import pytest

from display_fixtures import fake_display_model, toa_timeline
from display_fixtures import gateway_for as display_gateway
from toa_fixtures import CATALOG, ROWS, toa_graph
from vista.cli import main
from vista.display import DisplayStore, display_markdown
from vista.graph import GraphStore, build_graph
from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.errors import BackendError
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.backend import ChatRequest
from vista.query import answer_text, ask, load_state, load_timeline, timeline_text
from vista.query.sources import version_tag
from vista.shared.records import Event, PatientRecord
from vista.toa import ChunkSize, TimelineStore, TOAConfig, pipeline
from vista.toa.errors import StaleProvenanceError
from vista.toa.refs import graph_version, ref_fingerprint

CONFIG = TOAConfig(safety_net=False, resolve_ambiguous=False)
"""Extraction only (one call per chunk), so call counts say exactly what was asked."""
RULES = [(r"CPT//71260", "imaging", "ct", "CT chest"), (r"ICD10CM//C34.11", "diagnosis", "initial", "Lung cancer"),
         (r"RXNORM//1736854", "systemic_therapy", "immunotherapy", "Pembrolizumab started")]


def extractor(request: ChatRequest) -> str:
    """A perfect reader of the serialized chunk: one event per rule-matching line, citing that line's id."""
    events = []
    for line in request.messages[-1].content.splitlines():
        m = re.match(r"^\[(e\d+)\] (\d{4}-\d{2}-\d{2})", line)
        for pattern, kind, subtype, text in RULES:
            if m and re.search(pattern, line):
                events.append({"date": m.group(2), "type": kind, "subtype": subtype, "description": text,
                               "source_event_refs": [m.group(1)]})
    return json.dumps({"events": events})


def gateway(backend, **overrides) -> LLMGateway:
    return open_gateway(LLMConfig(**({"model": "gpt-4.1-mini", "max_retries": 0} | overrides)), backend=backend)


def record(rows=ROWS) -> PatientRecord:
    return PatientRecord(21, "data/train/0.parquet", 500, [Event(f"e{k}", *row) for k, row in enumerate(rows)])


def inserted_rows():
    """The data after a change: a lab row arrives in the baseline visit, so every later row moves down one."""
    return [*ROWS[:5], (dt.datetime(2020, 1, 6, 9, 30), "LOINC//718-7", 12.4, None), *ROWS[5:]]


def edited_rows():
    """The data after a change to a row no timeline event cites (the baseline hemoglobin value)."""
    rows = list(ROWS)
    rows[4] = (rows[4][0], rows[4][1], 9.0, rows[4][3])
    return rows


def build_store(root, rows=ROWS) -> GraphStore:
    store = GraphStore(root)
    store.build_records([record(rows)], CATALOG)
    return store


def build_timeline_in(root, backend, config=CONFIG, **overrides):
    graph = GraphStore(root).load(21)

    async def go():
        return await TimelineStore(root).build(graph, gateway(backend, **overrides), config)
    return asyncio.run(go())


# ---------------------------------------------------------------------------------------------- stale refs


def test_refs_into_a_changed_graph_are_refused_naming_patient_and_refs(tmp_path, capsys):
    root = tmp_path / "store"
    old_graph = build_store(root).load(21)
    timeline, built = build_timeline_in(root, ScriptedBackend(extractor))
    assert built and timeline.graph_hash == old_graph.info.content_hash == GraphStore(root).content_hash_of(21)
    assert load_state(root, 21).timeline == timeline  # current: served
    ct_ref = next(e for e in timeline.events if e.type == "imaging").source_event_refs[0]
    assert timeline.ref_fingerprints[ct_ref] == ref_fingerprint(old_graph, ct_ref)

    build_store(root, inserted_rows())  # the data changed; the graph is rebuilt, the timeline is not
    new_graph = GraphStore(root).load(21)
    # the defect: the stored ref still passes has_event but opens another row
    assert new_graph.has_event(ct_ref) and new_graph.event(ct_ref).code != old_graph.event(ct_ref).code

    with pytest.raises(StaleProvenanceError) as refused:
        load_state(root, 21)
    message = str(refused.value)
    assert "subject 21" in message and "\n" not in message
    assert "another version of the patient's MEDS Graph" in message and "now open a different row" in message
    assert ct_ref in message and f"vista timeline --store {root} --subject 21" in message
    with pytest.raises(StaleProvenanceError, match="subject 21"):
        load_timeline(root, 21)  # without a graph: checked against the store's manifest
    with pytest.raises(StaleProvenanceError, match="subject 21"):
        TimelineStore(root).load(21, new_graph)

    # `vista source` with a timeline id: one line, exit status 2
    assert main(["source", "--store", str(root), "--subject", "21", "t0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "subject 21" in err and "different row" in err

    # refs copied from an earlier answer carry the graph version they were made against: refused once it changed
    pin = version_tag(old_graph.info.content_hash)
    assert main(["source", "--store", str(root), "--subject", "21", pin, ct_ref]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "subject 21" in err and f"version {pin[1:]}" in err and "refused" in err
    assert main(["source", "--store", str(root), "--subject", "21", version_tag(new_graph.info.content_hash),
                 ct_ref]) == 0
    assert f"[{ct_ref}]" in capsys.readouterr().out

    # ask refuses before any model call
    backend = ScriptedBackend([])

    async def asking():
        return await ask("When was the CT?", timeline, new_graph, gateway(backend))
    with pytest.raises(StaleProvenanceError, match="subject 21"):
        asyncio.run(asking())
    assert backend.requests == []

    # a rebuilt timeline is current again, its refs opening the same rows as when it was made
    rebuilt, built = build_timeline_in(root, ScriptedBackend(extractor))
    assert built and load_state(root, 21).timeline == rebuilt
    assert all(new_graph.event(r).code == "CPT//71260" for e in rebuilt.events if e.type == "imaging"
               for r in e.source_event_refs)


def test_a_change_to_an_uncited_row_is_refused_too_and_the_message_says_so(tmp_path):
    root = tmp_path / "store"
    build_store(root)
    timeline, _ = build_timeline_in(root, ScriptedBackend(extractor))
    assert "e4" not in timeline.ref_fingerprints  # the hemoglobin row is cited by no event
    build_store(root, edited_rows())
    with pytest.raises(StaleProvenanceError, match=r"subject 21: .*cited source events are unchanged, but the graph "
                                                   r"has other changes"):
        load_state(root, 21)


def test_a_stored_timeline_without_a_graph_version_is_refused(tmp_path):
    root = tmp_path / "store"
    build_store(root)
    timeline, _ = build_timeline_in(root, ScriptedBackend(extractor))
    TimelineStore(root).save(timeline.model_copy(update={"graph_hash": None}))  # as written before versioning
    with pytest.raises(StaleProvenanceError, match="subject 21: the stored timeline .* records no MEDS Graph version"):
        load_state(root, 21)
    _, built = build_timeline_in(root, ScriptedBackend(extractor))
    assert built  # and the store does not serve it


def test_ids_and_versions_survive_re_reads_and_change_with_the_data(tmp_path):
    assert graph_version(toa_graph()) == graph_version(toa_graph())  # an in-memory graph: digest of its tables
    assert graph_version(build_graph(record(edited_rows()), CATALOG)) != graph_version(toa_graph())
    store = build_store(tmp_path / "a")
    first, second = store.load(21), GraphStore(tmp_path / "a").load(21)  # two reads of the persisted graph
    assert graph_version(first) == graph_version(second) == store.content_hash_of(21)
    assert all(ref_fingerprint(first, e) == ref_fingerprint(second, e) for e in first.node_ids() if first.has_event(e))
    assert graph_version(build_store(tmp_path / "b").load(21)) == graph_version(first)  # same rows, same version


def test_display_refs_into_a_changed_graph_are_refused(tmp_path):
    store = DisplayStore(tmp_path)
    graph = toa_graph()

    async def go(graph, timeline, backend):
        return await store.build(graph, timeline, display_gateway(backend))
    display, built = asyncio.run(go(graph, toa_timeline(), ScriptedBackend(fake_display_model())))
    assert built and display.graph_hash == graph_version(graph) and "e9" in display.ref_fingerprints
    assert store.load(21, graph) == display

    changed = build_graph(record(inserted_rows()), CATALOG)
    assert changed.has_event("e9") and changed.event("e9").code != graph.event("e9").code  # the defect's condition
    with pytest.raises(StaleProvenanceError, match=r"subject 21: the stored display .* now open a different row"):
        store.load(21, changed)
    assert store.is_current(changed, toa_timeline(), display_gateway(ScriptedBackend([]))) is None
    with pytest.raises(StaleProvenanceError, match="subject 21: the timeline given for the display"):
        asyncio.run(go(changed, toa_timeline(), ScriptedBackend(fake_display_model())))


# ---------------------------------------------------------------------------------------------- honest cache keys


@pytest.mark.parametrize("override", [{"temperature": 0.7}, {"seed": 7}, {"max_tokens": 700},
                                      {"schema_mode": "none"}, {"model": "gpt-4.1"}])
def test_the_timeline_store_rebuilds_after_a_decoding_setting_changes(tmp_path, override):
    root = tmp_path / "store"
    build_store(root)
    backend = ScriptedBackend(extractor)
    first, built = build_timeline_in(root, backend)
    calls = len(backend.requests)
    again, built_again = build_timeline_in(root, backend)
    assert built and not built_again and again == first and len(backend.requests) == calls
    _, rebuilt = build_timeline_in(root, backend, **override)
    assert rebuilt and len(backend.requests) > calls  # the old timeline is not reused under other settings


def test_the_timeline_store_rebuilds_after_a_prompt_or_endpoint_change(tmp_path, monkeypatch):
    root = tmp_path / "store"
    build_store(root)
    backend = ScriptedBackend(extractor)
    build_timeline_in(root, backend)
    with monkeypatch.context() as patch:
        patch.setattr(pipeline, "prompt_text", lambda name: "edited " + name)
        _, built = build_timeline_in(root, backend)
        assert built
    _, built = build_timeline_in(root, backend)
    assert built  # back to the packaged prompts: another hash again
    _, built = build_timeline_in(root, ScriptedBackend(extractor, name="another-server"))
    assert built  # another endpoint serving a model of the same name is another model
    _, built = build_timeline_in(root, ScriptedBackend(extractor, name="another-server"))
    assert not built


def test_the_display_store_rebuilds_after_a_temperature_or_endpoint_change(tmp_path):
    store = DisplayStore(tmp_path)

    def build(backend, **overrides):
        async def go():
            return await store.build(toa_graph(), toa_timeline(), display_gateway(backend, **overrides))
        return asyncio.run(go())[1]

    backend = ScriptedBackend(fake_display_model())
    assert build(backend) and not build(backend)
    assert build(backend, temperature=0.9)
    assert build(ScriptedBackend(fake_display_model(), name="another-server"))


# ---------------------------------------------------------------------------------------------- incomplete results


def failing_first(inner, failures: int = 1):
    calls = []

    def script(request):
        calls.append(request)
        if len(calls) <= failures:
            return BackendError(ErrorKind.SERVER_ERROR, "boom", status=500)
        return inner(request)
    return script


def test_an_incomplete_timeline_is_run_again_not_served(tmp_path):
    root = tmp_path / "store"
    build_store(root)
    backend = ScriptedBackend(failing_first(extractor))
    first, built = build_timeline_in(root, backend)
    assert built and first.stats.failed_chunks == 1 and first.incomplete_reason() == "1 of 1 chunk extraction call(s) failed"
    assert "INCOMPLETE: 1 of 1 chunk extraction call(s) failed" in timeline_text(first)
    calls = len(backend.requests)
    second, built = build_timeline_in(root, backend)
    assert built and len(backend.requests) > calls  # asked again, not served from the store
    assert second.stats.failed_chunks == 0 and second.events and "INCOMPLETE" not in timeline_text(second)
    _, built = build_timeline_in(root, backend)
    assert not built  # complete now: served


def test_an_answer_from_an_incomplete_timeline_says_so(tmp_path):
    root = tmp_path / "store"
    build_store(root)
    small = CONFIG.model_copy(update={"budget": ChunkSize(limit=400)})  # several chunks: the first one fails
    timeline, _ = build_timeline_in(root, ScriptedBackend(failing_first(extractor)), small)
    gaps = f"1 of {timeline.stats.chunks} chunk extraction call(s) failed"
    assert timeline.stats.chunks > 1 and timeline.events
    draft = {"in_timeline": True, "answer": "CT on 2020-07-01.", "confidence": "low", "cited_event_ids": ["t0"]}
    backend = ScriptedBackend(lambda request: json.dumps(draft))

    async def asking():
        return await ask("When was the CT?", timeline, GraphStore(root).load(21), gateway(backend))
    answer = asyncio.run(asking())
    assert answer.timeline_incomplete == gaps
    assert answer.graph_hash == timeline.graph_hash and answer.source_refs
    # the printed command pins the refs to the graph version they were made against
    assert f"--subject 21 {version_tag(timeline.graph_hash)} {answer.source_refs[0]}" in answer_text(answer, store="S")
    assert f"Warning: the timeline is INCOMPLETE ({gaps})" in answer_text(answer)


def test_an_incomplete_display_is_run_again_not_served(tmp_path):
    store = DisplayStore(tmp_path)
    backend = ScriptedBackend(failing_first(fake_display_model()))

    def build():
        async def go():
            return await store.build(toa_graph(), toa_timeline(), display_gateway(backend))
        return asyncio.run(go())

    first, built = build()
    assert built and any(v.origin == "failed" for v in first.values)
    assert "**INCOMPLETE display: " in display_markdown(first)
    calls = len(backend.requests)
    second, built = build()
    assert built and len(backend.requests) > calls and not any(v.origin == "failed" for v in second.values)
    _, built = build()
    assert not built
