"""Session lifecycle: restore, reset, the rolling summary, and the resumable archive.

Archiving is a chain of recorded steps (summary → persona/profile → strip quotes → archived).
Each finished step is written to SQLite, so if a model call fails or the process dies, the
next `/save` or start picks the archive up where it stopped and nothing is summarised twice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from seelen.clock import Clock
from seelen.errors import ModelError
from seelen.llm import ChatModel
from seelen.memory.persona import PERSONA, PROFILE, Change, PersonaFiles
from seelen.prompts import (
    fold_messages,
    persona_update_messages,
    profile_update_messages,
    session_summary_messages,
    strip_quotes,
)
from seelen.store import EPHEMERAL, Session, Store, Turn

PROFILE_WORDS, PERSONA_WORDS = 400, 300
# Token caps on the tool model's answers: the prompts ask for at most ~400 words, and a weak
# model that loops must not run on until its context is full.
SUMMARY_TOKENS, FILE_TOKENS = 600, 800
# A hard cap on what a model may write into a permanent file, whatever it was told.
MAX_FILE_CHARS = 6000

Progress = Callable[[str], None]


def plausible_rewrite(text: str) -> bool:
    """False for answers a weak model produces when it loops: mostly repeated lines."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    return len(set(lines)) / len(lines) >= 0.7 or len(lines) < 4


@dataclass
class ArchiveResult:
    """What an archive did: the archived session, its summary and the file changes."""

    session_id: str
    summary: str = ""
    changes: list[Change] = field(default_factory=list)
    resumed: bool = False


