"""The MCP server of `seelen mcp`: its tools, resources and prompt, each a memory call to the
profile's owner (its `ProfileService` answers them there).

Built on the MCP SDK's `MCPServer` (the `mcp` package, installed with fastmcp's client).
Every tool returns the protocol's result class as its structure (its output schema, with
each field's description) and the same as readable text (`seelen.protocol.text`); bad input
and every failure are tool errors of one sentence, and the session goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

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

from seelen.client import exchange
from seelen.config import Settings
from seelen.mcp_server.profiles import knowledge_configured, missing_profile, served
from seelen.protocol import calls, events, results, to_json
from seelen.protocol import text as as_text
from seelen.protocol.codec import Frame

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools.base import Tool

R = TypeVar("R", bound=Frame)

INSTRUCTIONS = """\
Seelen is the user's long-term memory: their conversations with Seelen and with other
assistants, with dates. Call search_memory before answering anything about the user's past,
preferences, people, plans or earlier conversations (search again with other words when the
first search misses). Call remember when the user asks you to remember something, or states
a lasting fact about themselves; one fact per call. forget removes a text by its text_id."""

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


class OwnerLink:
    """Sends memory calls to the profile's owner, in a worker thread (the client blocks)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def answer(self, request: calls.Request) -> Frame:
        """The owner's answer, or a `Failed` saying why there is none."""
        problem = missing_profile(self.settings)
        if problem is not None:
            return events.Failed(message=problem)
        return await asyncio.to_thread(exchange.call, self.settings, request)

    async def tool(
        self, request: calls.Request, kind: type[R], render: Callable[[R], str]
    ) -> CallToolResult:
        """A tool's result: the `kind` result as structure and as text, or one error sentence."""
        answer = await self.answer(request)
        if not isinstance(answer, kind):
            return _error(_failure(answer))
        content = TextContent(type="text", text=render(answer))
        return CallToolResult(content=[content], structured_content=to_json(answer))

    async def result(self, request: calls.Request, kind: type[R]) -> R:
        """The result of a call, for resources and prompts (ResourceError when it fails)."""
        answer = await self.answer(request)
        if not isinstance(answer, kind):
            raise ResourceError(_failure(answer))
        return answer


def _failure(answer: Frame) -> str:
    if isinstance(answer, events.Failed):
        return answer.message
    return f"the background Seelen answered {answer.TAG}"


def client_name(ctx: Context[Any, Any]) -> str:
    """The calling client's name from its `initialize` (e.g. "claude-ai"), or ""."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info else ""


def build_server(settings: Settings, *, read_only: bool = False) -> SeelenMCP:
    """The server for one profile; `read_only` offers no tool that writes."""
    import seelen

    server = SeelenMCP(
        "seelen",
        instructions=f"{INSTRUCTIONS}\n\n{served(settings)}",
        version=seelen.__version__,
        log_level="WARNING",
    )
    link = OwnerLink(settings)
    _reading_tools(server, link)
    if not read_only:
        _writing_tools(server, link)
    if knowledge_configured(settings):
        _knowledge_tool(server, link)
    _resources_and_prompt(server, link)
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


def _reading_tools(server: SeelenMCP, link: OwnerLink) -> None:
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
        request = calls.Search(query=query, limit=limit, since=since, until=until)
        answer = await link.answer(request)
        if not isinstance(answer, results.SearchResult):
            return _error(_failure(answer))
        best = answer.top(limit)
        content = TextContent(type="text", text=as_text.items_text(best.best_first()))
        return CallToolResult(content=[content], structured_content=to_json(best))

    @server.tool(annotations=READ)
    async def recent_sessions(
        n: Annotated[int, Field(ge=1, le=100, description="how many sessions")] = 5,
    ) -> Annotated[CallToolResult, results.SessionList]:
        """The user's newest conversations with Seelen, newest first: when each began and
        ended, and its summary. Use it for "what did we talk about lately"."""
        request = calls.ListSessions(n=n)
        return await link.tool(request, results.SessionList, as_text.sessions_text)

    @server.tool(annotations=READ)
    async def get_profile() -> Annotated[CallToolResult, results.ProfileInfo]:
        """What Seelen knows about the user (their profile, kept up to date from their
        conversations), Seelen's own persona, and which memory this is (profile, data dir,
        how much it holds). Read it once at the start of a task that is about the user."""
        return await link.tool(calls.GetProfile(), results.ProfileInfo, as_text.profile_text)

    for name, kind in (
        ("search_memory", results.SearchResult),
        ("recent_sessions", results.SessionList),
        ("get_profile", results.ProfileInfo),
    ):
        server.describe_output(name, kind)


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
        request = calls.Remember(text=text, client=client_name(ctx), key=uuid.uuid4().hex)
        return await link.tool(request, results.Remembered, as_text.remembered_text)

    @server.tool(annotations=FORGET)
    async def forget(
        text_id: Annotated[str, Field(description="the text_id from search_memory")],
    ) -> Annotated[CallToolResult, results.Forgotten]:
        """Delete one remembered text (a turn or a session summary) for good, by the
        text_id that search_memory showed. Only when the user asks to forget it."""
        request = calls.Forget(text_id=text_id)
        return await link.tool(request, results.Forgotten, as_text.forgotten_text)

    for name, kind in (("remember", results.Remembered), ("forget", results.Forgotten)):
        server.describe_output(name, kind)


def _knowledge_tool(server: SeelenMCP, link: OwnerLink) -> None:
    @server.tool(annotations=READ)
    async def search_knowledge(
        query: Annotated[str, Field(description="names, places, topics or words to look for")],
        limit: Annotated[int, Field(ge=1, le=100, description="how many passages")] = 5,
    ) -> Annotated[CallToolResult, results.NoteResult]:
        """Search the user's own notes and documents (Seelen's knowledge folders) and
        return the best passages with their file and heading."""
        request = calls.SearchNotes(query=query, limit=limit)
        return await link.tool(
            request, results.NoteResult, lambda r: as_text.notes_text(r.passages)
        )

    server.describe_output("search_knowledge", results.NoteResult)


def _resources_and_prompt(server: SeelenMCP, link: OwnerLink) -> None:
    @server.resource(
        "seelen://profile",
        name="profile",
        description="What Seelen knows about the user (user_profile.txt)",
        mime_type="text/plain",
    )
    async def profile() -> str:
        return (await link.result(calls.GetProfile(), results.ProfileInfo)).profile

    @server.resource(
        "seelen://persona",
        name="persona",
        description="Seelen's persona, its picture of itself (persona_memory.txt)",
        mime_type="text/plain",
    )
    async def persona() -> str:
        return (await link.result(calls.GetProfile(), results.ProfileInfo)).persona

    @server.prompt(
        name="seelen_memory",
        description="Start with what Seelen knows about the user, and how to use its memory",
    )
    async def seelen_memory() -> str:
        info = await link.result(calls.GetProfile(), results.ProfileInfo)
        profile_text = info.profile.strip() or "(Seelen knows nothing about me yet.)"
        return f"{INSTRUCTIONS}\n\nWhat Seelen knows about me:\n{profile_text}"
