"""The job manifest records the code (package version, git commit, prompt hashes); a change is refused with a message
naming only what changed, unless the run says to go on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jobs.manifest import check_manifest, prompt_dirs
from vista.shared.runs.errors import JobSettingsMismatch
from vista.shared.runs.manifest import CODE_FLAG, MANIFEST, CodeVersion, prompt_hashes

SETTINGS = {"model": "m", "pipeline": {"chunk_tokens": 1500, "memory_k": 10}, "llm": {"temperature": 0.0}}


def code(**changes) -> CodeVersion:
    base = {"version": "0.1.0", "git_commit": "1111111111aaaa", "git_dirty": False,
            "prompts": {"trajonco/prompts/worker_first.system.txt": "aa", "trajonco/prompts/manager.system.txt": "bb"}}
    return CodeVersion(**(base | changes))


def test_the_running_code_is_recorded(tmp_path):
    check_manifest(tmp_path, "predict", SETTINGS)
    recorded = json.loads((tmp_path / MANIFEST).read_text())["code"]
    assert recorded["version"] == "0.1.0" and recorded["prompts"] == prompt_hashes(prompt_dirs("predict"))
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():  # the commit of the checkout the code runs from
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        assert recorded["git_commit"] == head.strip()
    assert "trajonco/prompts/worker_first.system.txt" in recorded["prompts"]
    assert not any(name.startswith("vista/") for name in recorded["prompts"])  # predict does not use VISTA's prompts
    assert {name.split("/")[1] for name in prompt_hashes(prompt_dirs("build-graphs"))} == {"toa", "display"}
    check_manifest(tmp_path, "predict", SETTINGS)  # the same code and settings resume


def test_a_changed_prompt_is_refused_naming_only_that_prompt(tmp_path):
    check_manifest(tmp_path, "predict", SETTINGS, code=code())
    edited = code(prompts={"trajonco/prompts/worker_first.system.txt": "cc", "trajonco/prompts/manager.system.txt": "bb"})
    with pytest.raises(JobSettingsMismatch) as caught:
        check_manifest(tmp_path, "predict", SETTINGS, code=edited)
    message = str(caught.value)
    assert "(prompt trajonco/prompts/worker_first.system.txt changed)" in message
    assert "manager" not in message and "choose another --out" in message and CODE_FLAG in message


def test_an_upgrade_names_version_and_commit(tmp_path):
    check_manifest(tmp_path, "predict", SETTINGS, code=code())
    newer = code(version="0.2.0", git_commit="2222222222bbbb",
                 prompts={"trajonco/prompts/worker_first.system.txt": "aa", "trajonco/prompts/new.txt": "dd"})
    with pytest.raises(JobSettingsMismatch, match=r"package version: 0.1.0 -> 0.2.0; git commit: 1111111111 -> "
                                                  r"2222222222; prompt trajonco/prompts/manager.system.txt removed; "
                                                  r"prompt trajonco/prompts/new.txt added\)"):
        check_manifest(tmp_path, "predict", SETTINGS, code=newer)


def test_the_flag_resumes_and_keeps_the_history(tmp_path):
    check_manifest(tmp_path, "predict", SETTINGS, code=code())
    newer = code(git_commit="3333333333cccc")
    check_manifest(tmp_path, "predict", SETTINGS, code=newer, allow_code_change=True)
    saved = json.loads((tmp_path / MANIFEST).read_text())
    assert saved["code"]["git_commit"] == "3333333333cccc" and saved["code_history"][0]["git_commit"] == "1111111111aaaa"
    check_manifest(tmp_path, "predict", SETTINGS, code=newer)  # now the recorded code: resumes without the flag
    with pytest.raises(JobSettingsMismatch, match="other settings"):  # the flag never lets other settings through
        check_manifest(tmp_path, "predict", SETTINGS | {"model": "other"}, code=newer, allow_code_change=True)


def test_a_manifest_from_before_code_versions_is_refused(tmp_path):
    (tmp_path / MANIFEST).write_text(json.dumps({"job": "predict", "settings": SETTINGS}))
    with pytest.raises(JobSettingsMismatch, match="code version not recorded"):
        check_manifest(tmp_path, "predict", SETTINGS, code=code())


def test_settings_differences_name_the_nested_field(tmp_path):
    check_manifest(tmp_path, "predict", SETTINGS, code=code())
    changed = SETTINGS | {"pipeline": {"chunk_tokens": 1500, "memory_k": 5}}
    with pytest.raises(JobSettingsMismatch) as caught:
        check_manifest(tmp_path, "predict", changed, code=code())
    assert "(pipeline.memory_k: 10 -> 5);" in str(caught.value) and "chunk_tokens" not in str(caught.value)
