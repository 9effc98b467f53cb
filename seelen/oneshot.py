"""`seelen ask` in this process: used when no warm owner can answer (see `seelen.client`)."""

from __future__ import annotations

import asyncio
from typing import Any

from seelen.answer import AnswerPrinter
from seelen.app import App
from seelen.server import events_to_wire


async def answer_once(app: App, text: str, printer: AnswerPrinter, *, ephemeral: bool) -> int:
    """Answer `text` and print it through `printer`; returns the exit code."""
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    from seelen.manage import prepare

    await prepare(app, err, index_now=False)
    if app.start_mcp(lambda line: err.print(f"[yellow]{line}[/yellow]")) is not None:
        await app.mcp.wait_ready(app.settings.mcp_init_timeout + 1)
    if ephemeral:
        app.sessions.open_ephemeral()
    sid = app.sessions.current.session_id
    final: dict[str, Any] = {"type": "failed", "message": "no answer"}
    try:
        async for message in events_to_wire(app.bot.turn(text), lambda: sid):
            if message.get("end"):
                final = message
            else:
                printer.on_message(message)
    finally:
        if ephemeral:
            app.forget(await asyncio.to_thread(app.sessions.discard))
    code = printer.finish(final)
    if app.index is not None:  # after the answer is out: index this exchange for recall
        await asyncio.to_thread(app.index.index_all)
    return code
