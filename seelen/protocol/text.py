"""The protocol's results as text a model reads well: what `seelen mcp`'s tools return beside
their structure, and what the chat's own `knowledge_search` tool answers."""

from __future__ import annotations

from collections.abc import Sequence

from seelen.counts import counted
from seelen.protocol.results import (
    Forgotten,
    MemoryItem,
    NotePassage,
    ProfileInfo,
    Remembered,
    SessionList,
)

# A summary in a list of hits is cut here: the bundled model's summaries run to kilobytes,
# and the turn that answers must not be pushed far below them.
SUMMARY_CHARS = 400


def when(iso: str) -> str:
    """2024-03-04T10:05:00.000+01:00 as "2024-03-04 10:05"."""
    return iso[:16].replace("T", " ")


def items_text(items: Sequence[MemoryItem]) -> str:
    """Recalled turns and summaries, one line each, in the order given (best first)."""
    lines = []
    for item in items:
        if item.kind == "summary":
            text = item.text if len(item.text) <= SUMMARY_CHARS else item.text[:SUMMARY_CHARS] + "…"
            lines.append(
                f"[{when(item.time)} – {when(item.end or item.time)}] summary of session "
                f"{item.session_id}: {text} (text_id {item.text_id})"
            )
        else:
            score = "" if item.score is None else f", score {item.score:.4f}"
            lines.append(
                f"[{when(item.time)}] {item.role}: {item.text} "
                f"(text_id {item.text_id}, session {item.session_id}{score})"
            )
    return "\n".join(lines) or "Nothing in memory matches."


def remembered_text(result: Remembered) -> str:
    return f"Remembered (text_id {result.text_id}, {when(result.time)}): {result.text}"


def forgotten_text(result: Forgotten) -> str:
    return f"Forgot {result.text_id} ({counted(result.forgotten, 'text')})."


def sessions_text(result: SessionList) -> str:
    lines = []
    for s in result.sessions:
        end = when(s.end) if s.end else "now"
        summary = s.summary or "(no summary yet)"
        lines.append(
            f"[{when(s.start)} – {end}] session {s.session_id} ({s.status}, "
            f"{counted(s.turns, 'turn')}): {summary}"
        )
    return "\n".join(lines) or "No sessions yet."


def profile_text(result: ProfileInfo) -> str:
    """The profile, and which memory it is: a new, empty one is said plainly (a client that
    does not pass SEELEN_DATA_DIR gets the default data dir's memory)."""
    served = f"Seelen's memory: profile {result.name!r} in {result.data_dir}"
    if result.empty:
        served += (
            " (new and empty: nothing remembered yet; if you expected memories, set "
            "SEELEN_DATA_DIR or --profile in this client's configuration)"
        )
    else:
        served += f" ({counted(result.sessions, 'session')}, {counted(result.turns, 'turn')})"
    profile = result.profile.strip() or "(nothing yet)"
    return f"{served}.\nWhat Seelen knows about the user:\n{profile}"


def notes_text(passages: Sequence[NotePassage]) -> str:
    """Passages as text for a model: a "[n] path › heading" line, then the passage."""
    found = (f"[{n}] {p.label()}\n{p.text}" for n, p in enumerate(passages, 1))
    return "\n\n".join(found) or "No note matches."
