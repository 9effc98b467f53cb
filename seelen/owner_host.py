"""What the warm owner serves: the profile opened once, answering one turn at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from seelen.config import Settings
from seelen.server import events_to_wire

if TYPE_CHECKING:
    from seelen.runtime import Runtime


class OwnerHost:
    """Holds the opened profile for `OwnerServer` and turns questions into wire messages."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.server: Any = None

    def attach(self, server: Any) -> None:
        """Remember the server (for symmetry with the chat, which serves its own profile)."""
        self.server = server

    async def ask(self, text: str, *, ephemeral: bool) -> AsyncIterator[dict[str, Any]]:
        """Answer one question; an ephemeral one writes nothing."""
        app = self.runtime.app
        sid = None if ephemeral else app.sessions.current.session_id
        async for message in events_to_wire(
            app.bot.turn(text, ephemeral=ephemeral), lambda: sid
        ):
            yield message

    async def aclose(self) -> None:
        """Close the profile and let the next writer in."""
        await self.runtime.aclose()


async def open_host(settings: Settings) -> OwnerHost:
    """Open the profile as its owner, without waiting: if a chat holds it, exit at once
    (the client then answers in-process, waiting for that chat)."""
    from seelen.runtime import Runtime

    runtime = await Runtime.open(settings, role="owner", wait=False)
    runtime.app.start_mcp(lambda _line: None)
    return OwnerHost(runtime)
