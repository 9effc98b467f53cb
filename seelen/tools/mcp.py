"""MCP servers as tools, through fastmcp (imported lazily: it costs a second or more).

The config file is read by `seelen.tools.mcp_config`. An entry may also be a ready fastmcp
transport or server object (embedding, tests).

Each server gets its own fastmcp `Client`; tools are exposed as `<server>_<tool>` (see
`exposed_names`), which is stable however many servers are configured.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seelen.errors import ConfigError, ToolError
from seelen.logs import close_logger, file_logger, mask_url, private_dir, redact
from seelen.tools.base import ToolRegistry, ToolSpec
from seelen.tools.mcp_config import (
    RemoteServer,
    StdioServer,
    expand_vars,
    find_config,
    is_disabled,
    load_config,
    parse_server,
)
from seelen.tools.mcp_content import (
    INVALID_NAME_CHARS,
    LOG_LEVELS,
    NOTE_FORMAT,
    ToolProgress,
    exposed_names,
    needs_tasks,
    render_result,
)
from seelen.tools.mcp_link import (
    McpTool,
    ResourceReader,
    ServerLink,
    State,
    describe,
    resource_spec,
    stderr_note,
)

__all__ = [
    "McpManager",
    "RemoteServer",
    "ServerStatus",
    "StdioServer",
    "ToolProgress",
    "expand_vars",
    "exposed_names",
    "find_config",
    "load_config",
    "parse_server",
    "render_result",
]

RESOURCE_TOOL = "read_resource"  # the built-in tool per server that offers resources


def _timed_out(exc: BaseException | None) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:  # exception chains can loop
        if isinstance(exc, TimeoutError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


# ---------------------------------------------------------------- servers and tools


@dataclass(frozen=True)
class ServerStatus:
    """One server as `/tools` shows it; `reason` explains a failure in one line."""

    name: str
    state: State
    tools: int = 0
    reason: str = ""
    skipped: int = 0  # tools not offered: they can only run as tasks

    def line(self) -> str:
        """E.g. "time: ready (2 tools)" or "web: failed — HTTP 401 Unauthorized from …"."""
        if self.state == "ready":
            skipped = f"; {self.skipped} task-only not offered" if self.skipped else ""
            return f"{self.name}: ready ({self.tools} tool{'s' * (self.tools != 1)}{skipped})"
        if self.state == "failed":
            return f"{self.name}: failed — {self.reason}"
        return f"{self.name}: {self.state}"


class McpManager:
    """Connects the configured MCP servers in the background and registers their tools."""

    def __init__(
        self,
        config: Mapping[str, Any] | str | Path,
        registry: ToolRegistry,
        *,
        init_timeout: float = 15.0,
        call_timeout: float | None = None,
        on_event: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
        log_dir: str | Path | None = None,
        on_progress: Callable[[ToolProgress], None] | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.init_timeout = init_timeout
        self.call_timeout = call_timeout if call_timeout is not None else registry.timeout
        self.on_event = on_event
        # A running tool's progress notifications (the front-end shows them; never printed).
        self.on_progress = on_progress
        self.environ = os.environ if environ is None else environ
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._servers: list[ServerLink] = []
        self._closers: set[asyncio.Task[None]] = set()
        self._importing: asyncio.Task[None] | None = None
        self._started = False

    async def __aenter__(self) -> McpManager:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self) -> None:
        """Read the config and start connecting every server; returns at once.

        Needs a running event loop. An unreadable or invalid config file raises `ConfigError`;
        a bad entry only fails that server.
        """
        if self._started:
            raise RuntimeError("McpManager.start() was already called")
        self._started = True
        entries, base = load_config(self.config)
        loop = asyncio.get_running_loop()
        for name, raw in entries.items():
            server = ServerLink(str(name), raw)
            self._servers.append(server)
            try:
                if is_disabled(raw):
                    server.state = "disabled"
                    continue
                if isinstance(raw, Mapping):
                    server.entry = parse_server(raw, self.environ, base)
            except ConfigError as exc:
                self._fail(server, str(exc))
                continue
            server.task = loop.create_task(self._connect(server), name=f"mcp:{name}")

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every server is ready or failed; False if `timeout` ran out first."""
        tasks = [s.task for s in self._servers if s.task is not None and not s.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        return all(s.state != "connecting" for s in self._servers)

    def status(self) -> list[ServerStatus]:
        """Every configured server, in config order."""
        return [ServerStatus(s.name, s.state, s.tools, s.reason, s.skipped) for s in self._servers]

    async def aclose(self) -> None:
        """Stop connecting, close every client and end every server process."""
        tasks = [s.task for s in self._servers if s.task is not None and not s.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        await asyncio.gather(*(self._close(s, report=s.state == "ready") for s in self._servers))
        if self._closers:
            await asyncio.wait(self._closers)
        for server in self._servers:
            self.registry.remove_source(f"mcp:{server.name}")
            if server.state in ("connecting", "ready"):
                server.state, server.reason = "failed", "closed"
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def _connect(self, server: ServerLink) -> None:
        try:
            # Importing fastmcp takes a second or more: in a thread, so the prompt stays live.
            await asyncio.shield(self._imports())
            server.client = self._client(server)
            async with asyncio.timeout(self.init_timeout):
                await server.client.__aenter__()
                listed = await server.client.list_tools()
                resources = await self._resources(server.client)
        except Exception as exc:  # becomes this server's failed status and event
            # Closing re-raises the session's own failure: it is reported once, just below.
            await self._close(server, report=False)
            self._fail(server, self._reason(server, exc))
            return
        self._register(server, listed, resources)

    async def _resources(self, client: Any) -> list[Any]:
        """The server's resources, when it says it has any."""
        capabilities = client.server_capabilities
        if capabilities is None or getattr(capabilities, "resources", None) is None:
            return []
        return list(await client.list_resources())

    def _imports(self) -> asyncio.Task[None]:
        if self._importing is None:
            self._importing = asyncio.get_running_loop().create_task(
                asyncio.to_thread(_import_fastmcp)
            )
        return self._importing

    def _register(self, server: ServerLink, listed: list[Any], resources: list[Any]) -> None:
        source = f"mcp:{server.name}"
        offered = [t for t in listed if not needs_tasks(t)]
        own = [t.name for t in offered]
        # A server's own tool named read_resource wins over the built-in reader.
        reader = bool(resources) and RESOURCE_TOOL not in own
        names = exposed_names(server.name, own + [RESOURCE_TOOL] * reader, self.registry.names())
        count = 0
        for item in offered:
            if names[item.name] in self.registry.names():
                continue  # a duplicate name in the server's own listing
            schema = dict(item.input_schema or {})
            schema.setdefault("type", "object")
            text = item.description or item.title or f"{item.name} (MCP server {server.name})"
            spec = ToolSpec(names[item.name], text, schema, source, item.name, self.call_timeout)
            count += self.registry.add(McpTool(spec, server, self))
        if reader:
            spec = resource_spec(names[RESOURCE_TOOL], server.name, resources)
            count += self.registry.add(ResourceReader(spec, server, self))
        server.state, server.tools = "ready", count
        server.skipped = len(listed) - len(offered)

    def _client(self, server: ServerLink) -> Any:
        from fastmcp import Client  # imported by `_import_fastmcp` in a thread; cheap here

        entry = server.entry
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

    def _log_handler(self, server: ServerLink) -> Callable[[Any], Any]:
        """Server log notifications go to its log file, never to the chat or stderr."""

        async def handle(message: Any) -> None:
            if server.notes is not None:
                where = f"[{message.logger}] " if message.logger else ""
                level = LOG_LEVELS.get(str(message.level).lower(), logging.INFO)
                server.notes.log(level, "%s%s", where, message.data)

        return handle

    def _stdio_transport(self, server: ServerLink, entry: StdioServer) -> Any:
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

    def _remote_transport(self, server: ServerLink, entry: RemoteServer) -> Any:
        import httpx2  # fastmcp's HTTP client library
        from fastmcp.client.auth.bearer import BearerAuth
        from fastmcp.client.transports import SSETransport, StreamableHttpTransport

        async def remember_error(response: Any) -> None:
            # fastmcp reports a 401 as "Server returned an error response"; keep the status
            if response.status_code >= 400:
                server.http_error = f"HTTP {response.status_code} {response.reason_phrase}"

        def http_client(**kwargs: Any) -> Any:
            kwargs.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))
            client = httpx2.AsyncClient(**kwargs)
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

    def _reason(self, server: ServerLink, exc: BaseException) -> str:
        if isinstance(exc, ToolError | ConfigError):
            reason = str(exc)
        elif server.http_error and isinstance(server.entry, RemoteServer):
            reason = f"{server.http_error} from {mask_url(server.entry.url)}"
        elif _timed_out(exc):
            reason = f"no answer to the MCP handshake within {self.init_timeout:g} s"
        elif isinstance(server.entry, RemoteServer):
            reason = f"{describe(exc)} ({mask_url(server.entry.url)})"
        else:
            reason = describe(exc)
        return redact(reason + stderr_note(server.log))

    def _fail(self, server: ServerLink, reason: str) -> None:
        server.state, server.reason, server.tools = "failed", reason, 0
        self.registry.remove_source(f"mcp:{server.name}")
        if self.on_event is not None:
            self.on_event(f"MCP server {server.name!r} failed: {reason}")

    def _lost(self, server: ServerLink, exc: BaseException) -> None:
        """A ready server's connection died during a call: report it once, drop its tools."""
        if server.state != "ready":
            return
        self._fail(server, f"connection lost: {describe(exc)}{stderr_note(server.log)}")
        # Close in the background so the failing call returns now; a hung process may take
        # seconds to stop. Closing re-raises the lost session's error, reported just above.
        closer = asyncio.get_running_loop().create_task(self._close(server, report=False))
        self._closers.add(closer)
        closer.add_done_callback(self._closers.discard)

    async def _close(self, server: ServerLink, *, report: bool = True) -> None:
        client, server.client = server.client, None
        notes, server.notes = server.notes, None
        if notes is not None:
            close_logger(notes)
        if client is None:
            return
        try:
            await client.close()
        except Exception as exc:  # closing must go on for the other servers; say what happened
            if report and self.on_event is not None:
                self.on_event(f"MCP server {server.name!r} did not close cleanly: {describe(exc)}")


def _import_fastmcp() -> None:
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
