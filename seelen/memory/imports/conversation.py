"""What every other assistant's export becomes before it is stored: conversations of messages.

Each reader (chatgpt, claude, llm_logs) keeps only what the user saw: the user's and the
assistant's words, in the order shown, with the source's own ids and times. Ids in Seelen are
derived from the source's ids, so importing the same export again finds them present.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from seelen.errors import SeelenError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


class HistoryError(SeelenError):
    """The file is not the export it was taken for (nothing was written)."""


@dataclass(frozen=True)
class Message:
    """One message the user saw: `key` is the source's id for it within its conversation."""

    key: str
    role: str  # "user" or "assistant"
    text: str
    ts_ms: int | None  # None: the source gave no time (it takes a neighbour's)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conversation:
    """One conversation as shown to the user, oldest message first."""

    source: str  # "chatgpt", "claude" or "llm"
    key: str  # the source's id of the conversation
    title: str
    messages: tuple[Message, ...]
    ts_ms: int | None = None  # the conversation's own time, for messages that have none


def stable_id(*parts: str) -> str:
    """A 32-hex-digit id derived from the source's ids (the shape of Seelen's own ids), so
    the same message always gets the same id."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


def message_times(conversation: Conversation) -> list[int] | None:
    """Every message's time in milliseconds; a message without one takes the previous
    message's (the next one's at the start, else the conversation's). None when nothing in
    the conversation has a time."""
    times = [m.ts_ms for m in conversation.messages]
    known = next((t for t in times if t is not None), conversation.ts_ms)
    if known is None:
        return None
    filled, last = [], known
    for t in times:
        last = t if t is not None else last
        filled.append(last)
    return filled


def seconds_to_ms(value: object) -> int | None:
    """A Unix time in (fractional) seconds as integer milliseconds; None if it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    if not 0 < value < 1e11:  # before 5138: anything else is not a time in seconds
        return None
    return round(value * 1000)


def iso_to_ms(value: object, *, naive_zone: tzinfo | None = UTC) -> int | None:
    """An ISO 8601 time as integer milliseconds (a time without offset is in `naive_zone`,
    None: this machine's); None when it is missing or not a time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=naive_zone).astimezone(UTC)
    return (moment - _EPOCH) // _MS


def text_of(raw: dict[str, Any], key: str, default: str = "") -> str:
    """`raw[key]` when it is a string, else `default` (exports leave fields out or null)."""
    value = raw.get(key)
    return value if isinstance(value, str) else default


def joined(pieces: Sequence[str]) -> str:
    """Non-empty pieces of one message, one per line, stripped."""
    return "\n".join(p.strip() for p in pieces if p and p.strip())
