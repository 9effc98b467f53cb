"""`seelen memory forget` while the profile is held: it goes through the holder (an open chat,
the warm owner) instead of waiting for it to end, and the holder talks on afterwards.

Real processes: a chat open in another terminal is a process. The commands beside it run in
the test's own process (`run_cli`): a process other than the chat's, as in a second terminal.
"""

from __future__ import annotations

from pathlib import Path

from helpers import active_texts, open_store, owner_serves, piped_chat, run_cli, wait_until
from model_server import ModelServer

from seelen.client import place
from seelen.client.connect import request
from seelen.config import load_settings
from seelen.protocol import calls


def test_forget_does_not_wait_for_an_open_chat_which_talks_on(
    owner_env: ModelServer, data_dir: Path
) -> None:
    """Forget waited ("waiting for the Seelen chat in another terminal…") until the chat
    closed, however long that was."""
    chat = piped_chat()
    try:
        assert chat.stdin is not None
        chat.stdin.write("my locker code is 4711\n")
        chat.stdin.write("my bike is blue\n")
        chat.stdin.flush()
        wait_until(lambda: owner_serves("chat", chat), 60, "the chat never served the profile")
        wait_until(lambda: len(active_texts(data_dir)) == 4, 60, "the chat never answered")
        store = open_store(data_dir)
        try:
            hits = store.search_turns_text("locker", 5)
            [code] = [t for t in store.get_turns(i for i, _ in hits).values() if t.role == "user"]
        finally:
            store.close()
        forgot = run_cli("memory", "forget", code.text_id[:8])
        assert forgot.returncode == 0, forgot.stderr
        assert "waiting for" not in forgot.stderr
        assert forgot.stdout == f"Forgot {code.text_id} (1 text).\n"
        assert "my locker code is 4711" not in active_texts(data_dir)
        out, err = chat.communicate("still there?\n", timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0 and "answer to still there?" in out, err
    assert active_texts(data_dir)[-2:] == ["still there?", "answer to still there?"]


def test_forgetting_the_session_an_owner_talks_in_leaves_it_one_to_talk_on_in(
    owner_env: ModelServer, data_dir: Path
) -> None:
    """Through the owner, the session it talked in was deleted under it, and its next turn
    failed ("FOREIGN KEY constraint failed"): the question was lost. It is emptied instead."""
    try:
        assert run_cli("ask", "my pin is 1234").returncode == 0
        store = open_store(data_dir)
        try:
            session = store.active_session()
            assert session is not None
        finally:
            store.close()
        forgot = run_cli("memory", "forget", "--session", session.session_id[:8])
        assert forgot.returncode == 0, forgot.stderr
        assert active_texts(data_dir) == []
        again = run_cli("ask", "what now?")
        assert again.returncode == 0, again.stderr
        assert active_texts(data_dir) == ["what now?", "answer to what now?"]
    finally:
        request(place.socket_path(load_settings()), calls.Stop())
