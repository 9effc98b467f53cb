"""The warm owner and its thin clients, as real processes on one profile."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import (
    active_texts,
    ask_stopped,
    asked,
    echo,
    open_store,
    owner_serves,
    piped_chat,
    run_cli,
    run_seelen,
    wait_gone,
    wait_until,
    wait_until_async,
)
from model_server import ModelServer, Reply

import seelen
from seelen.client import place
from seelen.client.connect import owner_status, request
from seelen.config import load_settings
from seelen.protocol import calls


def _status() -> calls.OwnerStatus:
    status = owner_status(load_settings())
    assert status is not None, "no owner is running"
    return status


def test_a_client_starts_an_owner_and_a_second_reuses_it_named_relative(
    owner_env: ModelServer, data_dir: Path
) -> None:
    """The second client names the data dir relative (`--data-dir data`): the owner, given
    the folder absolute, took such a client for one of other settings and refused it, so each
    ask started owners, stopped them and answered in its own process (3 s an ask, not 0.2)."""
    assert data_dir == Path.cwd() / "data"
    idle = run_cli("server", "status")  # an answer, not an error: exit 0
    assert (idle.returncode, idle.stdout, idle.stderr) == (0, "not running\n", "")
    first = run_cli("ask", "first question")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "answer to first question\n"
    pid = _status().pid
    second = run_cli("--data-dir", "data", "ask", "--json", "second question")
    assert second.returncode == 0, second.stderr
    assert '"reply": "answer to second question"' in second.stdout
    status = _status()
    assert status.pid == pid and status.answered == 2
    socket_file = data_dir / "default" / "owner.sock"
    assert stat.S_IMODE(socket_file.stat().st_mode) == 0o600
    store = open_store(data_dir)
    users = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert users == ["first question", "second question"]
    shown = run_cli("server", "status")
    assert shown.returncode == 0 and f"running: pid {pid}" in shown.stdout
    assert run_cli("server", "stop").stdout.strip() == "stopped"
    assert wait_gone(pid)


def test_an_owner_killed_while_it_starts_is_started_again(
    owner_env: ModelServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starting owner killed by a signal (not failing on its own) is launched once more,
    as a running owner killed is replaced; one that fails on its own is not."""
    from seelen.client import connect as client

    real, launched = client.launch_owner, []
    suicide = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]

    def launch(settings: object, env: dict[str, str]) -> subprocess.Popen[bytes]:
        launched.append(env)
        if len(launched) == 1:  # the first start dies by a signal before it serves
            return subprocess.Popen(suicide)
        return real(settings, env)  # type: ignore[arg-type]

    monkeypatch.setattr(client, "launch_owner", launch)
    sock = client.connect(load_settings())
    assert sock is not None and len(launched) == 2
    sock.close()
    assert _status().pid > 0
    request(place.socket_path(load_settings()), calls.Stop())
    wait_until(lambda: owner_status(load_settings()) is None, 30, "the owner did not stop")

    launched.clear()
    failing = [sys.executable, "-c", "raise SystemExit(1)"]
    monkeypatch.setattr(
        client, "launch_owner", lambda *_: launched.append(1) or subprocess.Popen(failing)
    )
    assert client.connect(load_settings()) is None and launched == [1]  # not started again


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
        assert _status().version.startswith("0.0.1+")
        result = run_cli("ask", "are you new?")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "answer to are you new?\n"
        assert process.wait(timeout=15) == 0  # the old owner was asked to stop, and did
        assert _status().version.startswith(seelen.__version__ + "+")
    finally:
        if process.poll() is None:
            process.kill()


def test_an_owner_with_other_settings_is_replaced(owner_env: ModelServer) -> None:
    assert run_cli("ask", "one").returncode == 0
    pid = _status().pid
    result = run_cli("ask", "two", env={"MAX_TOOL_ROUNDS": "2"})
    assert result.stdout == "answer to two\n"
    assert wait_gone(pid)
    assert _status().pid != pid


