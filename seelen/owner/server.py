"""The warm owner: one process per profile that keeps the memory open and answers clients.

`seelen ask` connects to the owner's Unix socket (0600, in the profile folder), sends its
question and streams the events back, so a question costs a connection instead of loading
LanceDB, the embedding model and the model client again; `seelen mcp` sends its memory
calls the same way. The owner is started in the background by the first client that finds
none (`seelen.owner.client`), holds the profile's writer lock, answers one turn at a time
(memory calls meanwhile), and exits after `SEELEN_IDLE_MINUTES` without a request, when
asked to stop, or when a client of another version or other settings needs the profile (it
then stops and that client starts a fresh owner).

Stopping never drops a client: the socket stops taking connections at once, and every
connection already taken is answered before `serve` returns.

Run by hand with `python -m seelen.owner` (what the client starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Protocol

from seelen.errors import SeelenError
from seelen.owner import wire

Send = Callable[[wire.Message], Awaitable[None]]
# Asked to answer, an owner that has not answered anything for this long checks for idleness.
IDLE_CHECK_SECONDS = 1.0
# A client sends its request as soon as it is connected; one that sends nothing for this long
# is dropped, so that it cannot keep a stopping owner waiting.
REQUEST_SECONDS = 10.0


class Host(Protocol):
    """What an owner serves: one opened profile (`seelen.owner.host.OwnerHost`)."""

    @property
    def answers(self) -> bool:
        """Whether it answers questions (an owner of memory calls only does not)."""
        ...

    def ask(self, text: str, *, ephemeral: bool) -> AsyncIterator[wire.Answer]:
        """Answer one question as wire messages; the last one is `Done` or `Failed`."""
        ...

    async def call(self, request: wire.MemoryCall) -> wire.Final:
        """Answer one memory call (`Result`, or `Failed` with one clear sentence)."""
        ...


class OwnerServer:
    """Serves one open profile (`host`) on a Unix socket until stopped or idle."""

    def __init__(
        self,
        host: Host,
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
        self._clients: set[asyncio.Task[None]] = set()
        self._turn_lock = asyncio.Lock()
        self._stopping = asyncio.Event()

    async def serve(self, path: Path) -> None:
        """Listen on `path` (0600) until `stop()` or the idle timeout; then answer every
        connection already taken before returning."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a dead owner: we hold the writer lock now
        old_umask = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(
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
            server.close()  # no new connections; a client that finds none starts an owner
            _unlink_if_mine(path, mine)
            await self._finish_clients()

    async def _finish_clients(self) -> None:
        """Wait for the connections taken so far (their turns, queued ones too). Cancelled
        itself (the process must end now), it cancels them: their clients retry, or say
        that the question is saved."""
        while self._clients:
            pending = set(self._clients)
            try:
                await asyncio.wait(pending)
            except asyncio.CancelledError:
                for task in pending:
                    task.cancel()
                raise

    def stop(self) -> None:
        """End `serve` once every accepted request is answered."""
        self._stopping.set()

    async def _watch_idle(self) -> None:
        while self.idle_seconds is not None:
            await asyncio.sleep(min(IDLE_CHECK_SECONDS, self.idle_seconds))
            idle = time.monotonic() - self._last_activity
            if not self._clients and idle >= self.idle_seconds:
                self.stop()
                return

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)

        async def send(message: wire.Message) -> None:
            writer.write(wire.encode(message))
            await writer.drain()

        try:
            try:
                line = await asyncio.wait_for(reader.readline(), REQUEST_SECONDS)
                request = wire.decode_request(line)
            except TimeoutError:
                return
            except (ValueError, UnicodeDecodeError) as exc:
                await send(wire.Failed(message=f"bad request: {exc}"))
                return
            await self._dispatch(request, send)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; its turn (if any) is saved as far as it got
        finally:
            self._clients.discard(task)
            self._last_activity = time.monotonic()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _dispatch(self, request: wire.Request, send: Send) -> None:
        if isinstance(request, wire.Status):
            await send(self.status())
        elif isinstance(request, wire.Stop):
            if self.kind != "background":
                await send(wire.Refused(reason="an open chat owns it"))
                return
            await send(wire.Stopping())
            self.stop()
        elif request.version != self.version:
            await send(wire.Refused(reason="version"))
        elif isinstance(request, wire.Ask):
            await self._ask(request, send)
        else:
            await send(await self._call(request))  # type: ignore[arg-type]

    def status(self) -> wire.StatusReply:
        """What `seelen server status` shows."""
        return wire.StatusReply(
            pid=os.getpid(),
            kind=self.kind,
            version=self.version,
            fingerprint=self.fingerprint,
            started=self.started,
            answered=self.answered,
            busy=self._turn_lock.locked(),
            clients=len(self._clients) - 1,  # not counting the one asking
            memory_only=not self.host.answers,
        )

    async def _ask(self, request: wire.Ask, send: Send) -> None:
        if request.fingerprint != self.fingerprint:
            await send(wire.Refused(reason="settings"))
            return
        if not self.host.answers:
            await send(wire.Refused(reason="memory calls only"))
            return
        if not request.text.strip():
            await send(wire.Failed(message="empty question"))
            return
        saved = False
        gone = False

        async def tell(message: wire.Answer) -> None:
            # A client that went away (Ctrl-C, a closed pipe) is not answered, but its turn
            # runs to the end: the reply is stored whole, as if it had been read.
            nonlocal gone
            if not gone:
                try:
                    await send(message)
                except (ConnectionError, OSError):
                    gone = True

        async with self._turn_lock:  # one turn at a time: each is built around its own question
            try:
                async for message in self.host.ask(request.text, ephemeral=request.ephemeral):
                    saved = saved or isinstance(message, wire.Saved)
                    await tell(message)
            except SeelenError as exc:  # the disk, the store: one line, as in-process
                await tell(wire.Failed(message=str(exc), saved=saved))
            except Exception as exc:
                await tell(wire.Failed(message=_internal(exc), saved=saved))
            self.answered += 1

    async def _call(self, request: wire.MemoryCall) -> wire.Final:
        """Memory calls run beside a turn: they never wait for a reply to finish."""
        try:
            return await self.host.call(request)
        except SeelenError as exc:
            return wire.Failed(message=str(exc))
        except Exception as exc:
            return wire.Failed(message=_internal(exc))


def _internal(exc: Exception) -> str:
    """A bug, told in one line to the client; the traceback goes to the owner's log."""
    traceback.print_exception(exc, file=sys.stderr)
    return f"internal error in the background Seelen: {type(exc).__name__}: {exc}"


def _unlink_if_mine(path: Path, inode: int) -> None:
    """Remove our socket file, unless a newer owner has already put its own there."""
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_ino == inode:
            path.unlink()
