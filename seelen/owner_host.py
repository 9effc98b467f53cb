"""What an owner serves: an opened profile answering one question at a time.

Two kinds of owner use it: the warm background process (`seelen.server`), and an open chat,
which answers questions from other terminals between (never during) its own turns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from seelen import wire
from seelen.config import Settings
from seelen.server import OwnerServer, events_to_wire

if TYPE_CHECKING:
    from seelen.app import App


class OwnerHost:
    """Turns questions into wire messages against one opened profile."""

    def __init__(
        self,
        app: App,
        close: Callable[[], Awaitable[None]],
        *,
        turn_lock: asyncio.Lock | None = None,
        on_answer: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.app = app
        self._close = close
        self.turn_lock = turn_lock or asyncio.Lock()
        self.on_answer = on_answer

    async def ask(self, text: str, *, ephemeral: bool) -> AsyncIterator[dict[str, Any]]:
        """Answer one question; an ephemeral one writes nothing."""
        async with self.turn_lock:
            sid = None if ephemeral else self.app.sessions.current.session_id
            async for message in events_to_wire(
                self.app.bot.turn(text, ephemeral=ephemeral), lambda: sid
            ):
                yield message
            self.on_answer(text)

    async def aclose(self) -> None:
        """Close the profile and let the next writer in."""
        await self._close()


async def open_host(settings: Settings) -> OwnerHost:
    """Open the profile as its background owner, without waiting: if a chat holds it, exit
    at once (the client then answers in-process, waiting for that chat)."""
    from seelen.runtime import Runtime

    runtime = await Runtime.open(settings, role="owner", wait=False)
    mcp = runtime.app.start_mcp(lambda _line: None)
    if mcp is not None:  # only servers whose tools are not cached yet: once per config
        await mcp.wait_handshakes()
    return OwnerHost(runtime.app, runtime.aclose)


@contextlib.asynccontextmanager
async def serve_chat(
    app: App, turn_lock: asyncio.Lock, on_answer: Callable[[str], None]
) -> AsyncIterator[None]:
    """While a chat is open, answer `seelen ask` from other terminals through its socket."""
    path = wire.socket_path(app.settings)
    if not app.settings.owner or not wire.usable(path):
        yield
        return

    async def keep_open() -> None:
        """The chat closes the profile itself."""

    host = OwnerHost(app, keep_open, turn_lock=turn_lock, on_answer=on_answer)
    server = OwnerServer(
        host, version=wire.code_version(), fingerprint=wire.fingerprint(app.settings), kind="chat"
    )
    task = asyncio.create_task(server.serve(path))
    try:
        yield
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await task