def test_the_idle_timeout_ends_the_owner(owner_env: ModelServer) -> None:
    # Three seconds: long enough to see the owner after the ask, even on a busy machine. It
    # hands over to a resting owner after a third of it, which ends after its own three.
    result = run_cli("ask", "quick one", env={"SEELEN_IDLE_MINUTES": "0.05"})
    assert result.returncode == 0, result.stderr
    settings = load_settings({"SEELEN_IDLE_MINUTES": "0.05"})
    status = owner_status(settings)
    assert status is not None
    assert wait_gone(status.pid, seconds=20)
    socket_file = Path(os.environ["SEELEN_DATA_DIR"]) / "default" / "owner.sock"
    wait_until(
        lambda: owner_status(settings) is None and not socket_file.exists(),
        30,
        "an owner (or its socket) stayed after the idle timeout",
    )


def test_an_owner_whose_profile_folder_is_removed_ends(
    owner_env: ModelServer, data_dir: Path
) -> None:
    result = run_cli("ask", "quick one")
    assert result.returncode == 0, result.stderr
    status = _status()
    shutil.rmtree(data_dir / "default")  # e.g. a temporary data dir, cleaned up
    # No client can reach it any more (its socket is gone), and it would hold the profile.
    assert wait_gone(status.pid, seconds=20)
    result = run_cli("ask", "a new memory")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer to a new memory\n"


