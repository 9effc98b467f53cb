"""MCP servers as tools, through fastmcp (imported lazily: it costs a second or more).

The config file is read by `seelen.tools.mcp_config`. An entry may also be a ready fastmcp
transport or server object (embedding, tests).

Each server gets its own fastmcp `Client`; tools are exposed as `<server>_<tool>` (see
`exposed_names`), which is stable however many servers are configured. What a server offers
is cached on disk (`seelen.tools.mcp_cache`), so a server whose offer is known starts only
when one of its tools is called.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.errors import ConfigError, ToolError
from seelen.logs import close_logger, mask_url, redact
from seelen.protocol.events import ToolProgressed
from seelen.tools.base import ToolRegistry, ToolSpec
from seelen.tools.mcp_cache import Offer, ToolCache, config_digest, offer_of
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
    exposed_names,
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
from seelen.tools.mcp_transport import ClientMaker, import_fastmcp

if TYPE_CHECKING:  # fastmcp costs a second to import: its types are for the checker only
    from fastmcp import Client
    from mcp.types import Resource, ResourceTemplate

__all__ = [
    "McpManager",
    "RemoteServer",
    "ServerStatus",
    "StdioServer",
    "ToolProgressed",
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
        if self.state == "idle":
            count = f"{self.tools} tool{'s' * (self.tools != 1)}"
            return f"{self.name}: not started ({count} known; it starts on first use)"
        return f"{self.name}: {self.state}"


class McpManager:
    """Registers the tools of the configured MCP servers and connects the servers.

    With a `cache_file`, a server whose tool list is cached (for its current config) is not
    started: its tools are offered at once and it starts on the first call of one of them,
    or when `connect_all` asks. Other servers connect in the background at `start`.
    """

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
        on_progress: Callable[[ToolProgressed], None] | None = None,
        cache_file: str | Path | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.init_timeout = init_timeout
        self.call_timeout = call_timeout if call_timeout is not None else registry.timeout
        self.on_event = on_event
        # A running tool's progress notifications (the front-end shows them; never printed).
        self.on_progress = on_progress
        self.environ = os.environ if environ is None else environ
        self._clients = ClientMaker(self.environ, init_timeout, log_dir)
        self._servers: list[ServerLink] = []
        self._closers: set[asyncio.Task[None]] = set()
        self._importing: asyncio.Task[None] | None = None
        self._started = False
        self._cache = ToolCache(Path(cache_file)) if cache_file is not None else None

    async def __aenter__(self) -> McpManager:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self) -> None:
        """Read the config, offer the cached tools, connect the other servers; returns at once.

        Needs a running event loop. An unreadable or invalid config file raises `ConfigError`;
        a bad entry only fails that server.
        """
        if self._started:
            raise RuntimeError("McpManager.start() was already called")
        self._started = True
        entries, base = load_config(self.config)
        asyncio.get_running_loop()  # raises now, before any server is set up, when there is none
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
            offer = self._cached(server)
            if offer is not None:
                self._register(server, offer, "idle")
            else:
                self._begin(server)

    def connect_all(self) -> None:
        """Start every server not started yet, in the background (needs the event loop)."""
        for server in self._servers:
            if server.state == "idle":
                self._begin(server)

    async def ensure(self, server: ServerLink) -> None:
        """Start an idle server and wait until it is ready or failed (a call needs it)."""
        if server.state == "idle":
            self._begin(server)
        if server.task is not None:
            await asyncio.shield(server.task)  # a cancelled call leaves the connection going

    def _begin(self, server: ServerLink) -> None:
        """Connect `server` in the background."""
        server.state = "connecting"
        server.task = asyncio.get_running_loop().create_task(
            self._connect(server), name=f"mcp:{server.name}"
        )

    def _cached(self, server: ServerLink) -> Offer | None:
        server.digest = config_digest(server.entry)
        if self._cache is None or server.digest is None:
            return None
        return self._cache.get(server.name, server.digest)

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every server is ready or failed; False if `timeout` ran out first."""
        tasks = [s.task for s in self._servers if s.task is not None and not s.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        return all(s.state != "connecting" for s in self._servers)

    async def wait_handshakes(self) -> bool:
        """`wait_ready` for as long as one handshake may take: the init timeout, and a second
        of margin. False if a server was still connecting then."""
        return await self.wait_ready(self.init_timeout + 1)

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
            if server.state in ("idle", "connecting", "ready"):
                server.state, server.reason = "failed", "closed"
        self._clients.cleanup()

    async def _connect(self, server: ServerLink) -> None:
        try:
            # Importing fastmcp takes a second or more: in a thread, so the prompt stays live.
            await asyncio.shield(self._imports())
            server.client = self._clients.client(server)
            async with asyncio.timeout(self.init_timeout):
                await server.client.__aenter__()
                listed = await server.client.list_tools()
                resources = await self._resources(server.client)
        except Exception as exc:  # becomes this server's failed status and event
            # Closing re-raises the session's own failure: it is reported once, just below.
            await self._close(server, report=False)
            self._fail(server, self._reason(server, exc))
            return
        offer = offer_of(listed, resources, server.name)
        self._register(server, offer, "ready")
        self._remember(server, offer)

    def _remember(self, server: ServerLink, offer: Offer) -> None:
        """Cache what a live server offers, when it is new or the cached list is stale."""
        if self._cache is None or server.digest is None:
            return
        try:
            self._cache.put(server.name, server.digest, offer, [s.name for s in self._servers])
        except OSError as exc:  # the tools work; only the next start will connect again
            if self.on_event is not None:
                self.on_event(f"could not cache the tools of MCP server {server.name!r}: {exc}")

    async def _resources(self, client: Client[Any]) -> list[Resource | ResourceTemplate]:
        """The server's resources and resource templates, when it says it has any."""
        capabilities = client.server_capabilities
        if capabilities is None or getattr(capabilities, "resources", None) is None:
            return []
        found: list[Resource | ResourceTemplate] = list(await client.list_resources())
        try:
            # Templates first: few, and each stands for many resources.
            return list(await client.list_resource_templates()) + found
        except Exception:  # optional in the protocol: a server may not answer it
            return found

    def _imports(self) -> asyncio.Task[None]:
        if self._importing is None:
            self._importing = asyncio.get_running_loop().create_task(
                asyncio.to_thread(import_fastmcp)
            )
        return self._importing

    def _register(self, server: ServerLink, offer: Offer, state: State) -> None:
        """Offer the server's tools (again, after a live listing) under stable names."""
        source = f"mcp:{server.name}"
        self.registry.remove_source(source)
        own = [t.name for t in offer.tools]
        # A server's own tool named read_resource wins over the built-in reader.
        reader = bool(offer.resources) and RESOURCE_TOOL not in own
        names = exposed_names(server.name, own + [RESOURCE_TOOL] * reader, self.registry.names())
        count = 0
        for item in offer.tools:
            if names[item.name] in self.registry.names():
                continue  # a duplicate name in the server's own listing
            name, timeout = names[item.name], self.call_timeout
            spec = ToolSpec(name, item.description, item.schema, source, item.name, timeout)
            count += self.registry.add(McpTool(spec, server, self))
        if reader:
            spec = resource_spec(names[RESOURCE_TOOL], server.name, offer.resources)
            count += self.registry.add(ResourceReader(spec, server, self))
        server.state, server.tools, server.skipped = state, count, offer.skipped

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
