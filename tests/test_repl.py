"""The interactive REPL, driven through prompt-toolkit's pipe input."""

from __future__ import annotations

import asyncio
import io
import os
import signal

from helpers import asked, wait_until_async
from model_server import ModelServer, Reply
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from seelen.app import build_app
from seelen.chat.repl import COMMANDS, Repl
from seelen.chat.slash import SlashCompleter, unique_commands
from seelen.config import load_settings
from seelen.memory.context import users_words
from seelen.store import ARCHIVED


def make_repl(pipe) -> tuple[Repl, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    app = build_app(load_settings())
    return Repl(app, console, pt_input=pipe, pt_output=DummyOutput()), out


async def test_typed_lines_are_answered_and_exit_keeps_the_session(env: ModelServer) -> None:
    env.enqueue("Hello Grace!")
    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.start()
        pipe.send_text("I am Grace\r")
        pipe.send_text("/nonsense\r")
        pipe.send_text("/exit\r")
        await asyncio.wait_for(repl.run_interactive(), 20)
    text = out.getvalue()
    assert "Hello Grace!" in text
    assert "Unknown command /nonsense" in text
    session = repl.app.sessions.current
    assert session.status == "active"
    assert [t.text for t in repl.app.sessions.live_turns()] == ["I am Grace", "Hello Grace!"]
    assert len(env.chat_requests()) == 1
    await repl.app.aclose()


async def test_alt_enter_inserts_a_newline_into_one_message(env: ModelServer) -> None:
    with create_pipe_input() as pipe:
        repl, _ = make_repl(pipe)
        await repl.start()
        pipe.send_text("first line\x1b\rsecond line\r/q\r")
        await asyncio.wait_for(repl.run_interactive(), 20)
    assert repl.app.sessions.live_turns()[0].text == "first line\nsecond line"
    await repl.app.aclose()


async def test_ctrl_d_exits_and_ctrl_c_twice_exits(env: ModelServer) -> None:
    with create_pipe_input() as pipe:
        repl, _ = make_repl(pipe)
        await repl.start()
        pipe.send_text("\x04")
        await asyncio.wait_for(repl.run_interactive(), 10)
    with create_pipe_input() as pipe:
        repl2, out = make_repl(pipe)
        await repl2.start()
        pipe.send_text("\x03\x03")
        await asyncio.wait_for(repl2.run_interactive(), 10)
    assert "press Ctrl-C again" in out.getvalue()
    await repl.app.aclose()
    await repl2.app.aclose()


async def test_ctrl_c_on_a_typed_line_keeps_it_in_history(env: ModelServer) -> None:
    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.start()
        loop = asyncio.create_task(repl.run_interactive())
        pipe.send_text("a long message I did not mean to lose\x03")
        await wait_until_async(lambda: "line cleared" in out.getvalue(), 20, "Ctrl-C ignored")
        pipe.send_text("\x1b[A\r")  # arrow up brings it back; Enter sends it
        await wait_until_async(repl.app.sessions.live_turns, 20, "the line was never sent")
        pipe.send_text("/q\r")
        await asyncio.wait_for(loop, 20)
    assert "line cleared" in out.getvalue()
    assert repl.app.sessions.live_turns()[0].text == "a long message I did not mean to lose"
    await repl.app.aclose()


async def test_restored_session_is_shown_on_start(env: ModelServer) -> None:
    env.enqueue("Your cat is called Miso.")
    with create_pipe_input() as pipe:
        repl, _ = make_repl(pipe)
        await repl.start()
        await repl.handle("my cat is called Miso")
        await repl.app.aclose()
    with create_pipe_input() as pipe:
        repl2, out = make_repl(pipe)
        await repl2.start()
    text = out.getvalue()
    assert "Restored your session" in text and "my cat is called Miso" in text
    await repl2.app.aclose()


async def test_ctrl_c_stops_the_reply_and_keeps_what_was_shown(env: ModelServer) -> None:
    env.enqueue(Reply(text=" ".join(f"w{i}" for i in range(100)), chunk_delay=0.05))
    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.start()

        async def press_ctrl_c_mid_reply() -> None:
            await wait_until_async(lambda: "w2" in out.getvalue(), 20, "no reply shown")
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C signal

        presser = asyncio.create_task(press_ctrl_c_mid_reply())
        await asyncio.wait_for(repl.handle("count to a hundred"), 30)
        await presser
    assert "(stopped; your message and the reply so far are kept" in out.getvalue()
    reply = repl.app.sessions.live_turns()[-1]
    assert reply.meta.get("interrupted") is True
    assert reply.text.startswith("w0 w1") and "w99" not in reply.text
    # The chat goes on after the interruption.
    env.enqueue("still here")
    await repl.handle("hello?")
    assert repl.app.sessions.live_turns()[-1].text == "still here"
    await repl.app.aclose()


async def test_save_archives_and_starts_a_new_session(env: ModelServer) -> None:
    env.responder = lambda body: Reply(text="A short summary.")
    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.start()
        await repl.handle("we talked about gardening")
        old = repl.app.sessions.current.session_id
        await repl.handle("/s")
    assert repl.app.store.get_session(old).status == ARCHIVED
    assert repl.app.sessions.current.session_id != old
    assert "Session archived" in out.getvalue()
    await repl.app.aclose()


async def test_reset_clears_the_current_session(env: ModelServer) -> None:
    with create_pipe_input() as pipe:
        repl, _ = make_repl(pipe)
        await repl.start()
        await repl.handle("something embarrassing")
        await repl.handle("/reset")
    assert repl.app.sessions.live_turns() == []
    await repl.app.aclose()


async def test_a_lone_r_deletes_nothing(env: ModelServer) -> None:
    """The alias /r was /reset: two keys, typed for /retry, forgot the session for good."""
    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.start()
        await repl.handle("my locker code is 4711")
        await repl.handle("/r")
    assert [t.text for t in repl.app.sessions.live_turns()][:1] == ["my locker code is 4711"]
    assert "Unknown command /r" in out.getvalue()
    await repl.app.aclose()


async def test_a_command_that_takes_nothing_refuses_words_after_it(env: ModelServer) -> None:
    """ "/reset the topic" reset the session for good and dropped "the topic"; "/save and then
    tell me" archived and dropped the rest: the words after a command taking none are said
    back unused, and nothing is done."""
    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.start()
        await repl.handle("my locker code is 4711")
        assert await repl.handle("/reset the topic")
        assert await repl.handle("/exit now")
    assert [t.text for t in repl.app.sessions.live_turns()][:1] == ["my locker code is 4711"]
    said = out.getvalue()
    assert "/reset takes nothing after it: nothing done" in said
    assert "/exit takes nothing after it: nothing done" in said
    await repl.app.aclose()


async def test_help_in_30_columns_keeps_its_words_whole(env: ModelServer) -> None:
    """At 30 columns /help cut each description to a few letters ("knowl…"): each now goes
    under its command's names (a hit's id: tests/test_small_edges.py)."""
    out = io.StringIO()
    app = build_app(load_settings())
    await Repl(app, Console(file=out, force_terminal=False, width=30)).handle("/help")
    helped = out.getvalue()
    assert max(len(line) for line in helped.splitlines()) <= 30 and "…" not in helped
    for cmd in unique_commands():
        assert " ".join(cmd.help.split()) in " ".join(helped.split())
    await app.aclose()


async def test_help_lists_every_command_and_completion_offers_them(env: ModelServer) -> None:
    from prompt_toolkit.document import Document

    with create_pipe_input() as pipe:
        repl, out = make_repl(pipe)
        await repl.handle("/help")
    text = out.getvalue()
    for name in (
        "/reset",
        "/save",
        "/s",
        "/saveandexit",
        "/sq",
        "/exit",
        "/quit",
        "/q",
        "/help",
        "/h",
        "/retry",
    ):
        assert name in COMMANDS and name in text
    completions = [c.text for c in SlashCompleter().get_completions(Document("/sa"), None)]
    assert "/save" in completions and "/saveandexit" in completions
    assert list(SlashCompleter().get_completions(Document("hello /sa"), None)) == []
    await repl.app.aclose()


async def test_help_gives_every_command_s_description_one_column(env: ModelServer) -> None:
    """Each description followed its names two spaces on, so no two lines lined up."""
    repl, out = make_repl(None)
    await repl.handle("/help")
    lines = [line for line in out.getvalue().splitlines() if line.startswith("  /")]
    assert len(lines) == len(unique_commands())
    starts = {line.index(cmd.help) for line, cmd in zip(lines, unique_commands(), strict=True)}
    assert len(starts) == 1, out.getvalue()
    await repl.app.aclose()


async def test_incognito_remembers_within_itself_and_stores_nothing(env: ModelServer) -> None:
    env.responder = lambda body: Reply(
        text=" | ".join(users_words(m["content"]) for m in body["messages"] if m["role"] == "user")
    )
    repl, out = make_repl(None)
    await repl.start()
    await repl.handle("kept before")
    await repl.handle("/incognito")
    await repl.handle("secret one")
    await repl.handle("secret two")
    await repl.handle("/incognito")
    await repl.handle("kept after")
    # Inside incognito the earlier secret is context; after it, nothing of it remains.
    assert "kept before | secret one | secret two" in out.getvalue()
    assert asked(env.last_messages()) == "kept after"
    assert not any("secret" in str(m) for m in env.last_messages())
    store = repl.app.store
    texts = [t.text for s in store.list_sessions(-1) for t in store.turns(s.session_id)]
    assert texts == ["kept before", "kept before", "kept after", "kept before | kept after"]
    assert len(store.list_sessions(-1)) == 1
    await repl.app.aclose()


async def test_lines_typed_incognito_stay_out_of_the_prompt_history_file(
    env: ModelServer, data_dir
) -> None:
    """/incognito said "nothing you say now is saved", yet each line went into prompt_history
    in the profile, for ↑ in every later chat: on disk, in plain text."""
    env.responder = lambda body: Reply(text="noted")
    with create_pipe_input() as pipe:
        repl, _ = make_repl(pipe)
        await repl.start()
        pipe.send_text("kept before\r/incognito\rmy secret words\r")
        pipe.send_text("/incognito\rkept after\r/q\r")
        await asyncio.wait_for(repl.run_interactive(), 20)
    kept = (data_dir / "default" / "prompt_history").read_text("utf-8")
    assert "kept before" in kept and "kept after" in kept and "/incognito" in kept
    assert "secret" not in kept
    await repl.app.aclose()


async def test_a_terminal_shows_thinking_until_the_first_word() -> None:
    from seelen.chat.render import EventPrinter
    from seelen.protocol.events import Done, Notice, TextDelta

    seen_before_words: list[str] = []
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=60)

    async def events():
        yield Notice(message="recalled nothing")
        # The model has not answered yet: the live region (redrawn 12 times a second) says so.
        await wait_until_async(lambda: "thinking…" in out.getvalue(), 10, "no 'thinking…'")
        seen_before_words.append(out.getvalue())
        yield TextDelta(text="Hello **there**")
        yield Done(text="Hello **there**")

    await EventPrinter(console).render(events())
    assert "thinking…" in seen_before_words[0]
    assert "recalled nothing" in seen_before_words[0]
    assert "Hello" in out.getvalue() and "there" in out.getvalue()
