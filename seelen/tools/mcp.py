"""MCP servers as tools, through fastmcp (imported lazily: it costs a second or more).

The config file is read by `seelen.tools.mcp_config`. An entry may also be a ready fastmcp
transport or server object (embedding, tests).

Each server gets its own fastmcp `Client`; tools are exposed as `<server>_<tool>` (see
`exposed_names`), which is stable however many servers are configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from seelen.errors import ConfigError, ToolError
from seelen.logs import mask_url, redact
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

__all__ = [
    "McpManager",
    "RemoteServer",
    "ServerStatus",
    "StdioServer",
    "expand_vars",
    "exposed_names",
    "find_config",
    "load_config",
    "parse_server",
    "render_result",
]

MAX_NAME = 64
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")

State = Literal["connecting", "ready", "failed", "disabled"]


# ---------------------------------------------------------------- names and results


def exposed_names(server: str, tools: list[str], taken: Collection[str] = ()) -> dict[str, str]:
    """Map each tool's own name to `<server>_<tool>`, valid and unique for OpenAI.

    Characters outside [A-Za-z0-9_-] become "_". A name that is too long, that two tools
    sanitise to, or that is already taken gets a short hash of (server, tool) instead of its
    tail, so it is the same on every run.
    """
    prefix = _INVALID_NAME_CHARS.sub("_", server) or "_"
    tools = list(dict.fromkeys(tools))
    base = {t: f"{prefix}_{_INVALID_NAME_CHARS.sub('_', t) or '_'}" for t in tools}
    counts = Counter(base.values())
    used = set(taken)
    names: dict[str, str] = {}
    for tool in tools:
        name, salt = base[tool], 0
        while len(name) > MAX_NAME or counts[base[tool]] > 1 or name in used:
            digest = hashlib.sha1(f"{server}\0{tool}\0{salt}".encode()).hexdigest()[:8]
            name, salt = f"{base[tool][: MAX_NAME - 9]}_{digest}", salt + 1
            if name not in used:
                break
        names[tool] = name
        used.add(name)
    return names


def render_result(result: Any) -> str:
    """The text of an MCP tool result: text blocks joined, other content summarised."""
    parts = [_render_block(block) for block in result.content or []]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def _render_block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        size = len(block.data or "") * 3 // 4  # base64 → bytes
        return f"[{kind}: {block.mime_type}, {size:,} bytes]"
    if kind == "resource_link":
        return f"[resource link: {block.name} <{block.uri}>]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        mime = getattr(resource, "mime_type", None) or "binary"
        return text if text is not None else f"[embedded resource: {resource.uri} ({mime})]"
    return f"[{kind or type(block).__name__} content]"


def _describe(exc: BaseException) -> str:
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

    def line(self) -> str:
        """E.g. "time: ready (2 tools)" or "web: failed — HTTP 401 Unauthorized from …"."""
        if self.state == "ready":
            return f"{self.name}: ready ({self.tools} tool{'s' * (self.tools != 1)})"
        if self.state == "failed":
            return f"{self.name}: failed — {self.reason}"
        return f"{self.name}: {self.state}"


@dataclass
class _Server:
    name: str
    entry: Any
    state: State = "connecting"
    reason: str = ""
    tools: int = 0
    client: Any = None
    task: asyncio.Task[None] | None = None
    log: Path | None = None
    http_error: str = ""


class McpTool:
    """One tool of a connected MCP server."""

    def __init__(self, spec: ToolSpec, server: _Server, manager: McpManager) -> None:
        self.spec = spec
        self._server = server
        self._manager = manager

    async def call(self, arguments: dict[str, Any]) -> str:
        """Call the tool on its server; an `isError` result or a lost server raises `ToolError`."""
        server, client = self._server, self._server.client
        if server.state != "ready" or client is None:
            raise ToolError(f"MCP server {server.name!r} is not connected")
        try:
            result = await client.call_tool_mcp(
                self.spec.origin_name, arguments, timeout=self._manager.call_timeout
            )
        except Exception as exc:  # becomes the tool's error outcome; a dead link also a status
            if not await _alive(client):
                self._manager._lost(server, exc)
            raise ToolError(f"MCP server {server.name!r}: {_describe(exc)}") from exc
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"MCP tool {self.spec.origin_name!r} reported an error")
        return text


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
    ) -> None:
        self.config = config
        self.registry = registry
        self.init_timeout = init_timeout
        self.call_timeout = call_timeout if call_timeout is not None else registry.timeout
        self.on_event = on_event
        self.environ = os.environ if environ is None else environ
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._servers: list[_Server] = []
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
            server = _Server(str(name), raw)
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
        return [ServerStatus(s.name, s.state, s.tools, s.reason) for s in self._servers]

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

    async def _connect(self, server: _Server) -> None:
        try:
            # Importing fastmcp takes a second or more: in a thread, so the prompt stays live.
            await asyncio.shield(self._imports())
            server.client = self._client(server)
            async with asyncio.timeout(self.init_timeout):
                await server.client.__aenter__()
                listed = await server.client.list_tools()
        except Exception as exc:  # becomes this server's failed status and event
            # Closing re-raises the session's own failure: it is reported once, just below.
            await self._close(server, report=False)
            self._fail(server, self._reason(server, exc))
            return
        self._register(server, listed)

    def _imports(self) -> asyncio.Task[None]:
        if self._importing is None:
            self._importing = asyncio.get_running_loop().create_task(
                asyncio.to_thread(_import_fastmcp)
            )
        return self._importing

    def _register(self, server: _Server, listed: list[Any]) -> None:
        source = f"mcp:{server.name}"
        names = exposed_names(server.name, [t.name for t in listed], self.registry.names())
        for item in listed:
            if item.name not in names or names[item.name] in self.registry.names():
                continue  # a duplicate name in the server's own listing
            schema = dict(item.input_schema or {})
            schema.setdefault("type", "object")
            text = item.description or item.title or f"{item.name} (MCP server {server.name})"
            spec = ToolSpec(names[item.name], text, schema, source, item.name, self.call_timeout)
            self.registry.add(McpTool(spec, server, self))
        server.state, server.tools = "ready", len(names)

    def _client(self, server: _Server) -> Any:
        from fastmcp import Client  # imported by `_import_fastmcp` in a thread; cheap here

        entry = server.entry
        if isinstance(entry, StdioServer):
            transport = self._stdio_transport(server, entry)
        elif isinstance(entry, RemoteServer):
            transport = self._remote_transport(server, entry)
        else:
            transport = entry  # a ready transport or an in-process server object
        return Client(transport, init_timeout=self.init_timeout)

    def _stdio_transport(self, server: _Server, entry: StdioServer) -> Any:
        from fastmcp.client.transports import StdioTransport

        search_path = entry.env.get("PATH", self.environ.get("PATH", os.defpath))
        if os.sep in entry.command:
            found = os.access(Path(entry.cwd or ".", entry.command), os.X_OK)
        else:
            found = shutil.which(entry.command, path=search_path) is not None
        if not found:
            raise ToolError(f"command {entry.command!r} not found")
        server.log = self._log_path(server.name)
        return StdioTransport(
            entry.command,
            list(entry.args),
            env=entry.env or None,
            cwd=entry.cwd,
            keep_alive=False,  # fastmcp would otherwise keep the process after the client closes
            log_file=server.log,  # the server's stderr would scribble over the prompt
        )

    def _remote_transport(self, server: _Server, entry: RemoteServer) -> Any:
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
            folder = self._log_dir
            folder.mkdir(parents=True, exist_ok=True)
        return folder / f"mcp-{_INVALID_NAME_CHARS.sub('_', name)}.log"

    def _reason(self, server: _Server, exc: BaseException) -> str:
        if isinstance(exc, ToolError | ConfigError):
            reason = str(exc)
        elif server.http_error and isinstance(server.entry, RemoteServer):
            reason = f"{server.http_error} from {mask_url(server.entry.url)}"
        elif _timed_out(exc):
            reason = f"no answer to the MCP handshake within {self.init_timeout:g} s"
        elif isinstance(server.entry, RemoteServer):
            reason = f"{_describe(exc)} ({mask_url(server.entry.url)})"
        else:
            reason = _describe(exc)
        return redact(reason + _stderr_note(server.log))

    def _fail(self, server: _Server, reason: str) -> None:
        server.state, server.reason, server.tools = "failed", reason, 0
        self.registry.remove_source(f"mcp:{server.name}")
        if self.on_event is not None:
            self.on_event(f"MCP server {server.name!r} failed: {reason}")

    def _lost(self, server: _Server, exc: BaseException) -> None:
        """A ready server's connection died during a call: report it once, drop its tools."""
        if server.state != "ready":
            return
        self._fail(server, f"connection lost: {_describe(exc)}{_stderr_note(server.log)}")
        # Close in the background so the failing call returns now; a hung process may take
        # seconds to stop. Closing re-raises the lost session's error, reported just above.
        closer = asyncio.get_running_loop().create_task(self._close(server, report=False))
        self._closers.add(closer)
        closer.add_done_callback(self._closers.discard)

    async def _close(self, server: _Server, *, report: bool = True) -> None:
        client, server.client = server.client, None
        if client is None:
            return
        try:
            await client.close()
        except Exception as exc:  # closing must go on for the other servers; say what happened
            if report and self.on_event is not None:
                self.on_event(f"MCP server {server.name!r} did not close cleanly: {_describe(exc)}")


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


async def _alive(client: Any) -> bool:
    """Whether the server still answers: tells a failed tool from a dead connection."""
    if not client.is_connected():
        return False
    try:
        async with asyncio.timeout(2.0):
            await client.ping()
    except Exception:  # any failure to answer a ping means the link is gone; the caller says so
        return False
    return True


def _stderr_note(log: Path | None) -> str:
    """ " (stderr: <last line>)" from a server's stderr log, for a failure message."""
    if log is None or not log.exists():
        return ""
    # The log is a courtesy: the failure itself is reported whether or not it can be read.
    with contextlib.suppress(OSError), log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - 4096))
        lines = handle.read().decode("utf-8", "replace").strip().splitlines()
        return f" (stderr: {lines[-1].strip()[:200]})" if lines else ""
    return ""
