"""The MCP server of `seelen mcp`: its tools, resources and prompt, each a memory call to the
profile's owner (`seelen.owner.memory` answers them there).

Built on the MCP SDK's `MCPServer` (the `mcp` package, installed with fastmcp's client).
Every tool returns a typed structure and the same as readable text; bad input and every
failure are tool errors of one sentence, and the session goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from seelen.config import Settings
from seelen.mcp_server import results
from seelen.mcp_server.profiles import knowledge_configured, missing_profile
from seelen.owner import client, wire

INSTRUCTIONS = """\
Seelen is the user's long-term memory: their conversations with Seelen and with other
assistants, with dates. Call search_memory before answering anything about the user's past,
preferences, people, plans or earlier conversations (search again with other words when the
first search misses). Call remember when the user asks you to remember something, or states
a lasting fact about themselves; one fact per call. forget removes a text by its text_id."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
FORGET = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


class SeelenMCP(MCPServer[Any]):
    """MCPServer whose argument errors are one sentence naming the argument, instead of
    pydantic's report of several lines, and whose tools are described by their docstrings
    without the source's indentation (a client's model reads them as text)."""

    def add_tool(  # type: ignore[override]  # the same call, only its description dedented
        self,
        fn: Callable[..., object],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        **options: object,
    ) -> None:
        """Register `fn`, described by its docstring, dedented."""
        if description is None and fn.__doc__:
            description = inspect.cleandoc(fn.__doc__)
        super().add_tool(fn, name, title, description, annotations, **options)  # type: ignore[arg-type]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments that do not fit its schema are one clear tool error."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            return _error(f"{name}: {_first_problem(exc.__cause__)}")


def _first_problem(error: ValidationError) -> str:
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"]) or "the arguments"
    if problem["type"] == "missing":
        return f"{where} is required"
    return f"{where}: {problem['msg'][:1].lower()}{problem['msg'][1:]}"


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class OwnerLink:
    """Sends memory calls to the profile's owner, in a worker thread (the client blocks)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def answer(self, request: wire.MemoryCall) -> wire.Result | wire.Failed:
        """The owner's answer, or a `Failed` saying why there is none."""
        problem = missing_profile(self.settings)
        if problem is not None:
            return wire.Failed(message=problem)
        return await asyncio.to_thread(client.call, self.settings, request)

    async def tool(
        self, request: wire.MemoryCall, render: Callable[[dict[str, Any]], str]
    ) -> CallToolResult:
        """A tool's result: the data as structure and as text, or one error sentence."""
        answer = await self.answer(request)
        if isinstance(answer, wire.Failed):
            return _error(answer.message)
        text = TextContent(type="text", text=render(answer.data))
        return CallToolResult(content=[text], structured_content=answer.data)

    async def data(self, request: wire.MemoryCall) -> dict[str, Any]:
        """The data of a call, for resources and prompts (ResourceError when it fails)."""
        answer = await self.answer(request)
        if isinstance(answer, wire.Failed):
            raise ResourceError(answer.message)
        return answer.data


