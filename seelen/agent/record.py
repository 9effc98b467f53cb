"""The record of one answer: the turns it adds, and what it cost (tokens, tools, time)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from seelen.memory.sessions import Sessions
from seelen.protocol.events import TurnUsage
from seelen.store import Turn, now_ms


@dataclass
class Tally:
    """What one answer cost so far, across its rounds of tool calls."""

    started: float = field(default_factory=time.monotonic)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    cached_tokens: int = 0

    def usage(self) -> TurnUsage:
        return TurnUsage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            tool_calls=self.tool_calls,
            seconds=round(time.monotonic() - self.started, 3),
            cached_tokens=self.cached_tokens,
        )


class TurnLog:
    """The turns one answer adds: saved to the session, or (ephemeral) only kept here."""

    def __init__(self, sessions: Sessions, *, keep: bool) -> None:
        self.sessions = sessions
        self.keep = keep
        self.turns: list[Turn] = []
        self.images: dict[str, Any] = {}  # tool call id → its result's image parts

    def add(self, role: str, text: str, meta: dict[str, Any] | None = None) -> Turn:
        """Record one turn of this answer (committed first, unless ephemeral)."""
        if self.keep:
            turn = self.sessions.add_turn(role, text, meta)
        else:
            sid = self.sessions.current.session_id
            turn = Turn(f"ephemeral-{len(self.turns)}", sid, now_ms(), role, text, 0, meta or {})
        self.turns.append(turn)
        return turn