class Sessions:
    """Owns the current session and everything that happens to sessions over time."""

    def __init__(
        self,
        store: Store,
        files: PersonaFiles,
        tool_model: ChatModel | None,
        clock: Clock,
        *,
        tool_model_name: str = "",
        max_live: int = 20,
        fold_count: int = 10,
    ) -> None:
        self.store = store
        self.files = files
        self.tool_model = tool_model
        self.clock = clock
        self.tool_model_name = tool_model_name
        self.max_live = max_live
        self.fold_count = fold_count
        self._current: Session | None = None

    # --- the current session -------------------------------------------------------------

    def open(self) -> tuple[Session, bool]:
        """The active session from last time (restored=True), or a new one."""
        session = self.store.active_session()
        if session is not None and not self.store.archive_steps(session.session_id):
            self._current = session
            return session, True
        self._current = self.store.create_session() if session is None else session
        return self._current, False

    def open_ephemeral(self) -> Session:
        """A throw-away session for one exchange (see `discard`)."""
        self._current = self.store.create_session(EPHEMERAL)
        return self._current

    def discard(self) -> list[str]:
        """Delete the current session entirely; returns the deleted text ids."""
        return self.store.delete_session(self.current.session_id)

    def drop_leftover_ephemeral(self) -> list[str]:
        """Delete ephemeral sessions a crash left behind; returns their text ids."""
        ids: list[str] = []
        for session in self.store.sessions_with_status(EPHEMERAL):
            ids += self.store.delete_session(session.session_id)
        return ids

    @property
    def current(self) -> Session:
        """The session being talked in (refreshed from the store)."""
        if self._current is None:
            raise RuntimeError("Sessions.open() was not called")
        fresh = self.store.get_session(self._current.session_id)
        self._current = fresh or self._current
        return self._current

    def pending_archive(self) -> bool:
        """True when the current session is half-archived and must be finished first."""
        return bool(self._current and self.store.archive_steps(self._current.session_id))

    def live_turns(self) -> list[Turn]:
        """The turns of the current session that are not folded into its summary."""
        session = self.current
        return self.store.turns(session.session_id, after=session.folded_count)

    def reset(self) -> list[str]:
        """Forget the current session's turns; returns their text ids (for the index)."""
        return self.store.clear_session(self.current.session_id)

    # --- rolling summary -----------------------------------------------------------------

    async def maybe_fold(self) -> bool:
        """Fold the oldest exchanges into the rolling summary once more than `max_live`."""
        session = self.current
        live = await asyncio.to_thread(
            self.store.turns, session.session_id, after=session.folded_count
        )
        # The window counts exchanges (a user message and everything answering it, tool calls
        # included), so a reply that used tools does not bring the fold closer.
        starts = [i for i, turn in enumerate(live) if turn.role == "user"]
        if len(starts) <= self.max_live or self.tool_model is None:
            return False
        cut = starts[self.fold_count]  # the oldest `fold_count` exchanges, whole
        lines = self._lines(live[:cut])
        summary = await self.tool_model.complete(
            fold_messages(session.rolling_summary, lines),
            model=self.tool_model_name,
            max_tokens=SUMMARY_TOKENS,
        )
        if not summary:
            raise ModelError("the tool model returned an empty summary")
        await asyncio.to_thread(
            self.store.set_rolling_summary,
            session.session_id,
            summary,
            session.folded_count + cut,
        )
        return True

    def _lines(self, turns: Sequence[Turn]) -> list[tuple[str, str, str]]:
        return [
            (self.clock.fmt(t.ts_ms), t.role, t.text)
            for t in turns
            if t.role in ("user", "assistant") and t.text
        ]

    # --- archive -------------------------------------------------------------------------

    async def archive(self, progress: Progress = lambda _: None) -> ArchiveResult:
        """Archive the current session (resuming an interrupted archive) and start a new one."""
        session = self.current
        sid = session.session_id
        steps = await asyncio.to_thread(self.store.archive_steps, sid)
        result = ArchiveResult(sid, resumed=bool(steps))
        turns = await asyncio.to_thread(self.store.turns, sid)
        if any(t.role in ("user", "assistant") for t in turns):
            if self.tool_model is None:
                raise ModelError("no tool model is configured to summarise the session")
            await self._archive_memory(session, turns, steps, result, progress)
        await asyncio.to_thread(self.store.record_archive_step, sid, "archived")
        await asyncio.to_thread(self.store.mark_archived, sid)
        self._current = await asyncio.to_thread(self.store.create_session)
        return result

    async def _archive_memory(
        self,
        session: Session,
        turns: list[Turn],
        steps: dict[str, str],
        result: ArchiveResult,
        progress: Progress,
    ) -> None:
        sid = session.session_id
        if "summary" in steps:
            result.summary = steps["summary"]
        else:
            progress("summarising the session")
            live = turns[session.folded_count :]
            result.summary = await self._complete(
                session_summary_messages(session.rolling_summary, self._lines(live)),
                SUMMARY_TOKENS,
            )
            start, end = turns[0].ts_ms, turns[-1].ts_ms
            await asyncio.to_thread(self.store.add_summary, sid, result.summary, start, end)
            await asyncio.to_thread(self.store.record_archive_step, sid, "summary", result.summary)
        todo = [name for name in (PROFILE, PERSONA) if name not in steps]
        if todo:
            progress("updating the user profile and persona")
            changes = await asyncio.gather(
                *(self._update_file(sid, n, result.summary) for n in todo)
            )
            result.changes.extend(changes)
        if "strip_quotes" not in steps:
            progress("tidying recalled quotations")
            await asyncio.to_thread(self._strip_quotes, turns)
            await asyncio.to_thread(self.store.record_archive_step, sid, "strip_quotes")

    async def _update_file(self, sid: str, name: str, summary: str) -> Change:
        current = self.files.read(name)
        if name == PROFILE:
            messages = profile_update_messages(current, summary, PROFILE_WORDS)
        else:
            messages = persona_update_messages(current, summary, PERSONA_WORDS)
        text = (await self._complete(messages, FILE_TOKENS))[:MAX_FILE_CHARS]
        if not plausible_rewrite(text):
            text = current  # a degenerate answer (loops, echoes) must not replace the file
        change = await asyncio.to_thread(self.files.write, name, text)
        payload = json.dumps({"changed": change.changed})
        await asyncio.to_thread(self.store.record_archive_step, sid, name, payload)
        return change

    async def _complete(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        assert self.tool_model is not None
        text = await self.tool_model.complete(
            messages, model=self.tool_model_name, max_tokens=max_tokens
        )
        if not text.strip():
            raise ModelError("the tool model returned an empty answer")
        return text.strip()

    def _strip_quotes(self, turns: Sequence[Turn]) -> None:
        changed = []
        for turn in turns:
            cleaned = strip_quotes(turn.text)
            if cleaned != turn.text:
                self.store.update_turn_text(turn.text_id, cleaned)
                changed.append(turn.text_id)
        self.store.mark_indexed(changed, indexed=False)  # re-embed the cleaned text