def client_name(ctx: Context[Any, Any]) -> str:
    """The calling client's name from its `initialize` (e.g. "claude-ai"), or ""."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info else ""


def build_server(settings: Settings, *, read_only: bool = False) -> SeelenMCP:
    """The server for one profile; `read_only` offers no tool that writes."""
    import seelen

    server = SeelenMCP(
        "seelen", instructions=INSTRUCTIONS, version=seelen.__version__, log_level="WARNING"
    )
    link = OwnerLink(settings)
    _reading_tools(server, link)
    if not read_only:
        _writing_tools(server, link)
    if knowledge_configured(settings):
        _knowledge_tool(server, link)
    _resources_and_prompt(server, link)
    return server


def _reading_tools(server: SeelenMCP, link: OwnerLink) -> None:
    @server.tool(annotations=READ)
    async def search_memory(
        query: Annotated[str, Field(description="what to look for: a question, names, topics")],
        limit: Annotated[int, Field(ge=1, le=100, description="how many turns")] = 10,
        since: Annotated[
            str | None, Field(description="only from this ISO date or time on (2024-03-04)")
        ] = None,
        until: Annotated[
            str | None, Field(description="only up to this ISO date (the whole day) or time")
        ] = None,
    ) -> Annotated[CallToolResult, results.SearchResult]:
        """Search the user's long-term memory (past conversations with Seelen and other
        assistants, and things they asked to remember) with the ranking Seelen's own chat
        uses: words and meaning, fused. Call it before answering anything about the user's
        past, preferences, people or plans; search again with other words if it misses.
        Returns the best session summaries and turns with date, role, session, text_id and
        score, best first."""
        return await link.tool(
            wire.Search(query=query, limit=limit, since=since, until=until), results.search_text
        )

    @server.tool(annotations=READ)
    async def recent_sessions(
        n: Annotated[int, Field(ge=1, le=100, description="how many sessions")] = 5,
    ) -> Annotated[CallToolResult, results.RecentSessions]:
        """The user's newest conversations with Seelen, newest first: when each began and
        ended, and its summary. Use it for "what did we talk about lately"."""
        return await link.tool(wire.RecentSessions(n=n), results.sessions_text)

    @server.tool(annotations=READ)
    async def get_profile() -> Annotated[CallToolResult, results.Profile]:
        """What Seelen knows about the user (their profile, kept up to date from their
        conversations) and Seelen's own persona. Read it once at the start of a task that
        is about the user."""
        return await link.tool(wire.GetProfile(), results.profile_text)


def _writing_tools(server: SeelenMCP, link: OwnerLink) -> None:
    @server.tool(annotations=WRITE)
    async def remember(
        text: Annotated[str, Field(description="the fact, in the user's own terms")],
        ctx: Context[Any, Any],
    ) -> Annotated[CallToolResult, results.Remembered]:
        """Keep something in the user's long-term memory, dated and marked as coming from
        this assistant, so that Seelen and every assistant connected to it find it later.
        Call it when the user asks you to remember something or states a lasting fact
        about themselves (one fact per call, up to 4,000 characters). Returns its text_id."""
        request = wire.Remember(text=text, client=client_name(ctx), key=uuid.uuid4().hex)
        return await link.tool(request, results.remembered_text)

    @server.tool(annotations=FORGET)
    async def forget(
        text_id: Annotated[str, Field(description="the text_id from search_memory")],
    ) -> Annotated[CallToolResult, results.Forgotten]:
        """Delete one remembered text (a turn or a session summary) for good, by the
        text_id that search_memory showed. Only when the user asks to forget it."""
        return await link.tool(wire.Forget(text_id=text_id), results.forgotten_text)


def _knowledge_tool(server: SeelenMCP, link: OwnerLink) -> None:
    @server.tool(annotations=READ)
    async def search_knowledge(
        query: Annotated[str, Field(description="names, places, topics or words to look for")],
        limit: Annotated[int, Field(ge=1, le=100, description="how many passages")] = 5,
    ) -> Annotated[CallToolResult, results.KnowledgeResult]:
        """Search the user's own notes and documents (Seelen's knowledge folders) and
        return the best passages with their file and heading."""
        request = wire.SearchKnowledge(query=query, limit=limit)
        return await link.tool(request, results.knowledge_text)


def _resources_and_prompt(server: SeelenMCP, link: OwnerLink) -> None:
    @server.resource(
        "seelen://profile",
        name="profile",
        description="What Seelen knows about the user (user_profile.txt)",
        mime_type="text/plain",
    )
    async def profile() -> str:
        return str((await link.data(wire.GetProfile()))["profile"])

    @server.resource(
        "seelen://persona",
        name="persona",
        description="Seelen's persona, its picture of itself (persona_memory.txt)",
        mime_type="text/plain",
    )
    async def persona() -> str:
        return str((await link.data(wire.GetProfile()))["persona"])

    @server.prompt(
        name="seelen_memory",
        description="Start with what Seelen knows about the user, and how to use its memory",
    )
    async def seelen_memory() -> str:
        data = await link.data(wire.GetProfile())
        profile_text = str(data["profile"]).strip() or "(Seelen knows nothing about me yet.)"
        return f"{INSTRUCTIONS}\n\nWhat Seelen knows about me:\n{profile_text}"
