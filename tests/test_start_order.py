"""Nothing the user typed waits on start-up work: an in-process `ask` with a half-done
archive saves and answers its question first, then finishes the archive."""

from __future__ import annotations

import pytest
from helpers import open_store, run_seelen
from model_server import ModelServer, Reply
from test_memory import jobs, open_app, role_of, say, scripted

from seelen.errors import ModelError
from seelen.store import ARCHIVED


async def test_an_ask_answers_before_it_finishes_an_earlier_archive(
    env: ModelServer, data_dir
) -> None:
    def persona_refused(body: dict) -> Reply:
        if role_of(body) == "persona":
            return Reply(status=400, text="request too large")
        return Reply(text="ok")

    env.responder = persona_refused
    app = await open_app()
    await say(app, "I like green tea")
    old = app.sessions.current.session_id
    with pytest.raises(ModelError):
        await app.sessions.archive()  # half done: retried at the next start
    await app.aclose()
    before = len(env.chat_requests())

    env.responder = scripted({"chat": "Try a sencha.", "persona": "I am Seelen."})
    result = run_seelen("ask", "what should I drink?")
    assert result.returncode == 0, result.stderr
    assert "Try a sencha." in result.stdout
    asked = jobs(env)[before:]
    assert asked[0] == "chat" and "persona" in asked[1:]  # the answer came first
    store = open_store(data_dir)
    assert store.get_session(old).status == ARCHIVED  # and the archive was still finished
    store.close()
