"""The project's one atomic-write helper (`vista.shared.atomic`) and one prompt loader (`vista.shared.prompts`)."""

from __future__ import annotations

import os
import stat

import pytest

from vista.shared.atomic import atomic_path, atomic_write_bytes, atomic_write_text, data_mode
from vista.shared.prompts import PromptFolder, PromptNotFoundError


@pytest.mark.parametrize("fsync", [False, True])
def test_a_write_replaces_the_file_whole_with_private_permissions(tmp_path, fsync):
    target = tmp_path / "deep" / "x.json"
    atomic_write_text(target, "old\r\n", fsync=fsync)
    atomic_write_bytes(target, b"new", fsync=fsync)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == data_mode().file == 0o600  # patient data at rest (test_data_at_rest)
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_text_is_written_byte_for_byte_as_utf8(tmp_path):
    target = atomic_write_text(tmp_path / "t.txt", "a\r\nb\nö")
    assert target.read_bytes() == "a\r\nb\nö".encode()


def test_a_failed_rename_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    atomic_write_bytes(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(target, b"new", fsync=True)
    assert target.read_bytes() == b"old" and list(tmp_path.glob(".*.tmp")) == []


def test_the_temporary_file_is_hidden_and_beside_the_target(tmp_path):
    with atomic_path(tmp_path / "out.parquet") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.parquet.") and tmp.suffix == ".tmp"
        tmp.write_bytes(b"x")
    assert (tmp_path / "out.parquet").read_bytes() == b"x" and not tmp.exists()


def test_every_layer_loads_its_prompts_through_the_one_loader():
    import importlib

    from trajonco.agents import prompts as agent_prompts
    from trajonco.judge import prompts as judge_prompts
    from vista.display import agent_prompts as display_prompts
    from vista.evaluation.judge import judge_prompt
    ask = importlib.import_module("vista.query.ask")  # `vista.query.ask` the package attribute is the function
    generate = importlib.import_module("vista.rag.generate")
    from vista.toa import agent_prompts as toa_prompts

    assert "{event_types}" in toa_prompts.prompt_text("extract")
    assert display_prompts.prompt_text("summary") and ask.prompt_text("answer") and generate.prompt_text("variables")
    assert judge_prompt().strip()
    assert agent_prompts.load_template("manager.system").template == (
        PromptFolder("trajonco.prompts", folder="").text("manager.system"))
    assert judge_prompts._template("system").template.strip()
    assert toa_prompts.prompt_text("extract") is toa_prompts.prompt_text("extract")  # read once, cached


def test_a_missing_prompt_names_its_file():
    with pytest.raises(PromptNotFoundError, match=r"prompt file trajonco/prompts/judge/nope\.txt does not exist"):
        PromptFolder("trajonco.prompts", folder="judge").template("nope")
    with pytest.raises(PromptNotFoundError, match=r"vista/nowhere/prompts/x\.md"):
        PromptFolder("vista.nowhere", suffix=".md").text("x")
