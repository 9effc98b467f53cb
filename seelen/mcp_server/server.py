"""`seelen mcp`'s server on the MCP SDK's `MCPServer`: what `seelen mcp --http` serves, and
where the tools' definitions (input and output schemas, descriptions, annotations) come from
(`catalog.py` keeps them for the stdio server, which does without the SDK).

What each tool does is `tools.py`'s: a memory call to the profile's owner (its
`ProfileService` answers there), returning the protocol's result class as its structure (its
output schema, with each field's description) and the same as readable text; bad input and
every failure are tool errors of one sentence, and the session goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from seelen.config import Settings
from seelen.errors import SeelenError
from seelen.mcp_server import tools
from seelen.mcp_server.profiles import knowledge_configured
from seelen.protocol import results

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools.base import Tool

# What a client may do without asking the user: reading is safe to repeat; remember adds a
# text each time it is called; forget deletes, but forgetting twice changes nothing more.
READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
FORGET = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


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

    def describe_output(self, name: str, kind: type) -> None:
        """Give tool `name`'s output schema (made from `kind`, a protocol result) each
        field's description."""
        tool = self._tool_manager.get_tool(name)
        assert tool is not None, f"no tool {name}"
        _described(tool, kind)

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[Any, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        """A prompt by name; an unknown name is "invalid params" naming the prompts there
        are, as an unknown resource is (not an internal error)."""
        if self._prompt_manager.get_prompt(name) is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts()) or "none"
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name} (prompts: {known})")
        return await super().get_prompt(name, arguments, context)

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


async def _run(
    settings: Settings, name: str, args: dict[str, Any], client: str = ""
) -> CallToolResult:
    """Tool `name` through `tools.run_tool`, as the SDK's result."""
    answer = await asyncio.to_thread(tools.run_tool, settings, name, args, client)
    text = TextContent(type="text", text=answer.text)
    if answer.error:
        return CallToolResult(content=[text], is_error=True)
    return CallToolResult(content=[text], structured_content=answer.structured)


async def _text(read: Callable[[], str]) -> str:
    """A resource's or the prompt's text (ResourceError with one sentence when it fails)."""
    try:
        return await asyncio.to_thread(read)
    except SeelenError as exc:
        raise ResourceError(str(exc)) from None


def client_name(ctx: Context[Any, Any]) -> str:
    """The calling client's name from its `initialize` (e.g. "claude-ai"), or ""."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info else ""


def build_server(
    settings: Settings, *, read_only: bool = False, knowledge: bool | None = None
) -> SeelenMCP:
    """The server for one profile; `read_only` offers no tool that writes; `knowledge`
    (default: whether the profile has knowledge folders) offers `search_knowledge`."""
    import seelen

    server = SeelenMCP(
        "seelen",
        instructions=tools.instructions(settings),
        version=seelen.__version__,
        log_level="WARNING",
    )
    _reading_tools(server, settings)
    if not read_only:
        _writing_tools(server, settings)
    if knowledge_configured(settings) if knowledge is None else knowledge:
        _knowledge_tool(server, settings)
    _resources_and_prompt(server, settings)
    return server


def _described(tool: Tool, kind: type) -> None:
    """Fill the tool's output schema with each field's description (`protocol.codec.doc`)."""
    schema = tool.fn_metadata.output_schema
    if not schema:
        return
    classes = {
        c.__name__: c
        for c in vars(results).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c)
    }
    parts = [(kind.__name__, schema), *schema.get("$defs", {}).items()]
    for name, part in parts:
        cls = classes.get(name)
        if cls is None:
            continue
        for f in dataclasses.fields(cls):
            if "doc" in f.metadata and f.name in part.get("properties", {}):
                part["properties"][f.name]["description"] = f.metadata["doc"]


def _reading_tools(server: SeelenMCP, settings: Settings) -> None:
    @server.tool(annotations=READ)
    async def search_memory(
        query: Annotated[str, Field(description="what to look for: a question, names, topics")],
        limit: Annotated[
            int, Field(ge=1, le=100, description="how many turns and summaries, at most")
        ] = 10,
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
        Returns the best turns and session summaries with date, role, session, text_id and
        score, best first."""
        args = {"query": query, "limit": limit, "since": since, "until": until}
        return await _run(settings, "search_memory", args)

    @server.tool(annotations=READ)
    async def recent_sessions(
        n: Annotated[int, Field(ge=1, le=100, description="how many sessions")] = 5,
    ) -> Annotated[CallToolResult, results.SessionList]:
        """The user's newest conversations with Seelen, newest first: when each began and
        ended, and its summary. Use it for "what did we talk about lately"."""
        return await _run(settings, "recent_sessions", {"n": n})

    @server.tool(annotations=READ)
    async def get_profile() -> Annotated[CallToolResult, results.ProfileInfo]:
        """What Seelen knows about the user (their profile, kept up to date from their
        conversations), Seelen's own persona, and which memory this is (profile, data dir,
        how much it holds). Read it once at the start of a task that is about the user."""
        return await _run(settings, "get_profile", {})

    for name, kind in (
        ("search_memory", results.SearchResult),
        ("recent_sessions", results.SessionList),
        ("get_profile", results.ProfileInfo),
    ):
        server.describe_output(name, kind)


