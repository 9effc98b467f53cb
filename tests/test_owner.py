"""The warm owner and its thin clients, as real processes on one profile."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import asked, open_store, run_seelen, wait_gone, wait_until
from model_server import ModelServer, Reply

import seelen
from seelen.config import load_settings
from seelen.owner import wire
from seelen.owner.client import owner_status, request


def _echo(body: dict) -> Reply:
    return Reply(text=f"answer to {asked(body)}")


@pytest.fixture
def owner_env(env: ModelServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """The test model server, with asks going through a warm owner that is stopped after."""
    env.responder = _echo
    monkeypatch.setenv("SEELEN_OWNER", "true")
    yield env
    settings = load_settings()
    # Ask it to stop, without waiting: it finishes on its own, and the next test has its own
    # data dir (and so its own owner).
    request(wire.socket_path(settings), {"op": "stop"})


def _status() -> dict:
    status = owner_status(load_settings())
    assert status is not None, "no owner is running"
    return status


def test_a_client_starts_an_owner_and_a_second_reuses_it(
    owner_env: ModelServer, data_dir: Path
) -> None:
    assert run_seelen("server", "status").stdout.strip() == "not running"
    first = run_seelen("ask", "first question")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "answer to first question\n"
    pid = _status()["pid"]
    second = run_seelen("ask", "--json", "second question")
    assert second.returncode == 0, second.stderr
    assert '"reply": "answer to second question"' in second.stdout
    status = _status()
    assert status["pid"] == pid and status["answered"] == 2
    socket_file = data_dir / "default" / "owner.sock"
    assert stat.S_IMODE(socket_file.stat().st_mode) == 0o600
    store = open_store(data_dir)
    users = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert users == ["first question", "second question"]
    shown = run_seelen("server", "status")
    assert shown.returncode == 0 and f"running: pid {pid}" in shown.stdout
    assert run_seelen("server", "stop").stdout.strip() == "stopped"
    assert wait_gone(pid)


def test_a_killed_owner_is_replaced_and_no_turn_is_lost(
    owner_env: ModelServer, data_dir: Path
) -> None:
    assert run_seelen("ask", "before the kill").returncode == 0
    pid = _status()["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    after = run_seelen("ask", "after the kill")  # the socket file is stale now
    assert after.returncode == 0, after.stderr
    assert after.stdout == "answer to after the kill\n"
    assert _status()["pid"] != pid
    store = open_store(data_dir)
    texts = [t.text for t in store.turns(store.active_session().session_id)]
    assert texts == [
        "before the kill",
        "answer to before the kill",
        "after the kill",
        "answer to after the kill",
    ]


def test_an_owner_of_another_version_is_replaced(
    owner_env: ModelServer, data_dir: Path, tmp_path: Path
) -> None:
    # A real owner run from a copy of Seelen that calls itself another version.
    old = tmp_path / "old"
    shutil.copytree(Path(seelen.__file__).parent, old / "seelen")
    init = old / "seelen" / "__init__.py"
    init.write_text(init.read_text().replace(seelen.__version__, "0.0.1"))
    process = subprocess.Popen(
        [sys.executable, "-m", "seelen.owner"],
        env={**os.environ, "PYTHONPATH": str(old)},
        cwd=tmp_path,
    )
    try:
        wait_until(lambda: owner_status(load_settings()), 30, "the old owner never answered")
        assert _status()["version"].startswith("0.0.1+")
        result = run_seelen("ask", "are you new?")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "answer to are you new?\n"
        assert process.wait(timeout=15) == 0  # the old owner was asked to stop, and did
        assert _status()["version"].startswith(seelen.__version__ + "+")
    finally:
        if process.poll() is None:
            process.kill()


def test_an_owner_with_other_settings_is_replaced(owner_env: ModelServer) -> None:
    assert run_seelen("ask", "one").returncode == 0
    pid = _status()["pid"]
    result = run_seelen("ask", "two", env={"MAX_TOOL_ROUNDS": "2"})
    assert result.stdout == "answer to two\n"
    assert wait_gone(pid)
    assert _status()["pid"] != pid


def test_the_idle_timeout_ends_the_owner(owner_env: ModelServer) -> None:
    result = run_seelen("ask", "quick one", env={"SEELEN_IDLE_MINUTES": "0.01"})
    assert result.returncode == 0, result.stderr
    status = owner_status(load_settings({"SEELEN_IDLE_MINUTES": "0.01"}))
    assert status is not None
    assert wait_gone(status["pid"], seconds=20)
    assert not (Path(os.environ["SEELEN_DATA_DIR"]) / "default" / "owner.sock").exists()


def test_a_stale_socket_file_does_not_stop_a_client(owner_env: ModelServer, data_dir: Path) -> None:
    profile = data_dir / "default"
    profile.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(profile / "owner.sock"))
    stale.close()  # the file stays, nobody listens: what a crashed owner leaves
    result = run_seelen("ask", "still there?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer to still there?\n"


def test_eight_parallel_asks_share_one_owner_and_each_gets_its_own_answer(
    owner_env: ModelServer, data_dir: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    questions = [f"parallel {i}" for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda q: run_seelen("ask", q), questions))
    for question, result in zip(questions, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {question}\n"
    assert _status()["answered"] == 8
    store = open_store(data_dir)
    turns = store.turns(store.active_session().session_id)
    assert sorted(t.text for t in turns if t.role == "user") == sorted(questions)
    for question, reply in zip(turns[::2], turns[1::2], strict=True):
        assert reply.text == f"answer to {question.text}"


def test_an_open_chat_answers_asks_from_other_terminals(
    owner_env: ModelServer, data_dir: Path
) -> None:
    chat = subprocess.Popen(
        [sys.executable, "-m", "seelen", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert chat.stdin is not None
        chat.stdin.write("hello from the chat\n")
        chat.stdin.flush()

        def serving() -> bool:
            assert chat.poll() is None, chat.communicate()
            return owner_status(load_settings()) is not None

        wait_until(serving, 30, "the chat never answered as the profile's owner")
        assert _status()["kind"] == "chat"
        asked = run_seelen("ask", "from another terminal")  # the chat's pipe stays open
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout == "answer to from another terminal\n"
        assert run_seelen("server", "stop").stdout.strip() == "not running"  # a chat stays
        out, _err = chat.communicate("and back in the chat\n", timeout=30)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0
    assert "answer to hello from the chat" in out and "answer to and back in the chat" in out
    store = open_store(data_dir)
    users = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert users == ["hello from the chat", "from another terminal", "and back in the chat"]
