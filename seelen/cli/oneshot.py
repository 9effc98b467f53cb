"""`seelen ask` in this process: used when no warm owner can answer (see `seelen.client`)."""

from __future__ import annotations

import asyncio

from seelen.app import App  # the profile, opened by the caller through the runtime
from seelen.cli.answer import AnswerPrinter
from seelen.protocol.events import Done, Failed
from seelen.service import ProfileService


async def answer_once(app: App, text: str, printer: AnswerPrinter, *, ephemeral: bool) -> int:
    """Answer `text` and print it through `printer`; returns the exit code."""
    from seelen.cli.common import stderr_console

    err = stderr_console()  # one line each, however narrow the terminal or the pipe
    manager = app.start_mcp(lambda line: err.print(line, style="yellow", markup=False))
    if manager is not None:
        await manager.wait_handshakes()
    service = ProfileService(app)
    final: Done | Failed = Failed(message="no answer")
    async with service.turn_lock:
        async for event in service.ask(text, ephemeral=ephemeral):
            if isinstance(event, (Done, Failed)):
                final = event
            else:
                printer.on_event(event)
    code = printer.finish(final)
    if not ephemeral:  # the answer is out: index it for recall (this process is the writer)
        await asyncio.to_thread(app.index_pending)
    return code