def _writing_tools(server: SeelenMCP, settings: Settings) -> None:
    @server.tool(annotations=WRITE)
    async def remember(
        text: Annotated[str, Field(description="the fact, in the user's own terms")],
        ctx: Context[Any, Any],
    ) -> Annotated[CallToolResult, results.Remembered]:
        """Keep something in the user's long-term memory, dated and marked as coming from
        this assistant, so that Seelen and every assistant connected to it find it later.
        Call it when the user asks you to remember something or states a lasting fact
        about themselves (one fact per call, up to 4,000 characters). Returns its text_id."""
        return await _run(settings, "remember", {"text": text}, client_name(ctx))

    @server.tool(annotations=FORGET)
    async def forget(
        text_id: Annotated[str, Field(description="the text_id from search_memory")],
    ) -> Annotated[CallToolResult, results.Forgotten]:
        """Delete one remembered text (a turn or a session summary) for good, by the
        text_id that search_memory showed. Only when the user asks to forget it."""
        return await _run(settings, "forget", {"text_id": text_id})

    for name, kind in (("remember", results.Remembered), ("forget", results.Forgotten)):
        server.describe_output(name, kind)


def _knowledge_tool(server: SeelenMCP, settings: Settings) -> None:
    @server.tool(annotations=READ)
    async def search_knowledge(
        query: Annotated[str, Field(description="names, places, topics or words to look for")],
        limit: Annotated[int, Field(ge=1, le=100, description="how many passages")] = 5,
    ) -> Annotated[CallToolResult, results.NoteResult]:
        """Search the user's own notes and documents (Seelen's knowledge folders) and
        return the best passages with their file and heading."""
        return await _run(settings, tools.NOTES, {"query": query, "limit": limit})

    server.describe_output(tools.NOTES, results.NoteResult)


def _resources_and_prompt(server: SeelenMCP, settings: Settings) -> None:
    @server.resource(
        tools.PROFILE_URI,
        name="profile",
        description="What Seelen knows about the user (user_profile.txt)",
        mime_type="text/plain",
    )
    async def profile() -> str:
        return await _text(lambda: tools.read_resource(settings, tools.PROFILE_URI) or "")

    @server.resource(
        tools.PERSONA_URI,
        name="persona",
        description="Seelen's persona, its picture of itself (persona_memory.txt)",
        mime_type="text/plain",
    )
    async def persona() -> str:
        return await _text(lambda: tools.read_resource(settings, tools.PERSONA_URI) or "")

    @server.prompt(
        name=tools.PROMPT,
        description="Start with what Seelen knows about the user, and how to use its memory",
    )
    async def seelen_memory() -> str:
        return await _text(lambda: tools.memory_prompt(settings))
