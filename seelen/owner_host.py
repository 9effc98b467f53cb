"""What the warm owner serves: the profile opened once, answering one turn at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from seelen.config import Settings
from seelen.server import events_to_wire


class OwnerHost:
    """Holds the opened profile for `OwnerServer` and turns questions into wire messages."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.server: Any = None

    def attach(self, server: Any) -> None:
        """Remember the server (for symmetry with the chat, which serves its own profile)."""
        self.server = server

    async def ask(self, text: str, *, ephemeral: bool) -> AsyncIterator[dict[str, Any]]:
        """Answer one question; an ephemeral one leaves nothing behind."""
        app = self.app
        if ephemeral:
            app.sessions.open_ephemeral()
        try:
            sid = app.sessions.current.session_id
            async for message in events_to_wire(
                app.bot.turn(text), lambda: None if ephemeral else sid
            ):
                yield message
        finally:
            if ephemeral:
                app.forget(await asyncio.to_thread(app.sessions.discard))
                await asyncio.to_thread(app.sessions.open)
        if app.index is not None:
            app.index.wake()

    async def aclose(self) -> None:
        """Close the profile."""
        await self.app.aclose()


async def open_host(settings: Settings) -> OwnerHost:
    """Open the profile as the owner: session restored, indexer running, MCP connecting."""
    from rich.console import Console

    from seelen.app import build_app
    from seelen.manage import prepare

    app = await asyncio.to_thread(build_app, settings)
    try:
        await prepare(app, Console(stderr=True), index_now=True)
        app.start_mcp(lambda _line: None)
    except BaseException:
        await app.aclose()
        raise
    return OwnerHost(app)
