"""The tools of one MCP server: its own tools, and `<server>_read_resource`.

`ServerLink` is one configured server as the manager tracks it; the tools here call
through its client, ask the manager to start a server that is not running yet ("idle": its
tools came from the cache), and tell the manager when the connection is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from seelen.errors import ToolError
from seelen.protocol.events import ToolProgressed
from seelen.tools.base import ToolSpec
from seelen.tools.mcp_content import (
    NOTE_LINE,
    render_resource,
    render_result,
    resource_catalogue,
)

if TYPE_CHECKING:  # fastmcp costs a second to import: its types are for the checker only
    from fastmcp import Client, FastMCP
    from fastmcp.client.transports import ClientTransport
    from mcp.types import CallToolResult

    from seelen.tools.mcp_config import RemoteServer, StdioServer

    # A server as configured: JSON until parsed (kept so when it is disabled or invalid), a
    # parsed entry, or a ready fastmcp transport or server object (embedding, tests).
    Entry: TypeAlias = (
        Mapping[str, Any] | StdioServer | RemoteServer | ClientTransport | FastMCP[Any]
    )

State = Literal["idle", "connecting", "ready", "failed", "disabled"]


class Owner(Protocol):
    """What a tool needs from the manager that connected its server."""

    call_timeout: float
    on_progress: Callable[[ToolProgressed], None] | None

    def _lost(self, server: ServerLink, exc: BaseException) -> None:
        """The server's connection died during a call."""
        ...

    async def ensure(self, server: ServerLink) -> None:
        """Start an idle server (or wait for one that is connecting)."""
        ...


@dataclass
class ServerLink:
    """One configured server: its entry, state, client, log file and counts."""

    name: str
    entry: Entry
    state: State = "connecting"
    reason: str = ""
    tools: int = 0
    client: Client[Any] | None = None
    task: asyncio.Task[None] | None = None
    log: Path | None = None
    http_error: str = ""
    skipped: int = 0
    notes: logging.Logger | None = None  # the server's log notifications, into `log`
    digest: str | None = None  # of its config entry: the key of its cached tool list


class McpTool:
    """One tool of a connected MCP server."""

    def __init__(self, spec: ToolSpec, server: ServerLink, manager: Owner) -> None:
        self.spec = spec
        self._server = server
        self._manager = manager

    async def call(self, arguments: dict[str, Any]) -> str:
        """Call the tool on its server; an `isError` result or a lost server raises `ToolError`."""
        server, client = self._server, await self._client()
        try:
            result = await self._send(client, arguments)
        except Exception as exc:  # becomes the tool's error outcome; a dead link also a status
            if not await alive(client):
                self._manager._lost(server, exc)
            raise ToolError(f"MCP server {server.name!r}: {describe(exc)}") from exc
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"MCP tool {self.spec.origin_name!r} reported an error")
        return text

    async def _client(self) -> Client[Any]:
        """The server's client, starting the server first if its tools came from the cache."""
        server = self._server
        if server.state in ("idle", "connecting"):
            await self._manager.ensure(server)
        if server.state != "ready" or server.client is None:
            why = f": {server.reason}" if server.reason else ""
            raise ToolError(f"MCP server {server.name!r} is not connected{why}")
        return server.client

    async def _send(self, client: Client[Any], arguments: dict[str, Any]) -> CallToolResult:
        async def report(progress: float, total: float | None, message: str | None) -> None:
            if self._manager.on_progress is not None:
                note = ToolProgressed(
                    tool=self.spec.name, progress=progress, total=total, message=message or ""
                )
                self._manager.on_progress(note)

        return await client.call_tool_mcp(
            self.spec.origin_name,
            arguments,
            progress_handler=report,
            timeout=self._manager.call_timeout,
        )


class ResourceReader(McpTool):
    """`<server>_read_resource`: the model reads one of the server's resources by URI."""

    async def call(self, arguments: dict[str, Any]) -> str:
        """Read the resource named by `uri`; a failure raises `ToolError`."""
        uri = arguments.get("uri")
        if not isinstance(uri, str) or not uri:
            raise ToolError("missing required argument 'uri'")
        server, client = self._server, await self._client()
        try:
            async with asyncio.timeout(self._manager.call_timeout):
                contents = await client.read_resource(uri)
        except Exception as exc:  # becomes the tool's error outcome, as for any tool
            raise ToolError(f"MCP server {server.name!r}: {describe(exc)}") from exc
        return render_resource(contents)


def resource_spec(name: str, server: str, resources: Sequence[Any]) -> ToolSpec:
    """The read tool of a server that offers `resources` (each with `uri` and `about`)."""
    text = f"Read a resource of the MCP server {server!r} by its URI. Offered:\n"
    schema = {
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "the resource's URI"}},
        "required": ["uri"],
    }
    return ToolSpec(name, text + resource_catalogue(resources), schema, f"mcp:{server}")


def describe(exc: BaseException) -> str:
    """One line for an exception, looking through fastmcp's wrappers to the cause."""
    seen: set[int] = set()
    while id(exc) not in seen:  # exception chains can loop
        seen.add(id(exc))
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        elif isinstance(exc, RuntimeError) and exc.__cause__ is not None:
            exc = exc.__cause__
        else:
            break
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.removeprefix("Client failed to connect: ")[:300]


async def alive(client: Client[Any]) -> bool:
    """Whether the server still answers: tells a failed tool from a dead connection."""
    if not client.is_connected():
        return False
    try:
        async with asyncio.timeout(2.0):
            await client.ping()
    except Exception:  # any failure to answer a ping means the link is gone; the caller says so
        return False
    return True


def stderr_note(log: Path | None) -> str:
    """ " (stderr: <last line>)" from a server's stderr log, for a failure message."""
    if log is None or not log.exists():
        return ""
    # The log is a courtesy: the failure itself is reported whether or not it can be read.
    with contextlib.suppress(OSError), log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - 4096))
        text = handle.read().decode("utf-8", "replace")
        lines = [x for x in text.strip().splitlines() if not NOTE_LINE.match(x)]
        return f" (stderr: {lines[-1].strip()[:200]})" if lines else ""
    return ""
