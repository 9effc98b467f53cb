"""`seelen ask … | head`: a reader that stops reading ends the printing, never the answer.

The reply is stored whole (the next chat shows it), no traceback is printed, and the exit
status is the answer's. Real processes: a pipe closed by its reader is process behaviour.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import open_store, run_cli, wait_until
from model_server import ModelServer, Reply

# Words enough that the reply goes on well after the reader has left.
REPLY = " ".join(f"word{n}" for n in range(400))


def ask_and_close_early(question: str) -> tuple[int, str]:
    """Run `seelen ask QUESTION`, read a few bytes of its stdout, then close the pipe."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "seelen", "ask", question],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(20)
    assert first.startswith(b"word0")
    proc.stdout.close()  # the reader leaves, as `head -c 20` does
    err = proc.stderr.read().decode()
    return proc.wait(60), err


@pytest.mark.parametrize("through_owner", [False, True], ids=["in-process", "owner"])
def test_a_reader_that_leaves_early_still_gets_the_reply_stored_whole(
    env: ModelServer, data_dir, monkeypatch: pytest.MonkeyPatch, through_owner: bool
) -> None:
    env.responder = lambda body: Reply(text=REPLY, chunk_delay=0.002)
    if through_owner:
        monkeypatch.setenv("SEELEN_OWNER", "true")
    code, err = ask_and_close_early("tell me many words")
    if through_owner:
        from seelen.client import place
        from seelen.client.connect import request
        from seelen.config import load_settings
        from seelen.protocol import calls

        request(place.socket_path(load_settings()), calls.Stop())
    assert code == 0, err
    assert "Traceback" not in err and "error" not in err, err
    store = open_store(data_dir)
    try:
        session = store.active_session()
        assert session is not None
        turns = [(t.role, t.text) for t in store.turns(session.session_id)]
    finally:
        store.close()
    assert turns == [("user", "tell me many words"), ("assistant", REPLY)]


def test_a_client_killed_mid_answer_still_gets_the_reply_stored_whole(
    env: ModelServer, data_dir, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seelen.client import place
    from seelen.client.connect import request
    from seelen.config import load_settings
    from seelen.protocol import calls

    env.responder = lambda body: Reply(text=REPLY, chunk_delay=0.002)
    monkeypatch.setenv("SEELEN_OWNER", "true")
    proc = subprocess.Popen(
        [sys.executable, "-m", "seelen", "ask", "tell me many words"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    assert proc.stdout is not None
    assert proc.stdout.read(5) == b"word0"
    proc.kill()  # the owner loses its client in the middle of the answer
    proc.wait(30)

    def reply_stored() -> bool:
        store = open_store(data_dir)
        try:
            session = store.active_session()
            return session is not None and [t.role for t in store.turns(session.session_id)] == [
                "user",
                "assistant",
            ]
        finally:
            store.close()

    wait_until(reply_stored, 60, "the owner never stored the reply of the killed client")
    request(place.socket_path(load_settings()), calls.Stop())
    store = open_store(data_dir)
    try:
        session = store.active_session()
        assert session is not None
        assert store.turns(session.session_id)[-1].text == REPLY
    finally:
        store.close()


def run_with_stdout_closed(*args: str) -> tuple[int, str]:
    """Run `seelen ARGS` with a reader that has left before the first line comes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "seelen", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # every write of the command meets a pipe without a reader
    err = proc.stderr.read().decode()
    return proc.wait(60), err


def test_any_command_whose_reader_leaves_does_its_work_and_exits_with_its_own_status(
    env: ModelServer, data_dir
) -> None:
    """`seelen export | head -1` exited 1 with no word (click's answer to a broken pipe), so
    a script with `set -o pipefail` failed where nothing went wrong; and a command that
    changes memory must not stop halfway because nobody reads what it says."""
    env.enqueue("Noted.", "Noted too.")
    for question in ("my kayak is red", "my tent is green"):  # in process: only the setup
        assert run_cli("ask", question).returncode == 0
    store = open_store(data_dir)
    try:
        session = store.active_session()
        assert session is not None
        kayak = store.turns(session.session_id)[0].text_id
    finally:
        store.close()
    for args in (("export",), ("sessions", "list"), ("memory", "forget", kayak)):
        code, err = run_with_stdout_closed(*args)
        assert (code, err) == (0, ""), args
    store = open_store(data_dir)
    try:
        texts = [t.text for t in store.turns(session.session_id)]
    finally:
        store.close()
    assert "my kayak is red" not in texts and "my tent is green" in texts
