"""The owner's socket: one open profile's service, served to the thin clients.

`seelen ask` connects to the owner's Unix socket (0600, in the profile folder), sends its
question and streams the turn's events back, so a question costs a connection instead of
loading LanceDB, the embedding model and the model client again; `seelen mcp` sends its
memory calls and `seelen import` its file the same way. Each frame is a class of
`seelen.protocol`, encoded by its codec: the socket is only a transport.

Two kinds of owner serve: the warm background process (`python -m seelen.owner`), which exits
after `SEELEN_IDLE_MINUTES` without a request, when asked to stop, or when a client of another
version or other settings needs the profile; and an open chat, which answers questions from
other terminals between (never during) its own turns. Stopping never drops a client: the
socket stops taking connections at once, and every connection already taken is answered
before `serve` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path

from seelen.client import place
from seelen.errors import SeelenError
from seelen.protocol import calls, codec, decode_request, events
from seelen.protocol.results import ImportProgress
from seelen.service import ProfileService

Send = Callable[[codec.Frame], Awaitable[None]]
# Asked to answer, an owner that has not answered anything for this long checks for idleness.
IDLE_CHECK_SECONDS = 1.0
# A background owner idle this long frees what it can load again (the embedding model: 90 MiB,
# 0.23 s of CPU to load at the next question) and lets go of its libraries' pages (~150 MiB,
# mapped again from the page cache when used: ~0.01 s of CPU); a burst of questions keeps it
# warm.
RELEASE_SECONDS = 60.0
# Idle this long, a background owner without a local model server hands the profile to a
# resting successor and exits: LanceDB's and onnxruntime's runtimes, once loaded, hold ~100 MiB
# that no release gives back (owner/__main__.py), and a resting owner holds 39 MiB. The price: a
# question to a resting owner waits for the profile to open (20,014 turns: 3.0 s, 2.5 s of
# CPU, against 0.5 s warm; bench/bench_owner.py, load 1). Five minutes keep a burst of
# questions warm; at most a third of SEELEN_IDLE_MINUTES.
REST_SECONDS = 300.0
# A client sends its request as soon as it is connected; one that sends nothing for this long
# is dropped, so that it cannot keep a stopping owner waiting.
REQUEST_SECONDS = 10.0


class OwnerServer:
    """Serves one profile on a Unix socket until stopped or idle: `service`, or the one
    `opener` opens at the first request that needs the profile (a resting owner's)."""

    def __init__(
        self,
        service: ProfileService | None,
        *,
        opener: Callable[[], Awaitable[ProfileService]] | None = None,
        version: str,
        fingerprint: str,
        kind: str = "background",
        idle_seconds: float | None = None,
        on_answer: Callable[[str], None] = lambda _: None,
        on_draining: Callable[[int], None] = lambda _: None,
        release_seconds: float = RELEASE_SECONDS,
        rest_seconds: float | None = None,
        memory_only: bool = False,
    ) -> None:
        self._service = service
        self._opener = opener
        self._opening = asyncio.Lock()
        self.memory_only = memory_only  # what a resting owner will open: say it in `status`
        self.version = version
        self.fingerprint = fingerprint
        self.kind = kind  # "background" (may be stopped by clients) or "chat"
        self.idle_seconds = idle_seconds
        self.on_answer = on_answer  # told each question it answered (the chat says so)
        self.on_draining = on_draining  # told, when it stops, how many it still answers
        self.started = time.time()
        self.answered = 0
        self._last_activity = time.monotonic()
        self._clients: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self.release_seconds = release_seconds
        self._released = False  # freed what it could since the last request
        self.rest_seconds = rest_seconds  # None: never hands over to a resting successor
        self.resting = False  # stopped to hand over: the caller starts the successor

    @property
    def service(self) -> ProfileService:
        """The open profile (opened by now: see `_ready`)."""
        assert self._service is not None, "the profile is opened at the first request"
        return self._service

    async def _ready(self) -> ProfileService:
        """The open profile, opened now if this owner was resting."""
        async with self._opening:
            if self._service is None:
                assert self._opener is not None, "a server without a service has an opener"
                self._service = await self._opener()
            return self._service

    async def serve(self, path: Path) -> None:
        """Listen on `path` (0600) until `stop()` or the idle timeout; then answer every
        connection already taken before returning."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a dead owner: we hold the writer lock now
        old_umask = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(
                self._handle, path=str(path), limit=codec.MAX_LINE
            )
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        mine = path.stat().st_ino
        watcher = asyncio.create_task(self._watch_idle(path, mine))
        try:
            await self._stopping.wait()
        finally:
            watcher.cancel()
            server.close()  # no new connections; a client that finds none starts an owner
            _unlink_if_mine(path, mine)
            if self._clients:
                self.on_draining(len(self._clients))
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

    async def _watch_idle(self, path: Path, mine: int) -> None:
        while self.idle_seconds is not None:
            await asyncio.sleep(min(IDLE_CHECK_SECONDS, self.idle_seconds))
            idle = time.monotonic() - self._last_activity
            if not _is_mine(path, mine):  # the socket (or its folder) was removed: no client
                self.stop()  # can reach this owner any more, and it would hold the profile
                return
            if self._clients:
                continue
            if (service := self._service) is None:  # resting: nothing loaded, nothing to do
                if idle >= self.idle_seconds:
                    self.stop()
                    return
                continue
            due = (self.idle_seconds, self.release_seconds, self.rest_seconds or math.inf)
            if idle < min(due) or await asyncio.to_thread(lambda: service.busy):
                continue  # texts still wait for their vectors: embedding them first
            if idle >= self.idle_seconds or self._rests(service, idle):
                self.stop()
                return
            if not self._released and idle >= self.release_seconds:
                self._released = True
                await asyncio.to_thread(service.release)

    def _rests(self, service: ProfileService, idle: float) -> bool:
        """Whether to hand over to a resting successor now (never with a local model
        server: starting it again would make the next question wait seconds for it)."""
        due = self.rest_seconds is not None and idle >= self.rest_seconds
        self.resting = due and service.app.provider.server is None
        return self.resting

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        work = True  # a status request (`seelen server status`) keeps no owner awake

        async def send(frame: codec.Frame) -> None:
            if writer.is_closing():  # the client left: writing on would only log warnings
                raise ConnectionResetError("the client left")
            writer.write(codec.encode(frame))
            await writer.drain()

        try:
            try:
                line = await asyncio.wait_for(reader.readline(), REQUEST_SECONDS)
                request = decode_request(line)
            except TimeoutError:
                return
            except (ValueError, UnicodeDecodeError) as exc:
                await send(events.Failed(message=f"bad request: {exc}"))
                return
            work = not isinstance(request, calls.Status)
            if work:
                self._released = False
            await self._dispatch(request, send)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; its turn (if any) is saved as far as it got
        finally:
            self._clients.discard(task)
            if work:
                self._last_activity = time.monotonic()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _dispatch(self, request: calls.Request, send: Send) -> None:
        if isinstance(request, calls.Status):
            await send(self.status())
        elif isinstance(request, calls.Stop):
            if self.kind != "background":
                await send(calls.Refused(reason="an open chat owns it"))
                return
            await send(calls.Stopping())
            self.stop()
        elif request.version != self.version:
            await send(calls.Refused(reason="version"))
        elif (failed := await self._open()) is not None:
            await send(failed)
        elif isinstance(request, calls.Ask):
            await self._ask(request, send)
        elif isinstance(request, calls.Import):
            await send(await self._import(request, send))
        else:
            await send(await self._call(request))

    async def _open(self) -> events.Failed | None:
        """Open the profile if this owner rests; why it could not, in one sentence."""
        try:
            await self._ready()
        except SeelenError as exc:
            return events.Failed(message=str(exc))
        except Exception as exc:
            return events.Failed(message=_internal(exc))
        return None

    def status(self) -> calls.OwnerStatus:
        """What `seelen server status` shows."""
        service = self._service
        return calls.OwnerStatus(
            pid=os.getpid(),
            kind=self.kind,
            version=self.version,
            fingerprint=self.fingerprint,
            started=self.started,
            answered=self.answered,
            busy=service is not None and service.turn_lock.locked(),
            clients=len(self._clients) - 1,  # not counting the one asking
            memory_only=self.memory_only if service is None else not service.answers,
            resting=service is None,
        )

    async def _ask(self, request: calls.Ask, send: Send) -> None:
        if request.fingerprint != self.fingerprint:
            await send(calls.Refused(reason="settings"))
            return
        if not self.service.answers:
            await send(calls.Refused(reason="memory calls only"))
            return
        if not request.text.strip():
            await send(events.Failed(message="empty question"))
            return
        saved = False
        gone = False

        async def tell(frame: codec.Frame) -> None:
            # A client that went away (Ctrl-C, a closed pipe) is not answered, but its turn
            # runs to the end: the reply is stored whole, as if it had been read.
            nonlocal gone
            if not gone:
                try:
                    await send(frame)
                except (ConnectionError, OSError):
                    gone = True

        async with self.service.turn_lock:  # one turn at a time, each around its own question
            try:
                async for event in self.service.ask(request.text, ephemeral=request.ephemeral):
                    saved = saved or isinstance(event, events.Saved)
                    await tell(event)
            except SeelenError as exc:  # the disk, the store: one line, as in-process
                await tell(events.Failed(message=str(exc), saved=saved))
            except Exception as exc:
                await tell(events.Failed(message=_internal(exc), saved=saved))
            self.answered += 1
        self.on_answer(request.text)

    async def _import(self, request: calls.Import, send: Send) -> codec.Frame:
        """An import, its progress streamed (at most every tenth of a second): written
        beside the turns, its vectors made by the indexer afterwards."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ImportProgress | None] = asyncio.Queue()
        last = [0.0]

        def progress(frame: ImportProgress) -> None:  # in the worker thread
            now = time.monotonic()
            if now - last[0] >= 0.1 or frame.done == frame.total:
                last[0] = now
                loop.call_soon_threadsafe(queue.put_nowait, frame)

        async def forward() -> None:
            while (frame := await queue.get()) is not None:
                with contextlib.suppress(ConnectionError, OSError):  # the client left
                    await send(frame)

        sender = asyncio.create_task(forward())
        try:
            return await self._call(request, lambda: self.service.import_file(request, progress))
        finally:
            queue.put_nowait(None)  # after every progress frame the worker queued
            await sender

    async def _call(
        self, request: calls.Request, run: Callable[[], codec.Frame] | None = None
    ) -> codec.Frame:
        """A memory call, in a worker thread: it never waits for a turn to finish."""
        try:
            return await asyncio.to_thread(run or (lambda: self.service.call(request)))
        except SeelenError as exc:
            return events.Failed(message=str(exc))
        except Exception as exc:
            return events.Failed(message=_internal(exc))


def _internal(exc: Exception) -> str:
    """A bug, told in one line to the client; the traceback goes to the owner's log."""
    traceback.print_exception(exc, file=sys.stderr)
    return f"internal error in the background Seelen: {type(exc).__name__}: {exc}"


def _is_mine(path: Path, inode: int) -> bool:
    """Whether our socket file is still where clients look for it."""
    try:
        return path.stat().st_ino == inode
    except OSError:
        return False


def _unlink_if_mine(path: Path, inode: int) -> None:
    """Remove our socket file, unless a newer owner has already put its own there."""
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_ino == inode:
            path.unlink()


def server_for(service: ProfileService, **options: object) -> OwnerServer:
    """An OwnerServer for `service`, with this code's version and the profile's settings."""
    settings = service.app.settings
    return OwnerServer(
        service,
        version=place.code_version(),
        fingerprint=place.fingerprint(settings),
        **options,  # type: ignore[arg-type]
    )
