"""The chat in a real terminal (a pty): what the user sees while a reply streams."""

from __future__ import annotations

from pathlib import Path

from helpers import Terminal, open_store
from model_server import ModelServer, Reply


def test_ctrl_c_during_a_reply_shows_it_once(env: ModelServer, data_dir: Path) -> None:
    env.enqueue(Reply(text="word " * 300, chunk_delay=0.02))
    with Terminal("chat") as terminal:
        assert terminal.read_until("›"), terminal.text
        terminal.send("tell me a long story\r")
        assert terminal.read_until("word word word"), terminal.text
        terminal.send("typed ahead")  # neither this nor Ctrl-C may be echoed into the reply
        # (Ctrl-C then discards it, as a terminal discards its pending input on an interrupt.)
        terminal.send("\x03")
        assert terminal.read_until("(stopped;"), terminal.text
        stopped = terminal.output.index(b"(stopped;")
        assert terminal.read_until("›", after=stopped), terminal.text  # the next prompt
        terminal.send("\x15\x04")  # Ctrl-U clears the line, Ctrl-D leaves
        assert terminal.wait() == 0, terminal.text
    shown = terminal.text
    # The terminal's echo of ^C (and of keys typed meanwhile) moved the cursor inside the
    # live region, whose repaint then left the reply's first line and printed it again.
    assert "^C" not in shown
    assert "typed ahead" not in shown[: shown.index("(stopped;")]
    store = open_store(data_dir)
    reply = store.turns(store.active_session().session_id)[-1]
    assert reply.role == "assistant" and reply.meta.get("interrupted")
    assert reply.text.startswith("word word word")
    store.close()


def test_leaving_while_another_terminal_is_answered_says_what_it_waits_for(
    owner_env: ModelServer, data_dir: Path
) -> None:
    from helpers import asked, owner_serves, wait_until
    from test_owner import _finish, _Gates, _start_asks

    owner_env.responder = gates = _Gates("from afar")
    with Terminal("chat") as terminal:
        try:
            assert terminal.read_until("›"), terminal.text
            wait_until(lambda: owner_serves("chat", terminal.proc), 30, "the chat never served")
            asks = _start_asks("from afar")  # the model answers it once the gate opens
            wait_until(
                lambda: any(asked(b) == "from afar" for b in owner_env.chat_requests()),
                30,
                "the question never reached the model",
            )
            terminal.send("\x04")  # Ctrl-D: (before: nothing on screen until that answer)
            waits = "finishing the answer to a question from another terminal…"
            assert terminal.read_until(waits, 10), terminal.text
        finally:
            gates.open()
        assert terminal.wait() == 0, terminal.text
    assert terminal.text.index(waits) < terminal.text.index("(answered a question from another")
    assert _finish(asks) == [(0, "answer to from afar\n", "")]


def test_a_dumb_terminal_shows_each_reply_before_the_next_prompt(
    env: ModelServer, data_dir: Path
) -> None:
    """TERM=dumb (Emacs' shell, some CI terminals): the reply was written only once the next
    prompt mark showed, so each read "› the answer" on the line where the user types."""
    env.enqueue(Reply(text="the answer is here"))
    with Terminal("chat", env={"TERM": "dumb"}) as terminal:
        assert terminal.read_until("›"), terminal.text
        sent = len(terminal.output)
        terminal.send("hello\r")
        assert terminal.read_until("the answer is here", after=sent), terminal.text
        assert terminal.read_until("›", after=sent), terminal.text
        shown = terminal.output[sent:]
        assert shown.index(b"the answer is here") < shown.index("›".encode()), terminal.text
        assert "› the answer".encode() not in terminal.output
        terminal.send("/exit\r")  # a line typed early waits; an early Ctrl-D has no line
        assert terminal.wait() == 0, terminal.text
