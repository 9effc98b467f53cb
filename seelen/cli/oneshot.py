"""`seelen ask` in this process: used when no warm owner can answer (see `seelen.owner.client`)."""

from __future__ import annotations

import asyncio

from seelen.app import App  # the profile, opened by the caller through the runtime
from seelen.cli.answer import AnswerPrinter
from seelen.owner import wire
from seelen.owner.host import events_to_wire


async def answer_once(app: App, text: str, printer: AnswerPrinter, *, ephemeral: bool) -> int:
    """Answer `text` and print it through `printer`; returns the exit code."""
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    manager = app.start_mcp(lambda line: err.print(line, style="yellow", markup=False))
    if manager is not None:
        await manager.wait_handshakes()
    sid = None if ephemeral else app.sessions.current.session_id
    final: wire.Done | wire.Failed = wire.Failed(message="no answer")
    async for message in events_to_wire(app.bot.turn(text, ephemeral=ephemeral), lambda: sid):
        if isinstance(message, (wire.Done, wire.Failed)):
            final = message
        else:
            printer.on_message(message)
    code = printer.finish(final)
    if not ephemeral:  # the answer is out: index it for recall (this process is the writer)
        await asyncio.to_thread(app.index_pending)
    return code
