"""What the MCP tools return: a typed structure (the tool's output schema) and the same as
readable text, with every id, date and session as `seelen memory search --json` shows them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class MemoryItem(BaseModel):
    """One recalled turn or session summary, as `seelen memory search --json` prints it."""

    rank: int
    text_id: str = Field(description="the text's id: give it to forget")
    session_id: str
    time: str = Field(description="ISO 8601 with milliseconds, in the user's TIMEZONE")
    end: str | None = Field(None, description="a summary: when its session ended")
    role: str | None = Field(None, description="a turn: user or assistant")
    text: str
    score: float = Field(description="the fused score it was ranked by; higher is better")
    rankers: dict[str, int] = Field(description="which rankers found it, at which rank")
    in_prompt: bool = Field(description="whether Seelen's own chat would show it to its model")


class SearchResult(BaseModel):
    """Recall's ranking for one query."""

    query: str
    ms: float
    since: str | None = None
    until: str | None = None
    summaries: list[MemoryItem]
    turns: list[MemoryItem]


class Remembered(BaseModel):
    """A text kept in memory."""

    text_id: str
    session_id: str
    time: str
    role: str
    text: str
    client: str


class Forgotten(BaseModel):
    """What `forget` removed."""

    text_id: str
    forgotten: int


class SessionInfo(BaseModel):
    """One session: its dates and summary."""

    session_id: str
    status: str = Field(description="active (being talked in) or archived")
    start: str
    end: str | None
    turns: int
    summary: str
    summary_id: str | None


class RecentSessions(BaseModel):
    """The newest sessions, newest first."""

    sessions: list[SessionInfo]


class Profile(BaseModel):
    """What Seelen knows about the user, and its own persona."""

    profile: str
    persona: str


class Passage(BaseModel):
    """A piece of a note from the knowledge folders."""

    path: str
    heading: str
    text: str
    score: float


class KnowledgeResult(BaseModel):
    """The best passages for one query."""

    query: str
    passages: list[Passage]


def _when(iso: str) -> str:
    """2024-03-04T10:05:00.000+01:00 as "2024-03-04 10:05"."""
    return iso[:16].replace("T", " ")


def search_text(data: dict[str, Any]) -> str:
    """The ranking as lines a model reads well."""
    lines = []
    for item in data["summaries"]:
        lines.append(
            f"[{_when(item['time'])} – {_when(item['end'])}] summary of session "
            f"{item['session_id']}: {item['text']} (text_id {item['text_id']})"
        )
    for item in data["turns"]:
        lines.append(
            f"[{_when(item['time'])}] {item['role']}: {item['text']} "
            f"(text_id {item['text_id']}, session {item['session_id']}, "
            f"score {item['score']:.4f})"
        )
    return "\n".join(lines) or "Nothing in memory matches."


def remembered_text(data: dict[str, Any]) -> str:
    return f"Remembered (text_id {data['text_id']}, {_when(data['time'])}): {data['text']}"


def forgotten_text(data: dict[str, Any]) -> str:
    return f"Forgot {data['text_id']} ({_counted(data['forgotten'], 'text')})."


def sessions_text(data: dict[str, Any]) -> str:
    lines = []
    for s in data["sessions"]:
        end = _when(s["end"]) if s["end"] else "now"
        summary = s["summary"] or "(no summary yet)"
        lines.append(
            f"[{_when(s['start'])} – {end}] session {s['session_id']} ({s['status']}, "
            f"{_counted(s['turns'], 'turn')}): {summary}"
        )
    return "\n".join(lines) or "No sessions yet."


def profile_text(data: dict[str, Any]) -> str:
    profile = data["profile"].strip() or "(nothing yet)"
    return f"What Seelen knows about the user:\n{profile}"


def knowledge_text(data: dict[str, Any]) -> str:
    parts = [
        f"[{n}] {p['path']}{' › ' + p['heading'] if p['heading'] else ''}\n{p['text']}"
        for n, p in enumerate(data["passages"], 1)
    ]
    return "\n\n".join(parts) or "No note matches."


def _counted(n: int, noun: str) -> str:
    """ "1 turn", "2 turns": a client's model reads these lines as sentences."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
