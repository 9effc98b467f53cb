"""`seelen ask`: one question, one answer, as plain text, Markdown or JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from seelen.agent import (
    Done,
    Failed,
    KnowledgeUsed,
    Notice,
    TextDelta,
    ToolFinished,
    TurnUsage,
)
from seelen.app import App


async def answer_once(app: App, text: str, *, as_json: bool, ephemeral: bool) -> int:
    """Answer `text`; returns the exit code (0 ok, 1 when the model failed)."""
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    from seelen.manage import prepare

    await prepare(app, err, index_now=False)
    if app.start_mcp(lambda line: err.print(f"[yellow]{line}[/yellow]")) is not None:
        await app.mcp.wait_ready(app.settings.mcp_init_timeout + 1)
    if ephemeral:
        app.sessions.open_ephemeral()
    stream_plain = not as_json and not sys.stdout.isatty()
    reply, usage, failure, tools = "", None, None, []
    try:
        async for event in app.bot.turn(text):
            if isinstance(event, TextDelta) and stream_plain:
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, Done):
                reply = event.text
            elif isinstance(event, TurnUsage):
                usage = event
            elif isinstance(event, Failed):
                failure = event.message
            elif isinstance(event, ToolFinished):
                tools.append({"name": event.outcome.name, "ok": event.outcome.ok})
            elif isinstance(event, Notice):
                err.print(f"[yellow]{event.message}[/yellow]")
            elif isinstance(event, KnowledgeUsed) and not as_json:
                from seelen.knowledge import used_line

                err.print(used_line(event.passages), style="dim", markup=False)
    finally:
        session_id = app.sessions.current.session_id
        if ephemeral:
            app.forget(await asyncio.to_thread(app.sessions.discard))
    _print_answer(
        reply,
        usage,
        failure,
        tools,
        session_id,
        as_json=as_json,
        ephemeral=ephemeral,
        streamed=stream_plain,
    )
    if app.index is not None:  # after the answer is out: index this exchange for recall
        await asyncio.to_thread(app.index.index_all)
    return 1 if failure is not None else 0


def _print_answer(
    reply: str,
    usage: Any,
    failure: str | None,
    tools: list[dict[str, Any]],
    session_id: str,
    *,
    as_json: bool,
    ephemeral: bool,
    streamed: bool,
) -> None:
    """Write the answer (or the failure) the way the caller asked for it."""
    if failure is not None:
        print(f"seelen: {failure}", file=sys.stderr)
        if not ephemeral:
            print(
                "seelen: your question is saved; `seelen chat` and /retry answer it",
                file=sys.stderr,
            )
        return 1
    if as_json:
        payload: dict[str, Any] = {
            "reply": reply,
            "session_id": None if ephemeral else session_id,
            "usage": vars(usage) if usage else None,
            "tool_calls": tools,
        }
        print(json.dumps(payload, ensure_ascii=False))
    elif streamed:
        if not reply.endswith("\n"):
            sys.stdout.write("\n")
    else:
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(reply))
    sys.stdout.flush()
