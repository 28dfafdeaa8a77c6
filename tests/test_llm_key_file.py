"""LLMConfig.api_key_file: the API key read from a private file (the cluster's way), refused when others can read it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import BaseModel, Field

from vista.shared.llm import LLMConfig, LLMGateway, user
from vista.shared.llm.config import read_key_file
from vista.shared.llm.errors import LLMConfigError

SECRET = "sk-from-file-4f1c9"


def key_file(tmp_path: Path, text: str = SECRET + "\n", mode: int = 0o600) -> Path:
    path = tmp_path / "openai_key"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_key_is_read_from_a_private_file_and_wins_over_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-environment")
    path = key_file(tmp_path)
    cfg = LLMConfig(backend="openai", api_key_file=path)
    assert cfg.api_key() == SECRET  # the trailing newline of `echo KEY > file` is dropped
    assert LLMConfig(backend="openai").api_key() == "sk-from-environment"  # without a file: the variable, as before
    assert SECRET not in repr(cfg) and SECRET not in cfg.model_dump_json()  # the config holds the path only


def test_file_is_named_by_the_environment_like_every_setting(tmp_path):
    path = key_file(tmp_path, mode=0o400)
    cfg = LLMConfig.from_env({"VISTA_LLM_BACKEND": "openai", "VISTA_LLM_API_KEY_FILE": str(path)})
    assert cfg.api_key_file == path and cfg.api_key() == SECRET
    assert LLMConfig.from_cli([f"api_key_file={path}"], env={}).api_key() == SECRET
    assert LLMConfig.from_env({"VISTA_LLM_API_KEY_FILE": "none"}).api_key_file is None


def test_home_relative_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    key_file(tmp_path)
    assert LLMConfig.from_env({"VISTA_LLM_API_KEY_FILE": "~/openai_key"}).api_key() == SECRET


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o620])
def test_group_or_world_permissions_are_refused_with_the_fix(tmp_path, mode):
    path = key_file(tmp_path, mode=mode)
    with pytest.raises(LLMConfigError) as caught:
        LLMConfig(api_key_file=path).api_key()
    message = str(caught.value)
    assert str(path) in message and f"mode {mode:04o}" in message and f"chmod 600 {path}" in message
    assert SECRET not in message


def test_unusable_files_give_one_line_naming_file_and_setting(tmp_path):
    cases = {
        "does not exist on this node": tmp_path / "missing",
        "is not a regular file": _private_dir(tmp_path / "secrets"),
        "is empty": key_file(tmp_path, text="\n"),
    }
    for problem, path in cases.items():
        with pytest.raises(LLMConfigError, match=problem) as caught:
            read_key_file(path)
        assert str(path) in str(caught.value) and "VISTA_LLM_API_KEY_FILE" in str(caught.value)
    two_lines = tmp_path / "two"
    two_lines.write_text(f"OPENAI_API_KEY={SECRET}\nother\n")
    two_lines.chmod(0o600)
    with pytest.raises(LLMConfigError, match="must hold the key alone, on one line") as caught:
        read_key_file(two_lines)
    assert SECRET not in str(caught.value)


def test_gateway_sends_the_file_key_to_the_endpoint(tmp_path, monkeypatch):
    """End to end: a gateway built from the config (as each actor builds its own) authenticates with the file's key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = key_file(tmp_path)
    seen: list[str | None] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": '{"answer": "ok"}'}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        })

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
        try:
            config = LLMConfig(backend="openai", base_url=url, model="m", api_key_file=path, max_retries=0)
            async with LLMGateway(config) as gateway:
                return await gateway.complete([user("hi")], Answer, agent="test", patient_id=1)
        finally:
            await runner.cleanup()

    result = asyncio.run(go())
    assert result.ok, result
    assert seen == [f"Bearer {SECRET}"]


class Answer(BaseModel):
    answer: str = Field(max_length=10)


def _private_dir(path: Path) -> Path:
    path.mkdir()
    os.chmod(path, 0o700)
    return path
