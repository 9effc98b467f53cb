"""Nothing the user typed waits on start-up work: an in-process `ask` with a half-done
archive saves and answers its question first, then finishes the archive."""

from __future__ import annotations

import asyncio
import threading

import pytest
from helpers import open_store, run_cli
from model_server import ModelServer, Reply
from test_memory import jobs, open_app, role_of, say, scripted

from seelen.app import build_app
from seelen.config import load_settings
from seelen.errors import ModelError
from seelen.store import ARCHIVED


def test_an_ask_answers_before_it_finishes_an_earlier_archive(env: ModelServer, data_dir) -> None:
    def persona_refused(body: dict) -> Reply:
        if role_of(body) == "persona":
            return Reply(status=400, text="request too large")
        return Reply(text="ok")

    async def half_archive() -> str:
        app = await open_app()
        await say(app, "I like green tea")
        session_id = app.sessions.current.session_id
        with pytest.raises(ModelError):
            await app.sessions.archive()  # half done: retried at the next start
        await app.aclose()
        return session_id

    env.responder = persona_refused
    old = asyncio.run(half_archive())
    before = len(env.chat_requests())

    env.responder = scripted({"chat": "Try a sencha.", "persona": "I am Seelen."})
    result = run_cli("ask", "what should I drink?")
    assert result.returncode == 0, result.stderr
    assert "Try a sencha." in result.stdout
    asked = jobs(env)[before:]
    assert asked[0] == "chat" and "persona" in asked[1:]  # the answer came first
    store = open_store(data_dir)
    assert store.get_session(old).status == ARCHIVED  # and the archive was still finished
    store.close()


async def test_a_chat_closed_before_its_warm_up_finishes_ends_quietly(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashes: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    app = build_app(load_settings())
    importing = threading.Event()
    monkeypatch.setattr(app.model, "warm", lambda: importing.wait(10))  # a slow import
    await app.start()
    await app.aclose()  # the user left at once
    await asyncio.sleep(0.05)  # the event loop runs on meanwhile
    importing.set()
    warm = next(t for t in threading.enumerate() if t.name == "seelen-warm")
    warm.join(10)
    assert not warm.is_alive() and crashes == []
