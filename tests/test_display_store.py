"""Persisted displays: atomic files, unchanged patients served without calls, the hash tracking every input,
bad files named; and the two renderings."""

from __future__ import annotations

import asyncio
import json
from importlib import resources

import pytest
from rich.console import Console

from display_fixtures import EVENTS, fake_display_model, gateway_for, toa_timeline
from toa_fixtures import toa_graph
from vista.display import (
    DisplayConfig,
    build_display,
    DisplayError,
    DisplayStore,
    display_hash,
    display_markdown,
    load_variables,
    render_display,
)
from vista.display import hashing
from vista.display.agent_prompts import prompt_text
from vista.shared.testing.scripted import ScriptedBackend


def store_build(store, backend, config=DisplayConfig(), timeline=None, **overrides):
    async def go():
        return await store.build(toa_graph(), timeline or toa_timeline(), gateway_for(backend, **overrides), config)
    return asyncio.run(go())


def hash_of(config=DisplayConfig(), timeline=None, **overrides):
    return display_hash(toa_graph(), timeline or toa_timeline(), gateway_for(ScriptedBackend([]), **overrides), config)


def test_an_unchanged_patient_is_served_from_the_store_without_calls(tmp_path):
    store = DisplayStore(tmp_path)
    backend = ScriptedBackend(fake_display_model())
    first, built = store_build(store, backend)
    calls = len(backend.requests)
    assert built and first.calls == calls > 0 and store.path_of(21) == tmp_path / "display" / "21.json"
    assert store.load(21) == first
    again, built = store_build(store, backend)
    assert not built and len(backend.requests) == calls  # no new call
    assert (again.calls, again.prompt_tokens, again.completion_tokens) == (0, 0, 0)
    assert again.values == first.values and again.summary_note == first.summary_note
    assert again.content_hash == first.content_hash
    assert [p.name for p in (tmp_path / "display").iterdir()] == ["21.json"]  # no temp file left behind


def test_a_changed_input_rebuilds(tmp_path):
    store = DisplayStore(tmp_path)
    backend = ScriptedBackend(fake_display_model())
    store_build(store, backend)
    calls = len(backend.requests)
    _, built = store_build(store, backend, DisplayConfig(group_size=5))
    assert built and len(backend.requests) > calls


def test_the_hash_changes_with_each_input(tmp_path, monkeypatch):
    base = hash_of()
    assert hash_of() == base  # deterministic
    assert hash_of(DisplayConfig(group_size=4)) != base
    assert hash_of(DisplayConfig(max_chars=5000)) != base
    assert hash_of(model="gpt-4.1") != base
    assert hash_of(temperature=0.5) != base
    assert hash_of(max_retries=3, timeout_s=10) == base  # how hard the gateway tries does not change answers
    assert hash_of(timeline=toa_timeline(content_hash="other")) != base
    edited = [EVENTS[0], *EVENTS[1:-1], (*EVENTS[-1][:3], "Hospice", EVENTS[-1][4])]
    assert hash_of(timeline=toa_timeline(events=edited)) != base  # same TOA hash, different events

    path = tmp_path / "vars.toml"
    original = (resources.files("vista.display") / "variables.toml").read_text()
    path.write_text(original)
    assert hash_of(DisplayConfig(variables=path)) == base  # same definitions, wherever they live
    path.write_text(original.replace("Histological type of the tumor", "Histologic subtype of the tumour"))
    assert hash_of(DisplayConfig(variables=path)) != base

    for name in ("variables", "summary"):
        with monkeypatch.context() as patch:
            edited = lambda n, name=name: prompt_text(n) + (" edited" if n == name else "")  # noqa: E731
            patch.setattr(hashing, "prompt_text", edited)
            assert hash_of() != base


def test_a_changed_prompt_makes_the_store_rebuild(tmp_path, monkeypatch):
    store = DisplayStore(tmp_path)
    backend = ScriptedBackend(fake_display_model())
    store_build(store, backend)
    monkeypatch.setattr(hashing, "prompt_text", lambda n: prompt_text(n) + " v2")
    _, built = store_build(store, backend)
    assert built


def test_unreadable_store_files_are_named(tmp_path):
    store = DisplayStore(tmp_path)
    with pytest.raises(DisplayError, match=r"display/21\.json: cannot read the display of subject 21"):
        store.load(21)
    store.directory.mkdir()
    store.path_of(21).write_text('{"subject_id": 21, "method": "vista"}')
    with pytest.raises(DisplayError, match=r"21\.json: subject 21: field model: Field required"):
        store.load(21)
    store.path_of(21).write_text("{not json")
    with pytest.raises(DisplayError, match=r"21\.json: subject 21: field <root>"):
        store.load(21)
    backend = ScriptedBackend(fake_display_model())
    first, _ = store_build(DisplayStore(tmp_path / "ok"), backend)
    store.path_of(21).write_text(json.dumps(first.model_dump(mode="json") | {"subject_id": 7}))
    with pytest.raises(DisplayError, match="field subject_id holds 7"):
        store.load(21)


def test_a_display_is_not_checked_against_another_patients_graph(tmp_path):
    """As for timelines: the graph given to `load` must be the patient's (subject 21's graph would pass a display of
    subject 7 made from it)."""
    store = DisplayStore(tmp_path)
    first, _ = store_build(store, ScriptedBackend(fake_display_model()))
    store.save(first.model_copy(update={"subject_id": 7}))
    with pytest.raises(ValueError, match="the graph is of subject 21, not 7"):
        store.load(7, graph=toa_graph())


def test_render_display_and_markdown_show_every_variable_with_its_citations():
    backend = ScriptedBackend(fake_display_model(refs=("t2",)))

    async def go():
        return await build_display(toa_graph(), toa_timeline(), gateway_for(backend))
    display = asyncio.run(go())
    console = Console(record=True, width=200, color_system=None)
    console.print(render_display(display, toa_timeline()))
    text = console.export_text()
    for spec in load_variables():
        assert spec.label in text
    assert "t2 (2020-03-10 histology) → e9, e11" in text and "Summary note" in text
    markdown = display_markdown(display)
    assert markdown.count("\n| ") == len(load_variables()) + 1  # header row + one row per variable
    assert "| Histology | histology value | t2 → e9, e11 |" in markdown
    assert "**Summary.** Adenocarcinoma" in markdown
