"""Small helpers shared by the tests: run the `seelen` command (in this process, or as a real
process where processes are the point), wait for a condition with a deadline, open the real
store, call a registered tool, see this process's children, read what a prompt holds."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest.mock
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from model_server import Reply

from seelen.client import place
from seelen.client.connect import owner_status
from seelen.client.procs import children, gone
from seelen.config import load_settings
from seelen.memory.context import users_words
from seelen.memory.prompts import CONTEXT_OPEN
from seelen.store import Store
from seelen.tools.base import ToolCall, ToolOutcome, ToolRegistry

# How often a wait looks again: short next to any wait a test does, long next to a check.
POLL = 0.02


def _deadline_passed(start: float, timeout: float, message: str) -> None:
    if time.monotonic() - start > timeout:
        raise AssertionError(f"timed out after {timeout:g} s: {message}")


def wait_until(predicate: Callable[[], object], timeout: float, message: str) -> float:
    """Poll `predicate` until it is true; fail with `message` once `timeout` seconds pass.

    Returns the seconds waited. From async code, `await wait_until_async(...)`: blocking
    here would stop the event loop the condition may depend on.
    """
    start = time.monotonic()
    while not predicate():
        _deadline_passed(start, timeout, message)
        time.sleep(POLL)
    return time.monotonic() - start


async def wait_until_async(predicate: Callable[[], object], timeout: float, message: str) -> float:
    """`wait_until` for a test running on an event loop: the loop runs on between checks."""
    start = time.monotonic()
    while not predicate():
        _deadline_passed(start, timeout, message)
        await asyncio.sleep(POLL)
    return time.monotonic() - start


@dataclass
class CliResult:
    """What one `seelen` command did: the same fields as a finished subprocess."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, stdin: str | bytes = "", env: dict[str, str] | None = None) -> CliResult:
    """Run `seelen ARGS` in this process, as the user's command runs it.

    It goes through `seelen.cli.main.main` (one line per error, the same exit codes), with
    stdin, stdout and stderr captured (a pipe, not a terminal). Nothing stays behind for the
    next test: the environment, the umask and the root flags are restored, and every thread
    the command started must have ended.
    """
    from click.testing import CliRunner

    from seelen.cli import common

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # the command runs its own event loop, as `seelen` does
    else:
        raise AssertionError("run_cli is for plain tests: its event loop cannot nest in one")
    from seelen.cli import main as cli

    saved_environ, saved_argv, saved_flags = dict(os.environ), sys.argv, dict(common._ROOT_FLAGS)
    umask = os.umask(0o022)
    os.umask(umask)
    threads_before = set(threading.enumerate())
    try:
        with (
            CliRunner().isolation(input=stdin, env=env) as (out, err, _),
            _command_tree_built_once(),
        ):
            sys.argv = ["seelen", *args]
            try:
                cli.main()
                code: Any = 0
            except SystemExit as exc:
                code = exc.code
            sys.stdout.flush()
            sys.stderr.flush()
            result = CliResult(
                code if isinstance(code, int) else int(code is not None),
                out.getvalue().decode("utf-8", "replace"),
                err.getvalue().decode("utf-8", "replace"),
            )
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_environ)
        os.umask(umask)
        common._ROOT_FLAGS.clear()
        common._ROOT_FLAGS.update(saved_flags)
    # A process would end its threads at exit; in this process they must end by themselves.
    started = [t for t in threading.enumerate() if t not in threads_before and not _shared(t)]
    wait_until(
        lambda: not any(t.is_alive() for t in started),
        30,
        f"`seelen {' '.join(args)}` left threads running: {[t.name for t in started]}",
    )
    return result


@contextlib.contextmanager
def _command_tree_built_once() -> Iterator[None]:
    """typer turns the app into click's tree of commands at every call: 17 ms of CPU for
    Seelen's (measured at load 5), in each of the suite's hundreds of `run_cli` calls. The
    tree is the same each time (every command is registered at import and no test changes
    them; click makes a new context per call), so this test process builds it once."""
    import typer.main

    build = typer.main.get_command  # typer's own: the patch ends with each call
    with unittest.mock.patch.object(typer.main, "get_command", lambda app: _tree(app, build)):
        yield


@functools.cache
def _tree(app: Any, build: Callable[[Any], Any]) -> Any:  # a typer.Typer's click.Command
    return build(app)


