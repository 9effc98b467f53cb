"""Opening a profile to serve it: as the warm background owner, or from an open chat.

`open_service` opens the profile as its writer for `python -m seelen.owner`; `serve_chat`
serves an open chat's profile on the same socket while the chat lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from seelen.client import place
from seelen.config import Settings
from seelen.owner.server import server_for
from seelen.runtime import ProfileLock, open_writer
from seelen.service import ProfileService


async def open_service(
    settings: Settings, *, memory_only: bool = False, lock: ProfileLock | None = None
) -> ProfileService:
    """Open the profile as its background owner, without waiting: if a chat holds it, raise
    ProfileBusy (the client then waits for that chat to serve, or to leave).

    A `memory_only` owner (started by `seelen mcp` or `seelen import`) builds no chat model,
    so no local model server starts for a client that only searches, remembers or imports;
    it leaves unfinished archives (they need the tool model) to the next full owner or chat.
    `lock`: the profile's lock, held already (a resting owner opens at its first request).
    """
    from seelen.app import add_knowledge

    if memory_only:
        app = await open_writer(
            settings,
            role="owner",
            wait=False,
            with_model=False,
            finish_archives=False,
            lock=lock,
        )
        try:
            await asyncio.to_thread(add_knowledge, app)
        except BaseException:
            await app.aclose()
            raise
        return ProfileService(app)
    app = await open_writer(settings, role="owner", wait=False, lock=lock)
    mcp = app.start_mcp(lambda _line: None)
    if mcp is not None:  # only servers whose tools are not cached yet: once per config
        await mcp.wait_handshakes()
    app.bot.keep_prompt_warm()  # a local model reads the prompt's beginning now
    return ProfileService(app)


@contextlib.asynccontextmanager
async def serve_chat(
    service: ProfileService,
    on_answer: Callable[[str], None],
    *,
    on_draining: Callable[[int], None] = lambda _: None,
) -> AsyncIterator[None]:
    """While a chat is open, answer `seelen ask` (and memory calls, imports) from other
    terminals through its socket; leaving, answer the questions already taken first (saying
    so through `on_draining`)."""
    settings = service.app.settings
    path = place.socket_path(settings)
    if not settings.owner or not place.usable(path):
        yield
        return
    server = server_for(service, kind="chat", on_answer=on_answer, on_draining=on_draining)
    task = asyncio.create_task(server.serve(path))
    try:
        yield
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            await task