def test_a_stale_socket_file_does_not_stop_a_client(owner_env: ModelServer, data_dir: Path) -> None:
    profile = data_dir / "default"
    profile.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(profile / "owner.sock"))
    stale.close()  # the file stays, nobody listens: what a crashed owner leaves
    result = run_cli("ask", "still there?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer to still there?\n"
    assert _status().answered == 1  # a warm owner took the stale file's place and answered


def test_an_ephemeral_ask_through_the_owner_writes_no_session(
    owner_env: ModelServer, data_dir: Path
) -> None:
    # The owner opened the profile's session when it started: a new profile kept an empty
    # session row after `ask --ephemeral`, listed as "active, 0 turns".
    result = run_cli("ask", "--ephemeral", "forget me")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer to forget me\n"
    assert _status().answered == 1  # the owner answered it
    assert open_store(data_dir).list_sessions() == []
    assert run_cli("sessions", "list").stdout.strip() == "No session yet."
    kept = run_cli("ask", "keep me")  # the first kept question makes the session
    assert kept.returncode == 0, kept.stderr
    store = open_store(data_dir)
    (session,) = store.list_sessions()
    assert [t.text for t in store.turns(session.session_id)] == ["keep me", "answer to keep me"]


def test_parallel_asks_share_one_owner_and_each_gets_its_own_answer(
    owner_env: ModelServer, data_dir: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    # Four: more clients at once than the owner answers (one), each of its own process.
    questions = [f"parallel {i}" for i in range(4)]
    with ThreadPoolExecutor(len(questions)) as pool:
        results = list(pool.map(lambda q: run_seelen("ask", q), questions))
    for question, result in zip(questions, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {question}\n"
    assert _status().answered == len(questions)
    store = open_store(data_dir)
    turns = store.turns(store.active_session().session_id)
    assert sorted(t.text for t in turns if t.role == "user") == sorted(questions)
    for question, reply in zip(turns[::2], turns[1::2], strict=True):
        assert reply.text == f"answer to {question.text}"


def test_an_open_chat_answers_asks_from_other_terminals(
    owner_env: ModelServer, data_dir: Path
) -> None:
    chat = piped_chat()
    try:
        assert chat.stdin is not None
        chat.stdin.write("hello from the chat\n")
        chat.stdin.flush()
        wait_until(
            lambda: owner_serves("chat", chat), 30, "the chat never answered as the profile's owner"
        )
        assert _status().kind == "chat"
        asked = run_cli("ask", "from another terminal")  # the chat's pipe stays open
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout == "answer to from another terminal\n"
        assert run_cli("server", "stop").stdout.strip() == "not running"  # a chat stays
        out, _err = chat.communicate("and back in the chat\n", timeout=30)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0
    assert "answer to hello from the chat" in out and "answer to and back in the chat" in out
    store = open_store(data_dir)
    users = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert users == ["hello from the chat", "from another terminal", "and back in the chat"]


# --- stopping the owner never drops a client ---------------------------------------------


class _Gates:
    """The model answers a question that starts with a gate's name only once it is open."""

    def __init__(self, *names: str) -> None:
        self.gates = {name: threading.Event() for name in names}

    def __call__(self, body: dict) -> Reply:
        question = asked(body)
        for name, gate in self.gates.items():
            if question.startswith(name):
                gate.wait(60)
        return echo(body)

    def open(self, name: str | None = None) -> None:
        for key, gate in self.gates.items():
            if name in (None, key):
                gate.set()


def _wait_stopping(socket_file: Path, process: subprocess.Popen[str]) -> None:
    """Until the owner behind `socket_file` takes no new connection (it is stopping)."""

    def stopping() -> bool:
        assert process.poll() is None, process.communicate()
        return not socket_file.exists()

    wait_until(stopping, 60, "the owner kept taking connections")


def _start_asks(*questions: str, ephemeral: bool = False) -> list[subprocess.Popen[str]]:
    extra = ["--ephemeral"] if ephemeral else []
    return [
        subprocess.Popen(
            [sys.executable, "-m", "seelen", "ask", *extra, q],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for q in questions
    ]


def _finish(asks: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    results = []
    for process in asks:
        out, err = process.communicate(timeout=90)
        results.append((process.returncode, out, err))
    return results


def _wait_for_clients(count: int, seconds: float = 60) -> None:
    """Until the profile's owner holds `count` connections (answering or queued)."""

    def holding() -> bool:
        status = owner_status(load_settings())
        return status is not None and status.clients >= count

    wait_until(holding, seconds, f"the owner never held {count} clients")


def _answered_once(data_dir: Path, questions: list[str]) -> None:
    """Every question is stored exactly once, followed by its own answer."""
    store = open_store(data_dir)
    turns = [t for s in store.list_sessions() for t in store.turns(s.session_id)]
    for question in questions:
        asked = [i for i, t in enumerate(turns) if t.text == question]
        assert len(asked) == 1, f"{question!r} stored {len(asked)} times"
        assert turns[asked[0] + 1].text == f"answer to {question}"


def test_a_reindex_stopping_the_owner_answers_every_ask_it_took(
    owner_env: ModelServer, data_dir: Path
) -> None:
    assert run_cli("ask", "warm up").returncode == 0
    pid = _status().pid
    owner_env.responder = gates = _Gates("queued", "just looking")
    try:
        questions = [f"queued {i}" for i in range(3)]
        asks = _start_asks(*questions) + _start_asks("just looking", ephemeral=True)
        _wait_for_clients(4)
        reindex = subprocess.Popen(  # it stops the owner to take the profile
            [sys.executable, "-m", "seelen", "memory", "reindex"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_stopping(data_dir / "default" / "owner.sock", reindex)
    finally:
        gates.open()
    _out, err = reindex.communicate(timeout=90)
    assert reindex.returncode == 0, err
    assert wait_gone(pid)
    for code, out, ask_err in _finish(asks):
        assert code == 0 and "internal error" not in ask_err, ask_err
        assert out.startswith("answer to ")
    _answered_once(data_dir, questions)


def test_a_chat_opening_and_leaving_answers_the_asks_it_took(
    owner_env: ModelServer, data_dir: Path
) -> None:
    assert run_cli("ask", "warm up").returncode == 0
    owner_env.responder = gates = _Gates("before the chat", "as the chat leaves")
    socket_file = data_dir / "default" / "owner.sock"
    chat = piped_chat()
    try:
        before = [f"before the chat {i}" for i in range(2)]
        asks = _start_asks(*before)
        _wait_for_clients(2)
        assert chat.stdin is not None
        chat.stdin.write("hello from the chat\n")  # opening, it stops the owner
        chat.stdin.flush()
        _wait_stopping(socket_file, chat)
        gates.open("before the chat")
        # Asked while the chat opens: they wait for it, and it answers them.
        during = [f"while the chat opens {i}" for i in range(2)]
        asks += _start_asks(*during)
        wait_until(lambda: owner_serves("chat", chat), 60, "the chat never served the profile")
        last = [f"as the chat leaves {i}" for i in range(2)]
        asks += _start_asks(*last)

        def all_connected() -> bool:  # every ask still running is connected to the chat
            running = sum(1 for a in asks if a.poll() is None)
            status = owner_status(load_settings())
            return status is not None and status.clients >= running

        wait_until(all_connected, 60, "the asks never reached the chat")
        chat.stdin.close()  # the chat leaves
        _wait_stopping(socket_file, chat)
    finally:
        gates.open()
    assert chat.wait(timeout=90) == 0
    for code, answer, ask_err in _finish(asks):
        assert code == 0 and "internal error" not in ask_err, ask_err
        assert answer.startswith("answer to ")
    _answered_once(data_dir, [*before, *during, *last, "hello from the chat"])


def test_an_owner_killed_mid_answer_says_the_question_is_saved_and_is_replaced(
    owner_env: ModelServer, data_dir: Path
) -> None:
    """A killed owner leaves its socket file behind, stale: the next ask starts a new owner,
    which answers; no turn is lost."""
    assert run_cli("ask", "warm up").returncode == 0
    pid = _status().pid
    owner_env.responder = lambda body: Reply(text="a slow answer " * 20, chunk_delay=0.2)
    (ask,) = _start_asks("the question that stays")
    # The question is stored before the model is called.
    wait_until(
        lambda: len(owner_env.chat_requests()) >= 2, 60, "the question never reached the model"
    )
    os.kill(pid, signal.SIGKILL)
    ((code, _out, err),) = _finish([ask])
    assert code == 1
    assert "internal error" not in err
    assert "stopped while answering" in err and "your question is saved" in err
    store = open_store(data_dir)
    users = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert users == ["warm up", "the question that stays"]
    owner_env.responder = echo
    again = run_cli("ask", "and now?")  # a fresh owner takes over
    assert again.returncode == 0 and again.stdout == "answer to and now?\n", again.stderr
    assert _status().pid != pid
    kept = ["warm up", "answer to warm up", "the question that stays", "and now?"]
    assert active_texts(data_dir) == [*kept, "answer to and now?"]  # no turn lost


@pytest.mark.parametrize("python_path", [None, os.pathsep], ids=["plain", "empty-path-entry"])
def test_a_folder_named_seelen_in_the_working_folder_does_not_stop_the_owner(
    owner_env: ModelServer, data_dir: Path, tmp_path: Path, python_path: str | None
) -> None:
    # ~ holding a clone at ~/seelen, an MCP client started from ~: the installed `seelen`
    # command starts the owner, which must import the installed package, not the folder.
    # An empty PYTHONPATH entry (`PYTHONPATH=$PYTHONPATH:~/lib` with none before) puts the
    # working folder itself on the path, before the installed package.
    (tmp_path / "seelen").mkdir()
    (tmp_path / "seelen" / "README.md").write_text("a clone, or anything else")
    command = Path(sys.executable).with_name("seelen")
    env = None if python_path is None else {**os.environ, "PYTHONPATH": python_path}
    result = subprocess.run(
        [str(command), "ask", "who answers?"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer to who answers?\n"
    assert _status().answered == 1  # the warm owner answered, not the client in-process
    log = (data_dir / "default" / "logs" / "owner.log").read_text()
    assert "Traceback" not in log


def test_a_lock_file_naming_a_live_process_that_holds_no_lock_does_not_stop_an_ask(
    owner_env: ModelServer, data_dir: Path
) -> None:
    # What an owner stopped by SIGTERM, a pid reused after a reboot, or a profile copied
    # while its owner ran leave behind: a pid in the file, and nobody holding the lock.
    profile = data_dir / "default"
    profile.mkdir(parents=True)
    (profile / "owner.lock").write_text('{"pid": 1, "role": "owner"}')
    result = run_cli("ask", "is anyone there?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "answer to is anyone there?\n"
    assert "waiting for" not in result.stderr
    assert _status().answered == 1


HOLDER = """
import sys
from pathlib import Path
from seelen.runtime import ProfileLock
lock = ProfileLock(Path(sys.argv[1]), "memory reindex")
lock.acquire(wait=False)
print("held", flush=True)
sys.stdin.read()
"""


def test_an_ask_waits_for_a_profile_held_without_being_served_only_so_long(
    owner_env: ModelServer, data_dir: Path
) -> None:
    profile = data_dir / "default"
    profile.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(profile)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        result = run_cli("ask", "anyone?", env={"SEELEN_WAIT_SECONDS": "0.5"})
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert lines[-1] == (
            f"seelen: another `seelen memory reindex` (pid {holder.pid}) is still using this "
            "profile after 0.5 s (SEELEN_WAIT_SECONDS): try again when it is done"
        )
        assert "Traceback" not in result.stderr
        assert not (profile / "chat_sessions.db").exists()  # nothing was stored
    finally:
        holder.communicate("")


async def test_an_idle_owner_frees_the_embedding_model_and_loads_it_again_when_asked(
    data_dir: Path, tmp_path: Path
) -> None:
    import asyncio

    from seelen.owner.server import OwnerServer
    from seelen.protocol.calls import Search
    from seelen.runtime import open_writer
    from seelen.service import ProfileService

    settings = load_settings({"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": "local"})
    app = await open_writer(settings, role="owner", wait=False, with_model=False)
    sid = app.store.create_session("archived").session_id
    app.store.add_turn(sid, "user", "My sister Ingrid keeps bees in Uppsala")
    await asyncio.to_thread(app.index_pending)
    embedder = app.recall.embedder
    assert embedder._session is not None  # loaded to embed the turn
    service = ProfileService(app)
    server = OwnerServer(
        service, version="v", fingerprint="f", idle_seconds=60, release_seconds=0.5
    )
    serving = asyncio.create_task(server.serve(tmp_path / "s.sock"))
    try:
        await wait_until_async(lambda: embedder._session is None, 30, "never released")
        found = await asyncio.to_thread(service.search, Search(query="who keeps bees?", limit=3))
        assert "Ingrid" in found.turns[0].text and "vector" in found.turns[0].rankers
        assert embedder._session is not None  # loaded again by the search
    finally:
        server.stop()
        await serving
        await app.aclose()


def _rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no RSS for pid {pid}")


def test_a_quiet_owner_hands_over_to_a_resting_one_that_opens_at_the_next_question(
    owner_env: ModelServer, data_dir: Path
) -> None:
    # 6 s: it rests after 2 s (the ask's answer is long in by then, even on a busy machine),
    # and its resting successor exits after 6 more, long after the next question.
    quick = {"SEELEN_IDLE_MINUTES": "0.1"}
    assert run_cli("ask", "before the rest", env=quick).returncode == 0
    settings = load_settings(quick)
    first = owner_status(settings)
    assert first is not None and not first.resting
    loaded = _rss_mib(first.pid)

    def resting() -> bool:
        status = owner_status(settings)
        return status is not None and status.resting and status.pid != first.pid

    wait_until(resting, 60, "the owner never handed over to a resting one")
    assert wait_gone(first.pid)
    rest = owner_status(settings)
    assert rest is not None
    assert _rss_mib(rest.pid) < min(100, loaded / 2)  # nothing of the profile loaded
    shown = run_cli("server", "status", env=quick).stdout
    assert f"pid {rest.pid}" in shown and "resting" in shown
    after = run_cli("ask", "after the rest", env=quick)
    assert after.returncode == 0, after.stderr
    assert after.stdout == "answer to after the rest\n"
    again = owner_status(settings)
    assert again is not None and again.pid == rest.pid and not again.resting
    store = open_store(data_dir)
    users = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert users == ["before the rest", "after the rest"]


def test_ctrl_c_during_an_answer_of_the_owner_says_it_is_finished_and_kept(
    owner_env: ModelServer, data_dir: Path
) -> None:
    """Ctrl-C ended `ask` with exit 130 and not a word, while the owner went on answering
    (and paying for) the question, and kept the answer: the user could not know."""
    from seelen.cli.main import ANSWERED_ON

    # The words after the first take 1.25 s: Ctrl-C, sent once the first is read, comes
    # long before the answer ends.
    owner_env.responder = lambda body: Reply(text="one two three four five six", chunk_delay=0.25)
    code, out, err = ask_stopped("a slow one")
    assert out.startswith(b"one")
    assert code == 130 and err.decode() == ANSWERED_ON + "\n"
    wait_until(lambda: len(active_texts(data_dir)) == 2, 30, "the owner never kept the answer")
    assert active_texts(data_dir) == ["a slow one", "one two three four five six"]
