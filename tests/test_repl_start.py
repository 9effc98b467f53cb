"""The chat in a terminal shows its prompt first and opens the profile behind it."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Iterator

from helpers import heavy_imports, open_store, wait_until_async
from model_server import ModelServer
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from seelen.chat.repl import Repl
from seelen.config import load_settings
from seelen.runtime import ProfileLock

# How long the chat may take to open the profile and answer, on a loaded machine.
OPEN = 20


def terminal_repl(pipe) -> tuple[Repl, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    repl = Repl(None, console, settings=load_settings(), pt_input=pipe, pt_output=DummyOutput())
    return repl, out


@contextlib.contextmanager
def held_by_another_chat() -> Iterator[ProfileLock]:
    """The profile's lock, held as the chat in another terminal holds it, until the end."""
    directory = load_settings().profile_dir
    directory.mkdir(parents=True)
    other = ProfileLock(directory, "chat")
    other.acquire(wait=False)
    try:
        yield other
    finally:
        other.release()


def test_the_prompt_needs_neither_the_runtime_nor_the_renderer() -> None:
    heavy = (
        "seelen.runtime",
        "seelen.app",
        "seelen.chat.render",
        "seelen.chat.listings",
        "numpy",
        "openai",
        "lancedb",
    )
    assert heavy_imports("seelen.chat.repl", heavy) == []


async def test_a_line_sent_while_another_chat_holds_the_profile_waits_and_is_answered(
    env: ModelServer, data_dir, monkeypatch
) -> None:
    refused: list[int] = []  # each time the waiting chat tried the lock and was refused
    try_acquire = ProfileLock.try_acquire

    def counted(lock: ProfileLock) -> bool:
        taken = try_acquire(lock)
        if not taken:
            refused.append(1)
        return taken

    monkeypatch.setattr(ProfileLock, "try_acquire", counted)
    env.enqueue("Answered once the profile was free.")
    with held_by_another_chat() as other, create_pipe_input() as pipe:
        repl, out = terminal_repl(pipe)
        chat = asyncio.create_task(repl.run_terminal())
        await wait_until_async(
            lambda: "waiting for the Seelen chat in another terminal" in out.getvalue(),
            OPEN,
            "the chat never said it waits",
        )
        pipe.send_text("typed while it waits\r")
        await wait_until_async(
            lambda: "opening your memory" in out.getvalue(), OPEN, "the line was not taken"
        )
        tries = len(refused)
        await wait_until_async(
            lambda: len(refused) >= tries + 2, OPEN, "the chat stopped trying the lock"
        )
        # Refused again after the line was typed: the line is held, not sent and not lost.
        assert env.chat_requests() == []
        other.release()
        await wait_until_async(
            lambda: "Answered once the profile was free." in out.getvalue(), OPEN, "never answered"
        )
        pipe.send_text("/exit\r")
        await asyncio.wait_for(chat, 20)
    store = open_store(data_dir)
    session = store.active_session()
    assert session is not None
    assert [t.text for t in store.turns(session.session_id)] == [
        "typed while it waits",
        "Answered once the profile was free.",
    ]
    store.close()


async def test_leaving_while_waiting_for_the_profile_leaves_at_once(env: ModelServer) -> None:
    with held_by_another_chat():
        with create_pipe_input() as pipe:
            repl, out = terminal_repl(pipe)
            chat = asyncio.create_task(repl.run_terminal())
            await wait_until_async(
                lambda: "waiting for" in out.getvalue(), OPEN, "the chat never said it waits"
            )
            pipe.send_text("\x04")  # Ctrl-D
            await asyncio.wait_for(chat, 5)
        assert repl._app is None  # it never opened, so it wrote nothing


async def test_the_restored_session_prints_once_the_profile_is_open(env: ModelServer) -> None:
    env.enqueue("Noted: your boat is the Kestrel.")
    with create_pipe_input() as pipe:
        repl, out = terminal_repl(pipe)
        chat = asyncio.create_task(repl.run_terminal())
        pipe.send_text("my boat is called Kestrel\r")
        await wait_until_async(lambda: "Kestrel." in out.getvalue(), OPEN, "never answered")
        pipe.send_text("/q\r")
        await asyncio.wait_for(chat, 20)
    with create_pipe_input() as pipe:
        repl, out = terminal_repl(pipe)
        chat = asyncio.create_task(repl.run_terminal())
        await wait_until_async(
            lambda: "Restored your session" in out.getvalue(), OPEN, "never restored"
        )
        pipe.send_text("/q\r")
        await asyncio.wait_for(chat, 20)
    text = out.getvalue()
    assert text.index("Seelen is listening") < text.index("Restored your session")
    assert "my boat is called Kestrel" in text


async def test_a_profile_that_cannot_open_ends_the_chat_with_its_error(
    env: ModelServer, data_dir, monkeypatch
) -> None:
    import pytest

    from seelen.errors import ConfigError

    blocker = data_dir.parent / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SEELEN_DATA_DIR", str(blocker))
    with create_pipe_input() as pipe:
        repl, _ = terminal_repl(pipe)
        with pytest.raises(ConfigError, match="cannot write"):
            await asyncio.wait_for(repl.run_terminal(), 20)  # nobody typed anything
