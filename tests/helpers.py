"""Small helpers shared by the tests: run the real `seelen` command, open the real store,
call a registered tool, see this process's children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from seelen.store import Store
from seelen.tools.base import ToolCall, ToolOutcome, ToolRegistry


def run_seelen(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `python -m seelen ARGS` as a user would, with the test environment."""
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
    """Wait until process `pid` has ended; False if it is still there after `seconds`."""
    import time

    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def call_tool(
    registry: ToolRegistry, name: str, arguments: dict[str, Any] | None = None
) -> ToolOutcome:
    """Run one call of tool `name` through `registry`, as the agent does."""
    return (await registry.run_all([ToolCall("1", name, json.dumps(arguments or {}))]))[0]


def child_pids() -> set[int]:
    """Live (non-zombie) children of this test process."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


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


def seelen_main(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run `seelen ARGS` in this process, through its console-script entry point (its
    one-line errors and exit codes included); stdout and stderr as a pipe would see them."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from seelen.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, sys.stdin
    sys.argv, sys.stdin = ["seelen", *args], io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv, sys.stdin = saved
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
