"""Conversations from another assistant into the store: archived sessions, turns, summaries.

Every id is derived from the source's ids, so importing the same export again adds nothing,
a re-download that grew adds only its new messages, and an import cut short resumes where it
stopped. Conversations are written in batches, each batch in one transaction, never split:
a conversation is stored whole or not at all. No model is called: each new session gets a
summary made of its title and first lines, so the session is found by what it was about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from seelen.counts import counted
from seelen.memory.clock import Clock
from seelen.memory.context import clip
from seelen.memory.imports.conversation import Conversation, message_times, stable_id
from seelen.store import ARCHIVED, Session, Store, Summary, Turn

NAMES = {"chatgpt": "ChatGPT", "claude": "Claude", "llm": "llm"}
# About as many turns as one transaction takes in a fraction of a second: an interrupted
# import loses no more than that (it is redone on the next run), and progress moves often.
BATCH_TURNS = 1000
# The made-up summary: the title and the opening of the first exchange, within what one
# recalled summary gets in a prompt.
OPENING_TOKENS = 60

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class HistoryReport:
    """What an import of another assistant's history found and added."""

    source: str
    conversations: int  # in the export
    sessions: int  # new sessions
    turns: int  # new turns (in new sessions and in grown ones)
    summaries: int
    empty: int = 0  # conversations holding nothing the user saw (nothing to store)

    def describe(self) -> str:
        """One line saying what the import added."""
        name = NAMES.get(self.source, self.source)
        line = (
            f"Imported {counted(self.turns, 'turn')} in {counted(self.sessions, 'new session')} "
            f"from {name} ({counted(self.conversations, 'conversation')} in the export"
        )
        line += f", {self.empty} with nothing to keep)" if self.empty else ")"
        if not self.turns and self.conversations > self.empty:  # some had words to keep
            line += "; everything was already here"
        return line + "."


def records(conversation: Conversation, clock: Clock) -> tuple[Session, list[Turn], Summary] | None:
    """The session, turns and made-up summary of one conversation (None: nothing to store)."""
    times = message_times(conversation)
    if not conversation.messages or times is None:
        return None
    source, key = conversation.source, conversation.key
    session_id = stable_id(source, key)
    turns = [
        Turn(
            stable_id(source, key, m.key),
            session_id,
            ts,
            m.role,
            m.text,
            0,
            {"source": source, **m.meta},
        )
        for m, ts in zip(conversation.messages, times, strict=True)
    ]
    start, end = min(times), max(times)
    session = Session(session_id, start, end, ARCHIVED, len(turns))
    text = opening(conversation, clock, start)
    summary = Summary(stable_id(source, key, "summary"), session_id, text, start, end)
    return session, turns, summary


def opening(conversation: Conversation, clock: Clock, start_ms: int) -> str:
    """A summary without a model: where and when the conversation was, its title, and how it
    began (the first message and the first answer, clipped)."""
    name = NAMES.get(conversation.source, conversation.source)
    title = conversation.title.strip()
    head = f"{name} conversation “{title}”" if title else f"{name} conversation"
    first: dict[str, str] = {}
    for m in conversation.messages:
        first.setdefault(m.role, " ".join(m.text.split()))
    said = [clip(first[r], OPENING_TOKENS) for r in ("user", "assistant") if r in first]
    return f"{head} ({clock.fmt(start_ms)[:10]}): " + " — ".join(said)


def write_history(
    store: Store,
    conversations: Iterable[Conversation],
    clock: Clock,
    progress: Progress | None = None,
    *,
    batch_turns: int = BATCH_TURNS,
) -> HistoryReport:
    """Store every conversation that is not stored yet (and the new turns of grown ones),
    reading them one at a time (an export's `Conversations` are never held whole)."""
    new = [0, 0, 0]
    seen = [0, 0]  # conversations and messages read
    total = getattr(conversations, "messages", None)
    source: list[str] = []
    empty = [0]
    for batch in _batches(_counted(conversations, seen, source), clock, batch_turns, empty):
        added = store.import_history(*batch)
        new = [a + b for a, b in zip(new, added, strict=True)]
        if progress:
            progress(seen[1], total if isinstance(total, int) else seen[1])
    sessions, turns, summaries = new
    origin = source[0] if source else ""
    return HistoryReport(origin, seen[0], sessions, turns, summaries, empty[0])


def _counted(
    conversations: Iterable[Conversation], seen: list[int], source: list[str]
) -> Iterator[Conversation]:
    """`conversations`, counting them as they pass (and noting their source)."""
    for conversation in conversations:
        seen[0] += 1
        seen[1] += len(conversation.messages)
        if not source:
            source.append(conversation.source)
        yield conversation


def _batches(
    conversations: Iterable[Conversation], clock: Clock, batch_turns: int, empty: list[int]
) -> Iterator[tuple[list[Session], list[Turn], list[Summary]]]:
    """Whole conversations in batches of about `batch_turns` turns; counts in `empty` the
    conversations that hold nothing to store."""
    sessions: list[Session] = []
    turns: list[Turn] = []
    summaries: list[Summary] = []
    for conversation in conversations:
        made = records(conversation, clock)
        if made is None:
            empty[0] += 1
            continue
        sessions.append(made[0])
        turns += made[1]
        summaries.append(made[2])
        if len(turns) >= batch_turns:
            yield sessions, turns, summaries
            sessions, turns, summaries = [], [], []
    if sessions:
        yield sessions, turns, summaries
