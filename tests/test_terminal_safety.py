"""Control characters a model sends (ESC, NUL, BEL) reach no terminal as they are."""

from __future__ import annotations

import io
import json

from helpers import run_cli
from model_server import ModelServer
from rich.console import Console

HOSTILE = "Sure.\x1b]0;pwned\x07 \x1b[2J\x00done"


def assert_harmless(shown: str) -> None:
    assert "\x1b]0;pwned" not in shown and "\x1b[2J" not in shown
    assert "\x00" not in shown and "\x07" not in shown
    assert "␛]0;pwned␇" in shown and "␛[2J␀done" in shown


def test_a_piped_chat_and_ask_show_a_reply_s_control_characters(env: ModelServer) -> None:
    env.enqueue(HOSTILE, HOSTILE, HOSTILE)
    chat = run_cli("chat", stdin="hello\n")
    assert chat.returncode == 0, chat.stderr
    assert_harmless(chat.stdout)
    ask = run_cli("ask", "hello")
    assert ask.returncode == 0, ask.stderr
    assert_harmless(ask.stdout)
    exact = run_cli("ask", "--json", "hello")  # JSON keeps the text exactly, escaped
    assert json.loads(exact.stdout)["reply"] == HOSTILE


async def test_a_reply_rendered_live_in_a_terminal_is_harmless(env: ModelServer) -> None:
    from seelen.chat.render import EventPrinter
    from seelen.protocol.events import Done, TextDelta

    async def events():
        yield TextDelta(text=HOSTILE[:9])
        yield TextDelta(text=HOSTILE[9:])
        yield Done(text=HOSTILE)

    out = io.StringIO()
    await EventPrinter(Console(file=out, force_terminal=True, width=100)).render(events())
    assert_harmless(out.getvalue())
