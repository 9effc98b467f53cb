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
from seelen.errors import ModelError, SeelenError
from seelen.llm import ChatModel
from seelen.memory.context import clip
from seelen.memory.persona import PERSONA, PROFILE, Change, PersonaFiles
from seelen.memory.vetting import oversized_input, vet
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
# Tokens of one turn in a summary request: a session's 20 live turns (MAX_CONV_NUM's default)
# then stay near 20k tokens, inside the 32k context of today's smaller endpoints.
TURN_TOKENS = 1000

Progress = Callable[[str], None]


class RefusedAnswer(ModelError):
    """The tool model answered, but with nothing usable (empty, looping)."""


def _said(reason: str) -> str:
    return "was empty" if reason == "empty" else reason


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
        """The active session from last time (restored=True), or a new one.

        A half-archived session is never talked in again: it waits in `pending_archives`.
        """
        session = self.store.active_session()
        if session is not None:
            self._current = session
            return session, True
        self._current = self.store.create_session()
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

    def pending_archives(self) -> list[Session]:
        """Sessions whose archive was started but not finished (oldest first)."""
        return self.store.pending_archives()

    def live_turns(self) -> list[Turn]:
        """The turns of the current session that are not folded into its summary."""
        session = self.current
        return self.store.turns(session.session_id, after=session.folded_count)

    def reset(self) -> list[str]:
        """Forget the current session's turns (and verbatim quotes of them in summaries).

        Returns the removed text ids: the caller must remove them from the vector index too
        (`Indexer.forget`), or their vectors outlive the words.
        """
        return self.store.clear_session(self.current.session_id)

    # --- rolling summary -----------------------------------------------------------------

    async def maybe_fold(self) -> bool:
        """Fold the oldest live turns into the rolling summary once the window is full."""
        session = self.current
        live = await asyncio.to_thread(
            self.store.turns, session.session_id, after=session.folded_count
        )
        if len(live) <= self.max_live or self.tool_model is None:
            return False
        cut = self.fold_count
        while cut < len(live) - 1 and live[cut].role == "tool":
            cut += 1  # never separate a tool call from its results
        lines = self._lines(live[:cut])
        summary = await self._complete(
            fold_messages(session.rolling_summary, lines), SUMMARY_TOKENS, "summary"
        )
        await asyncio.to_thread(
            self.store.set_rolling_summary,
            session.session_id,
            summary,
            session.folded_count + cut,
        )
        return True

    def _lines(self, turns: Sequence[Turn]) -> list[tuple[str, str, str]]:
        # Each turn is clipped for the tool model (never in the store), so a pasted megabyte
        # cannot make the summary request too big to send.
        return [
            (self.clock.fmt(t.ts_ms), t.role, clip(t.text, TURN_TOKENS))
            for t in turns
            if t.role in ("user", "assistant") and t.text
        ]

    # --- archive -------------------------------------------------------------------------

    async def archive(self, progress: Progress = lambda _: None) -> ArchiveResult:
        """Archive the current session and start a new one.

        The new session begins even when a step fails: the old one is then finished by
        `finish_archive` at the next start, so a failing model never blocks the conversation.
        """
        session = self.current
        await asyncio.to_thread(self.store.record_archive_step, session.session_id, "started")
        self._current = await asyncio.to_thread(self.store.create_session)
        try:
            return await self.finish_archive(session, progress)
        except SeelenError as exc:
            raise type(exc)(f"{exc}; the session is kept and archived at the next start") from exc

    async def finish_archive(
        self, session: Session, progress: Progress = lambda _: None
    ) -> ArchiveResult:
        """Run (or resume) the archive steps of one session; done steps are not redone."""
        sid = session.session_id
        steps = await asyncio.to_thread(self.store.archive_steps, sid)
        result = ArchiveResult(sid, resumed=bool(set(steps) - {"started"}))
        turns = await asyncio.to_thread(self.store.turns, sid)
        if any(t.role in ("user", "assistant") for t in turns):
            if self.tool_model is None:
                raise ModelError("no tool model is configured to summarise the session")
            await self._archive_memory(session, turns, steps, result, progress)
        await asyncio.to_thread(self.store.record_archive_step, sid, "archived")
        await asyncio.to_thread(self.store.mark_archived, sid)
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
                "session summary",
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
        text, note = current, oversized_input(name, current)
        if note is None:
            if name == PROFILE:
                messages = profile_update_messages(current, summary, PROFILE_WORDS)
            else:
                messages = persona_update_messages(current, summary, PERSONA_WORDS)
            try:
                text = (await self._complete(messages, FILE_TOKENS, name))[:MAX_FILE_CHARS]
            except RefusedAnswer as exc:  # the previous good version stays
                text, note = current, f"{exc}; {name} was kept as it was"
        change = await asyncio.to_thread(self.files.write, name, text)
        payload = json.dumps({"changed": change.changed, "note": note})
        await asyncio.to_thread(self.store.record_archive_step, sid, name, payload)
        return change if note is None else Change(name, current, current, note)

    async def _complete(self, messages: list[dict[str, str]], max_tokens: int, what: str) -> str:
        """The tool model's answer with its reasoning removed; RefusedAnswer if unusable."""
        assert self.tool_model is not None
        raw = await self.tool_model.complete(
            messages, model=self.tool_model_name, max_tokens=max_tokens
        )
        text, reason = vet(raw)
        if reason is not None:
            raise RefusedAnswer(f"the tool model's {what} was refused: it {_said(reason)}")
        return text

    def _strip_quotes(self, turns: Sequence[Turn]) -> None:
        changed = []
        for turn in turns:
            if turn.role != "assistant":  # the user's own words are never rewritten
                continue
            cleaned = strip_quotes(turn.text)
            if cleaned != turn.text:
                self.store.update_turn_text(turn.text_id, cleaned)
                changed.append(turn.text_id)
        self.store.mark_indexed(changed, indexed=False)  # re-embed the cleaned text
