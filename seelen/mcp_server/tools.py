"""What each tool, resource and prompt of `seelen mcp` does, without the MCP SDK: the call
it sends to the profile's owner and how its answer reads. The stdio server (`stdio.py`) and
the SDK's HTTP server (`server.py`) both answer through here, so they cannot drift apart.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from seelen.client import exchange
from seelen.config import Settings
from seelen.mcp_server.profiles import knowledge_configured, missing_profile, served
from seelen.protocol import calls, events, results, to_json
from seelen.protocol import text as as_text
from seelen.protocol.codec import Frame

INSTRUCTIONS = """\
Seelen is the user's long-term memory: their conversations with Seelen and with other
assistants, with dates. Call search_memory before answering anything about the user's past,
preferences, people, plans or earlier conversations (search again with other words when the
first search misses). Call remember when the user asks you to remember something, or states
a lasting fact about themselves; one fact per call. forget removes a text by its text_id."""

READING = ("search_memory", "recent_sessions", "get_profile")
WRITING = ("remember", "forget")
NOTES = "search_knowledge"
PROFILE_URI, PERSONA_URI = "seelen://profile", "seelen://persona"
PROMPT = "seelen_memory"


@dataclass(frozen=True)
class ToolAnswer:
    """A tool's result: its text, its structure (a protocol result as JSON), or an error."""

    text: str
    # Any: the JSON of the tool's result class, which its output schema describes.
    structured: dict[str, Any] | None = None
    error: bool = False


def instructions(settings: Settings) -> str:
    """The server's instructions: how to use the memory, and which memory this is."""
    return f"{INSTRUCTIONS}\n\n{served(settings)}"


def tool_names(settings: Settings, *, read_only: bool) -> list[str]:
    """The tools offered: no writing ones when `read_only`, notes when there are any."""
    names = [*READING, *(() if read_only else WRITING)]
    return [*names, NOTES] if knowledge_configured(settings) else names


def _request(name: str, args: Mapping[str, Any], client: str) -> calls.Request:
    if name == "search_memory":
        return calls.Search(
            query=args["query"],
            limit=args.get("limit", 10),
            since=args.get("since"),
            until=args.get("until"),
        )
    if name == "recent_sessions":
        return calls.ListSessions(n=args.get("n", 5))
    if name == "get_profile":
        return calls.GetProfile()
    if name == "remember":
        return calls.Remember(text=args["text"], client=client, key=uuid.uuid4().hex)
    if name == "forget":
        return calls.Forget(text_id=args["text_id"])
    return calls.SearchNotes(query=args["query"], limit=args.get("limit", 5))


_READS: dict[str, tuple[type[Frame], Callable[[Any], str]]] = {
    "search_memory": (results.SearchResult, lambda r: as_text.items_text(r.best_first())),
    "recent_sessions": (results.SessionList, as_text.sessions_text),
    "get_profile": (results.ProfileInfo, as_text.profile_text),
    "remember": (results.Remembered, as_text.remembered_text),
    "forget": (results.Forgotten, as_text.forgotten_text),
    NOTES: (results.NoteResult, lambda r: as_text.notes_text(r.passages)),
}


def ask_owner(settings: Settings, request: calls.Request) -> Frame:
    """The owner's answer to one call, or `Failed` saying in one sentence why there is none
    (blocks: run it in a worker thread)."""
    problem = missing_profile(settings)
    if problem is not None:
        return events.Failed(message=problem)
    return exchange.call(settings, request)


def run_tool(settings: Settings, name: str, args: Mapping[str, Any], client: str) -> ToolAnswer:
    """Tool `name` with arguments already checked against its input schema (blocks)."""
    kind, render = _READS[name]
    answer = ask_owner(settings, _request(name, args, client))
    if not isinstance(answer, kind):
        return ToolAnswer(failure(answer), error=True)
    if isinstance(answer, results.SearchResult):
        answer = answer.top(args.get("limit", 10))  # at most `limit` items, best first
    return ToolAnswer(render(answer), to_json(answer))


def profile_info(settings: Settings) -> results.ProfileInfo:
    """The profile and persona, for the resources and the prompt; SeelenError says why not."""
    from seelen.errors import SeelenError

    answer = ask_owner(settings, calls.GetProfile())
    if not isinstance(answer, results.ProfileInfo):
        raise SeelenError(failure(answer))
    return answer


def read_resource(settings: Settings, uri: str) -> str | None:
    """A resource's text; None for a URI that is not one of Seelen's."""
    if uri not in (PROFILE_URI, PERSONA_URI):
        return None
    info = profile_info(settings)
    return info.profile if uri == PROFILE_URI else info.persona


def memory_prompt(settings: Settings) -> str:
    """The `seelen_memory` prompt: how to use the memory, and what Seelen knows of the user."""
    profile = profile_info(settings).profile.strip() or "(Seelen knows nothing about me yet.)"
    return f"{INSTRUCTIONS}\n\nWhat Seelen knows about me:\n{profile}"


def failure(answer: Frame) -> str:
    """Why an answer is not the result asked for, in one sentence."""
    if isinstance(answer, events.Failed):
        return answer.message
    return f"the background Seelen answered {answer.TAG}"
