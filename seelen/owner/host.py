"""What an owner serves: an opened profile answering one question at a time.

Two kinds of owner use it: the warm background process (`python -m seelen.owner`), and an open chat,
which answers questions from other terminals between (never during) its own turns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from seelen.config import Settings
from seelen.owner import wire
from seelen.owner.server import OwnerServer

if TYPE_CHECKING:
    from seelen.agent.events import Event
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
    runtime.app.bot.keep_prompt_warm()  # a local model reads the prompt's beginning now
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


def events_to_wire(
    events: AsyncIterator[Event], session_id: Callable[[], str | None]
) -> AsyncIterator[dict[str, Any]]:
    """Turn the agent's events into wire messages; the last one is `done` or `failed`."""
    from seelen.agent.events import (
        Done,
        Failed,
        KnowledgeUsed,
        Notice,
        TextDelta,
        ToolFinished,
        ToolProgressed,
        TurnUsage,
    )

    async def convert() -> AsyncIterator[dict[str, Any]]:
        usage: dict[str, Any] | None = None
        tools: list[dict[str, Any]] = []
        async for event in events:
            if isinstance(event, TextDelta):
                yield {"type": "delta", "text": event.text}
            elif isinstance(event, Notice):
                yield {"type": "notice", "message": event.message}
            elif isinstance(event, KnowledgeUsed):
                from seelen.knowledge import used_line

                yield {"type": "used", "text": used_line(event.passages)}
            elif isinstance(event, ToolProgressed):
                yield {"type": "progress", "text": event.progress.line()}
            elif isinstance(event, ToolFinished):
                tools.append({"name": event.outcome.name, "ok": event.outcome.ok})
                yield {"type": "tool", **tools[-1]}
            elif isinstance(event, TurnUsage):
                usage = dict(vars(event))
            elif isinstance(event, Failed):
                yield {"type": "failed", "message": event.message, "end": True}
                return
            elif isinstance(event, Done):
                yield {
                    "type": "done",
                    "text": event.text,
                    "session_id": session_id(),
                    "usage": usage,
                    "tool_calls": tools,
                    "end": True,
                }
                return

    return convert()
