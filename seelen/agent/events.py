"""What one turn yields, as data: the agent produces these events and the front-ends
(the REPL, `ask`, the owner's wire) render them. Nothing here does I/O."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seelen.memory.context import one_line

if TYPE_CHECKING:
    from seelen.knowledge import Passage
    from seelen.memory.recall import RecallResult
    from seelen.tools.base import ToolOutcome
    from seelen.tools.mcp_content import ToolProgress


@dataclass(frozen=True)
class Saved:
    """The user's words are committed (`text_id`): from here on nothing typed can be lost."""

    text_id: str


@dataclass(frozen=True)
class Recalled:
    """What recall found for the question, before the model is asked."""

    result: RecallResult


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply, as it streams."""

    text: str


@dataclass(frozen=True)
class ToolStarted:
    """The model called a tool (`arguments` as the model wrote them, JSON)."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolFinished:
    """A tool call ended, well or not (see `ToolOutcome.ok`)."""

    outcome: ToolOutcome


@dataclass(frozen=True)
class ToolProgressed:
    """A running tool reported how far it is (MCP progress notifications)."""

    progress: ToolProgress


@dataclass(frozen=True)
class TurnUsage:
    """Tokens, tool calls and time the turn took, sent just before `Done`."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    cached_tokens: int = 0  # of prompt_tokens, those the model server took from its cache


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not part of the reply."""

    message: str


@dataclass(frozen=True)
class Failed:
    """The turn could not be answered; the user's words are saved and `/retry` works."""

    message: str


@dataclass(frozen=True)
class KnowledgeUsed:
    """Passages of the user's notes that were in the prompt of this reply."""

    passages: Sequence[Passage]


@dataclass(frozen=True)
class Done:
    """The reply, complete and saved: the last event of an answered turn."""

    text: str
    interrupted: bool = False


Event = (
    Saved
    | Recalled
    | TextDelta
    | ToolStarted
    | ToolFinished
    | ToolProgressed
    | TurnUsage
    | Notice
    | Failed
    | KnowledgeUsed
    | Done
)


def outcome_preview(text: str, limit: int = 80) -> str:
    """A one-line preview of a tool's arguments or result."""
    line = " ".join(text.split())
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict):
            line = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        pass
    return one_line(line, limit)
