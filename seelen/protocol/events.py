"""What one turn yields, as data: the agent produces these events, the chat and `ask` render
them, and the owner's socket carries them unchanged. A reply's words go from the model to the
screen as `TextDelta`, and nothing else. Nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from seelen.protocol.codec import Frame


@dataclass(frozen=True, kw_only=True)
class Saved(Frame):
    """The user's words are committed (`text_id`): from here on nothing typed can be lost."""

    TAG: ClassVar[str] = "saved"
    text_id: str


@dataclass(frozen=True, kw_only=True)
class Recalled(Frame):
    """How much recall put in the prompt for this question, before the model is asked
    (`/why` shows it whole)."""

    TAG: ClassVar[str] = "recalled"
    sessions: int  # related past sessions (their summaries)
    messages: int  # past turns, with their context
    tokens: int  # what those turns cost in the prompt


@dataclass(frozen=True, kw_only=True)
class TextDelta(Frame):
    """A piece of the reply, as it streams."""

    TAG: ClassVar[str] = "delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolStarted(Frame):
    """The model called a tool (`arguments` as the model wrote them, JSON)."""

    TAG: ClassVar[str] = "tool_started"
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, kw_only=True)
class ToolFinished(Frame):
    """A tool call ended, well (`ok`) or not (`content` then starts with "error: ")."""

    TAG: ClassVar[str] = "tool"
    call_id: str
    name: str
    ok: bool
    seconds: float
    content: str  # what the model reads, cut to TOOL_RESULT_CHARS


@dataclass(frozen=True, kw_only=True)
class ToolProgressed(Frame):
    """A running tool reported how far it is (an MCP progress notification)."""

    TAG: ClassVar[str] = "progress"
    tool: str  # the exposed name, as the model called it
    progress: float
    total: float | None = None
    message: str = ""

    def line(self) -> str:
        """E.g. "mem_slow: 3/10 – reading files"."""
        amount = f"{self.progress:g}" + (f"/{self.total:g}" if self.total else "")
        return f"{self.tool}: {amount}" + (f" – {self.message}" if self.message else "")


@dataclass(frozen=True, kw_only=True)
class TurnUsage(Frame):
    """Tokens, tool calls and time the turn took, sent just before `Done`."""

    TAG: ClassVar[str] = "usage"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    cached_tokens: int = 0  # of prompt_tokens, those the model server took from its cache


@dataclass(frozen=True, kw_only=True)
class Notice(Frame):
    """Something the user should know that is not part of the reply."""

    TAG: ClassVar[str] = "notice"
    message: str


@dataclass(frozen=True, kw_only=True)
class KnowledgeUsed(Frame):
    """The notes (file › heading) whose passages were in the prompt of this reply."""

    TAG: ClassVar[str] = "used"
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """ "used: a.md › Intro · b.md", each note once: what a reply shows it used."""
        return "used: " + " · ".join(dict.fromkeys(self.notes))


@dataclass(frozen=True, kw_only=True)
class Done(Frame):
    """The reply, complete and saved: the last event of an answered turn. `session_id` is
    the session it joined (None for an ephemeral one, which joins none)."""

    TAG: ClassVar[str] = "done"
    FINAL: ClassVar[bool] = True
    text: str
    interrupted: bool = False
    session_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Failed(Frame):
    """No answer: `message` says why in one sentence; `saved` whether the question is kept
    (then `/retry` answers it). The end of a turn or of any call that could not be done."""

    TAG: ClassVar[str] = "failed"
    FINAL: ClassVar[bool] = True
    message: str
    saved: bool = False


Event = (
    Saved
    | Recalled
    | TextDelta
    | ToolStarted
    | ToolFinished
    | ToolProgressed
    | TurnUsage
    | Notice
    | KnowledgeUsed
    | Done
    | Failed
)
EVENTS: tuple[type[Frame], ...] = (
    Saved,
    Recalled,
    TextDelta,
    ToolStarted,
    ToolFinished,
    ToolProgressed,
    TurnUsage,
    Notice,
    KnowledgeUsed,
    Done,
    Failed,
)
