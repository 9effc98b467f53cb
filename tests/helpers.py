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

from seelen.owner.procs import children
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
    return children(os.getpid())
