"""How Seelen reaches one MCP server: a fastmcp client over stdio, HTTP or SSE, with the
server's stderr and log notifications sent to its own log file (never to the terminal)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.errors import ToolError
from seelen.files import private_dir
from seelen.logs import file_logger
from seelen.tools.mcp_config import RemoteServer, StdioServer
from seelen.tools.mcp_content import INVALID_NAME_CHARS, LOG_LEVELS, NOTE_FORMAT
from seelen.tools.mcp_link import ServerLink

if TYPE_CHECKING:  # fastmcp costs a second to import: its types are for the checker only
    import httpx2
    from fastmcp import Client, FastMCP
    from fastmcp.client.logging import LogHandler, LogMessage
    from fastmcp.client.transports import (
        ClientTransport,
        SSETransport,
        StdioTransport,
        StreamableHttpTransport,
    )


class ClientMaker:
    """Builds the fastmcp client of a server (fastmcp must be imported: `import_fastmcp`)."""

    def __init__(
        self, environ: Mapping[str, str], init_timeout: float, log_dir: str | Path | None
    ) -> None:
        self.environ = environ
        self.init_timeout = init_timeout
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def cleanup(self) -> None:
        """Remove the temporary log folder (used when no log folder was given)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def client(self, server: ServerLink) -> Client[Any]:
        """A new (unconnected) client for `server`; a missing command raises `ToolError`."""
        from fastmcp import Client  # imported by `import_fastmcp` in a thread; cheap here

        entry = server.entry
        assert not isinstance(entry, Mapping), "an entry is parsed before its server starts"
        transport: ClientTransport | FastMCP[Any]
        if isinstance(entry, StdioServer):
            transport = self._stdio_transport(server, entry)
        elif isinstance(entry, RemoteServer):
            transport = self._remote_transport(server, entry)
        else:
            transport = entry  # a ready transport or an in-process server object
        server.log = server.log or self._log_path(server.name)
        if server.notes is None:
            server.notes = file_logger(f"mcp.{server.name}", server.log, (), NOTE_FORMAT)
        return Client(
            transport, init_timeout=self.init_timeout, log_handler=self._log_handler(server)
        )

    def _log_handler(self, server: ServerLink) -> LogHandler:
        """Server log notifications go to its log file, never to the chat or stderr."""

        async def handle(message: LogMessage) -> None:
            if server.notes is not None:
                where = f"[{message.logger}] " if message.logger else ""
                level = LOG_LEVELS.get(str(message.level).lower(), logging.INFO)
                server.notes.log(level, "%s%s", where, message.data)

        return handle

    def _stdio_transport(self, server: ServerLink, entry: StdioServer) -> StdioTransport:
        from fastmcp.client.transports import StdioTransport

        search_path = entry.env.get("PATH", self.environ.get("PATH", os.defpath))
        if os.sep in entry.command:
            found = os.access(Path(entry.cwd or ".", entry.command), os.X_OK)
        else:
            found = shutil.which(entry.command, path=search_path) is not None
        if not found:
            raise ToolError(f"command {entry.command!r} not found")
        server.log = server.log or self._log_path(server.name)
        return StdioTransport(
            entry.command,
            list(entry.args),
            env=entry.env or None,
            cwd=entry.cwd,
            keep_alive=False,  # fastmcp would otherwise keep the process after the client closes
            log_file=server.log,  # the server's stderr would scribble over the prompt
        )

    def _remote_transport(
        self, server: ServerLink, entry: RemoteServer
    ) -> SSETransport | StreamableHttpTransport:
        import httpx2  # fastmcp's HTTP client library
        from fastmcp.client.auth.bearer import BearerAuth
        from fastmcp.client.transports import SSETransport, StreamableHttpTransport

        async def remember_error(response: httpx2.Response) -> None:
            # fastmcp reports a 401 as "Server returned an error response"; keep the status
            if response.status_code >= 400:
                server.http_error = f"HTTP {response.status_code} {response.reason_phrase}"

        def http_client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
            **kwargs: Any,  # Any: fastmcp passes httpx options beyond its protocol's three
        ) -> httpx2.AsyncClient:
            timeout = timeout or httpx2.Timeout(30.0, read=300.0)
            client = httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, **kwargs)
            client.event_hooks["response"].append(remember_error)
            return client

        kind = SSETransport if entry.transport == "sse" else StreamableHttpTransport
        # A BearerAuth object, not the bare string: fastmcp reads the string "oauth" as a flow
        auth = BearerAuth(entry.auth) if entry.auth else None
        return kind(entry.url, headers=entry.headers, auth=auth, httpx_client_factory=http_client)

    def _log_path(self, name: str) -> Path:
        if self._log_dir is None:
            self._tmp = self._tmp or tempfile.TemporaryDirectory(prefix="seelen-mcp-")
            folder = Path(self._tmp.name)
        else:
            folder = private_dir(self._log_dir)
        path = folder / f"mcp-{INVALID_NAME_CHARS.sub('_', name)}.log"
        # Created 0600 before the server's stderr is sent there (the child opens it too).
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        return path


def import_fastmcp() -> None:
    """Import what MCP connections need, in a worker thread, so the event loop never waits.

    Besides fastmcp, two libraries load lazily on first use: anyio's asyncio backend (first
    connection) and jsonschema (first tool result); in the loop they stalled it ~0.3 s.
    """
    import anyio
    import fastmcp.client.auth.bearer
    import fastmcp.client.transports  # noqa: F401
    import httpx2  # noqa: F401
    import jsonschema  # noqa: F401

    anyio.run(anyio.sleep, 0)  # loads anyio's asyncio backend (private module) the public way
    # fastmcp sends its own log records to stderr, i.e. into the chat: keep them out.
    chatter = logging.getLogger("fastmcp")
    for handler in list(chatter.handlers):
        chatter.removeHandler(handler)
    chatter.addHandler(logging.NullHandler())
    chatter.propagate = False