def _shared(thread: threading.Thread) -> bool:
    """Threads that are not the command's: a request handler of the tests' model server,
    LanceDB's one event loop, which it starts once per process and keeps, and the reaper of a
    warm owner the command started (it waits, as a daemon, for the owner to end: with a
    `seelen` process it would end at exit, the owner outliving it; here the test's end ends
    the owner, `end_owners`, and so the reaper)."""
    return thread.name in {"LanceDBBackgroundEventLoop", "seelen-owner-reaper"} or (
        "process_request_thread" in thread.name
    )


def run_seelen(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `python -m seelen ARGS` as a real process, with the test environment: for tests
    about processes (kills, the owner, concurrency, the terminal, start-up)."""
    return subprocess.run(
        [sys.executable, "-m", "seelen", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def open_store(data_dir: Path, profile: str = "default") -> Store:
    """The profile's real SQLite store."""
    return Store(data_dir / profile / "chat_sessions.db")


def failed_archive(data_dir: Path) -> tuple[str, str]:
    """A default profile where a /save's archive began and failed (its session stays stored
    as active) and a new session was talked in after it: (old id, new id)."""
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    old = store.create_session(start_ms=1_000).session_id
    store.add_turns(old, [("user", "my dog Rex", None, 1_000)])
    store.record_archive_step(old, "started")  # the archive began, then the model failed
    new = store.create_session(start_ms=2_000).session_id
    store.add_turns(new, [("user", "hello again", None, 2_000)])
    store.close()
    return old, new


def active_texts(data_dir: Path) -> list[str]:
    """The texts of the profile's active session, oldest first ([] when there is none)."""
    store = open_store(data_dir)
    try:
        session = store.active_session()
        return [] if session is None else [t.text for t in store.turns(session.session_id)]
    finally:
        store.close()


def heavy_imports(module: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of `candidates` a fresh interpreter has loaded after `import module`."""
    code = f"import sys, {module}; print(' '.join(m for m in {candidates!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


class HashEmbedder:
    """A fast stand-in for the embedding model: words hashed into 16 buckets, normalised.

    Texts sharing words get similar vectors, which is all the index tests need.
    """

    model_id = "test:hash"
    dim = 16

    def release(self) -> None:
        """Nothing is loaded."""

    def embed(self, texts: list[str]) -> np.ndarray:
        """Shape (len(texts), 16), float32, rows of length 1 (or 0 for empty texts)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def alive(pid: int) -> bool:
    """True while process `pid` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, seconds: float = 15) -> bool:
    """Wait until process `pid` has ended; fail if it is still there after `seconds`.

    True once gone, so `assert wait_gone(pid)` reads as it always did."""
    wait_until(lambda: not alive(pid), seconds, f"process {pid} still runs")
    return True


def owners_of(data_dir: Path) -> list[int]:
    """Pids of the owner processes (warm, resting or still starting) serving a profile in
    `data_dir`, found by the data dir their client gave them."""
    wanted = f"SEELEN_DATA_DIR={data_dir.absolute()}".encode()
    found = []
    # Plain os calls, no Path objects: every test's teardown scans every process (1.9 ->
    # 1.2 ms of CPU for 84 processes).
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"seelen.owner" not in cmdline.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if wanted in environ.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue  # ended meanwhile
    return found


def end_owners(data_dir: Path) -> None:
    """Kill every owner a test left behind, with what it started (its process group): one
    its client started and then left (`seelen mcp` warms one up at start), or one still
    starting when the test ended. Nothing else would end it before its idle time, and each
    one loading its model costs the suite CPU. The data dir is thrown away after the test.

    Only a data dir where an owner was started is searched for: a client takes the profile's
    spawn lock before it starts one, and an owner started by hand makes its socket. Most tests
    start none, and the search reads every process of the machine (1.5 ms of CPU at 110
    processes, after each of the suite's 825 tests)."""
    if not any(data_dir.glob(f"*/{place.SPAWN_LOCK}")) and not any(
        data_dir.glob(f"*/{place.SOCKET_NAME}")
    ):
        return
    pids = owners_of(data_dir)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # an owner leads its own session and group
    for pid in pids:  # a zombie has ended: its parent, the test's client, may reap it later
        wait_until(lambda pid=pid: gone(pid), 15, f"owner {pid} still runs")


async def call_tool(
    registry: ToolRegistry, name: str, arguments: dict[str, Any] | None = None
) -> ToolOutcome:
    """Run one call of tool `name` through `registry`, as the agent does."""
    return (await registry.run_all([ToolCall("1", name, json.dumps(arguments or {}))]))[0]


def child_pids() -> set[int]:
    """Live (non-zombie) children of this test process."""
    return children(os.getpid())


# prompt-toolkit asks the terminal where the cursor is and, without an answer, waits up to
# 2 s before it prints above the prompt; a real terminal answers at once, so this one does.
CPR_REQUEST, CPR_ANSWER = b"\x1b[6n", b"\x1b[1;1R"


class Terminal:
    """The real `seelen` in a pseudo-terminal (stdin, stdout and stderr), as a user's
    terminal runs it: it answers cursor-position requests and keeps everything shown."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self._main, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seelen", *args],
            stdin=child,
            stdout=child,
            stderr=child,
            env={**os.environ, "TERM": "xterm", **(env or {})},
            close_fds=True,
            # Its own session, with the pty as its controlling terminal: Ctrl-C is a SIGINT.
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(child)
        self.output = b""

    @property
    def text(self) -> str:
        """Everything shown so far, decoded."""
        return self.output.decode("utf-8", "replace")

    def read_until(self, marker: str, seconds: float = 30, *, after: int = 0) -> bool:
        """Read until `marker` shows (past byte `after`); False when `seconds` pass first or
        the program ends without showing it."""
        import select
        import time

        wanted, deadline = marker.encode(), time.monotonic() + seconds
        while wanted not in self.output[after:]:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self._main], [], [], min(left, 0.05))
            if not ready:
                continue
            try:
                chunk = os.read(self._main, 65536)
            except OSError:  # EIO: the program ended and closed the terminal
                return False
            if not chunk:
                return False
            for _ in range(chunk.count(CPR_REQUEST)):
                os.write(self._main, CPR_ANSWER)
            self.output += chunk
        return True

    def send(self, keys: str) -> None:
        """Type `keys` (\\r is Enter, \\x03 Ctrl-C, \\x04 Ctrl-D)."""
        os.write(self._main, keys.encode())

    def wait(self, seconds: float = 30) -> int:
        """The exit status, once the program ended (reading what it still shows)."""
        import time

        deadline = time.monotonic() + seconds
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read_until("\0never\0", 0.1)
        self.read_until("\0never\0", 0.2)
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        """Kill the program if it still runs; close the terminal."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._main)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _newest_user(messages: list[dict]) -> str:
    found = [m["content"] for m in messages if m["role"] == "user"]
    return found[-1] if found and isinstance(found[-1], str) else ""


def asked(body: dict | list[dict]) -> str:
    """The user's words in a request's newest user message (without the context block that
    Seelen puts before them): what a fake model answers."""
    messages = body["messages"] if isinstance(body, dict) else body
    return users_words(_newest_user(messages))


def context_of(body: dict | list[dict]) -> str:
    """The context block of a request's newest user message (the time, what was recalled)."""
    messages = body["messages"] if isinstance(body, dict) else body
    content = _newest_user(messages)
    return (
        content[: len(content) - len(users_words(content))]
        if content.startswith(CONTEXT_OPEN)
        else ""
    )


def echo(body: dict[str, Any]) -> Reply:
    """A model that answers "answer to <the last user message>"."""
    return Reply(text=f"answer to {asked(body)}")


def piped_chat(command: list[str] | None = None) -> subprocess.Popen[str]:
    """`seelen chat` as a real process reading lines from a pipe (text mode)."""
    return subprocess.Popen(
        command or [sys.executable, "-m", "seelen", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def owner_serves(kind: str, process: subprocess.Popen[str]) -> bool:
    """Whether an owner of `kind` ("chat", "background") serves the profile; `process`,
    which should be serving or about to, must still run."""
    assert process.poll() is None, process.communicate()
    status = owner_status(load_settings())
    return status is not None and status.kind == kind


def ask_stopped(question: str) -> tuple[int, bytes, bytes]:
    """`seelen ask QUESTION` as a real process, sent Ctrl-C (SIGINT) once the first three
    bytes of its answer are in the pipe; its exit code, stdout and stderr."""
    asking = subprocess.Popen(
        [sys.executable, "-m", "seelen", "ask", question],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert asking.stdout is not None
        first = asking.stdout.read(3)  # streamed into the pipe: the turn is under way
        asking.send_signal(signal.SIGINT)
        out, err = asking.communicate(timeout=30)
    finally:
        if asking.poll() is None:
            asking.kill()
    return asking.returncode, first + out, err
