"""`/save` at the prompt: the new session opens at once, the old one is archived behind it."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable

from helpers import asked, wait_until_async
from model_server import ModelServer, Reply
from prompt_toolkit.input import PipeInput, create_pipe_input
from test_repl import make_repl

from seelen.chat.repl import Repl
from seelen.store import ARCHIVED


async def until(condition: Callable[[], bool]) -> None:
    await wait_until_async(condition, 20, "the chat did not get there")


def held_summaries(env: ModelServer) -> threading.Event:
    """Chat replies echo the message; the session summary waits until the event is set."""
    release = threading.Event()

    def respond(body: dict) -> Reply:
        system = body["messages"][0]["content"]
        if system.startswith("Summarise this finished conversation"):
            release.wait(30)
            return Reply(text="We talked about the garden and the roses.")
        return Reply(text=f"echo: {asked(body)}")

    env.responder = respond
    return release


async def chat_with_one_exchange(pipe: PipeInput) -> tuple[Repl, io.StringIO, asyncio.Task[None]]:
    """An interactive chat whose session holds one exchange, running on `pipe`."""
    repl, out = make_repl(pipe)
    await repl.start()
    chat = asyncio.create_task(repl.run_interactive())
    pipe.send_text("my roses bloom\r")
    await until(lambda: "echo: my roses bloom" in out.getvalue())
    return repl, out, chat


async def test_the_prompt_answers_while_the_last_session_is_archived(env: ModelServer) -> None:
    release = held_summaries(env)
    with create_pipe_input() as pipe:
        repl, out, chat = await chat_with_one_exchange(pipe)
        old = repl.app.sessions.current.session_id
        pipe.send_text("/save\r")
        pipe.send_text("and the tulips?\r")
        # Answered while the summary is still being written (before: /save held the prompt).
        await until(lambda: "echo: and the tulips?" in out.getvalue())
        assert "The last session is archived" not in out.getvalue()
        assert repl.app.store.get_session(old).status != ARCHIVED
        release.set()
        await until(lambda: "The last session is archived." in out.getvalue())
        pipe.send_text("/exit\r")
        await asyncio.wait_for(chat, 20)
    assert repl.app.store.get_session(old).status == ARCHIVED
    new = repl.app.sessions.current.session_id
    assert [t.text for t in repl.app.store.turns(new)] == [
        "and the tulips?",
        "echo: and the tulips?",
    ]
    await repl.app.aclose()


async def test_leaving_while_the_archive_runs_finishes_it(env: ModelServer) -> None:
    release = held_summaries(env)
    with create_pipe_input() as pipe:
        repl, out, chat = await chat_with_one_exchange(pipe)
        old = repl.app.sessions.current.session_id
        pipe.send_text("/save\r/exit\r")
        await until(lambda: "Finishing the archive of the last session" in out.getvalue())
        assert not chat.done()
        release.set()
        await asyncio.wait_for(chat, 20)
    assert repl.app.store.get_session(old).status == ARCHIVED
    assert "The last session is archived." in out.getvalue()
    await repl.app.aclose()
