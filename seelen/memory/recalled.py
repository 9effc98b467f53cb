"""What recall hands on: ranked summaries and turns, and the passages the prompt shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seelen.store import Summary, Turn


@dataclass(frozen=True)
class RecalledItem:
    """One recalled summary or turn, with why it was recalled."""

    text_id: str
    session_id: str
    kind: str  # "summary" or "turn"
    text: str
    role: str
    start_ms: int
    end_ms: int
    score: float
    sources: dict[str, int] = field(default_factory=dict)  # ranker → rank (1 = best)
    in_prompt: bool = False  # chat would show it: within RECALL_CONV_NUM and RECALL_TOKENS
    seq: int = 0  # a turn's place in the store (conversation order)
    rank: int = 0  # a turn's place in the ranking (1 = best); 0 when only context
    # A turn shown only because it makes a recalled turn understandable: that turn's id.
    context_for: str = ""

    def but(self, **changes: Any) -> RecalledItem:  # Any: each field has its own type
        """A copy with `changes` (field name to value), as `dataclasses.replace` makes it but
        without running `__init__` again: ten times cheaper (0.5 against 4.9 µs), and a recall
        makes about 250 copies a question (ranks, `in_prompt`, context turns)."""
        unknown = changes.keys() - self.__dataclass_fields__.keys()
        if unknown:
            raise TypeError(f"RecalledItem has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(RecalledItem)
        copy.__dict__.update(self.__dict__, **changes)
        return copy


@dataclass(frozen=True)
class Passage:
    """What the prompt shows of one past session: its recalled turns and the turns around
    them, in conversation order. `gaps[i]` is True when turns were left out before turn i."""

    session_id: str
    turns: tuple[RecalledItem, ...]
    gaps: tuple[bool, ...]
    tokens: int  # what it costs in the prompt, heading included

    @property
    def start_ms(self) -> int:
        """When its first shown turn was said."""
        return self.turns[0].start_ms


@dataclass(frozen=True)
class RecallResult:
    """Recall for one question. `turns` are ranked (best first); `passages` are what chat
    puts in the prompt, sessions in the order of their best turn, within `tokens`."""

    query: str
    summaries: list[RecalledItem]
    turns: list[RecalledItem]
    seconds: float
    mode: str = "hybrid"
    notice: str = ""  # why vector search was left out, when it was
    passages: list[Passage] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """What the passages cost in the prompt."""
        return sum(p.tokens for p in self.passages)

    def prompt_turns(self) -> list[RecalledItem]:
        """Every turn the prompt shows, passage by passage, in conversation order."""
        return [t for p in self.passages for t in p.turns]


def turn_item(t: Turn, score: float, ranks: dict[str, int]) -> RecalledItem:
    """A stored turn as recalled, with its score and the rankers' ranks."""
    return RecalledItem(
        t.text_id, t.session_id, "turn", t.text, t.role, t.ts_ms, t.ts_ms, score, ranks, seq=t.seq
    )


def summary_item(s: Summary, score: float, ranks: dict[str, int]) -> RecalledItem:
    """A stored session summary as recalled, with its score and the rankers' ranks."""
    return RecalledItem(
        s.text_id, s.session_id, "summary", s.text, "", s.start_ms, s.end_ms, score, ranks
    )
