"""Fully offline: the bundled SmolLM2 model through the real local llama.cpp server."""

from __future__ import annotations

import pytest

from seelen.agent import Done, TextDelta
from seelen.app import build_app, choose_provider
from seelen.config import load_settings
from seelen.errors import ConfigError


async def test_chat_and_archive_with_the_bundled_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_REPLY_TOKENS", "40")  # a few seconds of decoding at most
    monkeypatch.setenv("ENABLE_MCP", "false")
    settings = load_settings()
    assert choose_provider(settings).kind == "local"  # no endpoint configured
    app = build_app(settings)
    pid = app.provider.server.pid
    assert pid is not None and _alive(pid)  # the llama.cpp child runs while Seelen does
    try:
        await app.open_session()
        assert app.provider.base_url.startswith("http://127.0.0.1:")
        assert not app.bot.tools_enabled and "cannot call tools" in app.tools_note
        events = [e async for e in app.bot.turn("Hello! Please say hello back.")]
        streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
        done = [e for e in events if isinstance(e, Done)]
        assert streamed.strip() and done and done[0].text == streamed
        sid = app.sessions.current.session_id
        assert [t.role for t in app.store.turns(sid)] == ["user", "assistant"]

        result = await app.sessions.archive()
        assert result.summary.strip()
        assert app.store.session_summary(sid).text == result.summary
    finally:
        await app.aclose()
    assert _gone(pid)  # and is gone once Seelen closes


def _gone(pid: int, seconds: float = 10) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_without_endpoint_or_local_model_the_message_names_both_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "auto")
    monkeypatch.setenv("LOCAL_MODEL_PATH", "/nonexistent/model.gguf")
    with pytest.raises(ConfigError) as err:
        choose_provider(load_settings())
    message = str(err.value)
    assert "OPENAI_BASE_URL" in message and "install" in message
