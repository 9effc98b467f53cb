"""The warm owner: one process per profile that keeps the memory open and answers clients.

`seelen ask` connects to the owner's Unix socket (0600, in the profile folder), sends its
question and streams the events back, so a question costs a connection instead of loading
LanceDB, the embedding model and the model client again. The owner is started in the
background by the first client that finds none (`seelen.owner.client`), holds the profile's
writer lock, answers one turn at a time, and exits after `SEELEN_IDLE_MINUTES` without a
request, when asked to stop, or when a client of another version or other settings needs
the profile (it then stops and that client starts a fresh owner).

Run by hand with `python -m seelen.owner` (what the client starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.owner import wire

if TYPE_CHECKING:
    from seelen.owner.host import OwnerHost

Send = Callable[[dict[str, Any]], Awaitable[None]]
# Asked to answer, an owner that has not answered anything for this long checks for idleness.
IDLE_CHECK_SECONDS = 1.0


class OwnerServer:
    """Serves one open profile (`host`) on a Unix socket until stopped or idle."""

    def __init__(
        self,
        host: OwnerHost,
        *,
        version: str,
        fingerprint: str,
        kind: str = "background",
        idle_seconds: float | None = None,
    ) -> None:
        self.host = host
        self.version = version
        self.fingerprint = fingerprint
        self.kind = kind  # "background" (may be stopped by clients) or "chat"
        self.idle_seconds = idle_seconds
        self.started = time.time()
        self.answered = 0
        self._last_activity = time.monotonic()
        self._active = 0
        self._turn_lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None

    async def serve(self, path: Path) -> None:
        """Listen on `path` (0600) until `stop()` or the idle timeout."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a dead owner: we hold the writer lock now
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._handle, path=str(path), limit=wire.MAX_LINE
            )
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        mine = path.stat().st_ino
        watcher = asyncio.create_task(self._watch_idle())
        try:
            await self._stopping.wait()
        finally:
            watcher.cancel()
            self._server.close()
            _unlink_if_mine(path, mine)
            await self._server.wait_closed()

    def stop(self) -> None:
        """End `serve` once the running turns are done."""
        self._stopping.set()

    async def _watch_idle(self) -> None:
        while self.idle_seconds is not None:
            await asyncio.sleep(min(IDLE_CHECK_SECONDS, self.idle_seconds))
            idle = time.monotonic() - self._last_activity
            if self._active == 0 and idle >= self.idle_seconds:
                self.stop()
                return

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._active += 1

        async def send(message: dict[str, Any]) -> None:
            writer.write(wire.encode(message))
            await writer.drain()

        try:
            request = wire.decode(await reader.readline())
            await self._dispatch(request, send)
        except (ValueError, UnicodeDecodeError):
            with contextlib.suppress(OSError):
                await send({"type": "failed", "message": "bad request", "end": True})
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; its turn (if any) is saved as far as it got
        finally:
            self._active -= 1
            self._last_activity = time.monotonic()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _dispatch(self, request: dict[str, Any], send: Send) -> None:
        op = request.get("op")
        if op == "status":
            await send({"type": "status", **self.status(), "end": True})
        elif op == "stop":
            if self.kind != "background":
                await send({"type": "refused", "reason": "an open chat owns it", "end": True})
                return
            await send({"type": "stopping", "end": True})
            self.stop()
        elif op == "ask":
            await self._ask(request, send)
        else:
            await send({"type": "failed", "message": f"unknown op {op!r}", "end": True})

    def status(self) -> dict[str, Any]:
        """What `seelen server status` shows."""
        return {
            "pid": os.getpid(),
            "kind": self.kind,
            "version": self.version,
            "fingerprint": self.fingerprint,
            "started": self.started,
            "answered": self.answered,
            "busy": self._turn_lock.locked(),
        }

    async def _ask(self, request: dict[str, Any], send: Send) -> None:
        if request.get("version") != self.version:
            await send({"type": "refused", "reason": "version", "end": True})
            return
        if request.get("fingerprint") != self.fingerprint:
            await send({"type": "refused", "reason": "settings", "end": True})
            return
        text = request.get("text")
        if not isinstance(text, str) or not text.strip():
            await send({"type": "failed", "message": "empty question", "end": True})
            return
        async with self._turn_lock:  # one turn at a time: each is built around its own question
            async for message in self.host.ask(text, ephemeral=bool(request.get("ephemeral"))):
                await send(message)
            self.answered += 1


def _unlink_if_mine(path: Path, inode: int) -> None:
    """Remove our socket file, unless a newer owner has already put its own there."""
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_ino == inode:
            path.unlink()
