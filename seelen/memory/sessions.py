"""Session lifecycle: restore, reset, the rolling summary, and the resumable archive.

Archiving is a chain of recorded steps (summary → persona/profile → strip quotes → archived).
Each step's record is committed with what it stored (the summary, the stripped turns, the
status), so if a model call fails or the process dies, the next `/save` or start picks the
archive up where it stopped and nothing is summarised or stored twice. A file rewrite is
recorded, new text included, before the file is replaced, and a resumed archive writes a
recorded rewrite that did not reach the file (`_write_recorded`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from seelen.errors import ModelError, SeelenError
from seelen.memory.clock import Clock
from seelen.memory.context import clip, estimate_tokens
from seelen.memory.persona import PERSONA, PROFILE, Change, PersonaFiles
from seelen.memory.prompts import (
    fold_messages,
    persona_update_messages,
    profile_update_messages,
    session_summary_messages,
    strip_quotes,
)
from seelen.memory.vetting import oversized_input, vet
from seelen.models.chat import ChatModel
from seelen.store import ACTIVE, EPHEMERAL, Session, Store, Turn, new_id, now_ms

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
        input_tokens: int = 6000,
        keep_files: str = "",
    ) -> None:
        self.store = store
        self.files = files
        self.tool_model = tool_model
        self.clock = clock
        self.tool_model_name = tool_model_name
        self.max_live = max_live
        self.fold_count = fold_count
        self.input_tokens = input_tokens  # the most a transcript may send to the tool model
        self.keep_files = keep_files  # why /save keeps the persona and profile ('' : it rewrites)
        self._current: Session | None = None
        self._stored = False  # whether the current session has its row in the store yet

    # --- the current session -------------------------------------------------------------

    def open(self) -> tuple[Session, bool]:
        """The active session from last time (restored=True), or a new one, stored with its
        first turn: opening and closing (a chat left at once, an owner that answered only
        ephemeral questions) leaves no empty session behind.

        A half-archived session is never talked in again: it waits in `pending_archives`.
        """
        session = self.store.active_session()
        if session is not None:
            self._current, self._stored = session, True
            return session, True
        self._current, self._stored = _unstored(), False
        return self._current, False

    def peek(self) -> Session:
        """Look at the active session without creating one (for answers that write nothing)."""
        active = self.store.active_session()
        self._current, self._stored = active or _unstored(), active is not None
        return self._current

    def drop_leftover_ephemeral(self) -> list[str]:
        """Delete ephemeral sessions an older Seelen left behind; returns their text ids."""
        ids: list[str] = []
        for session in self.store.sessions_with_status(EPHEMERAL):
            ids += self.store.delete_session(session.session_id)
        return ids

    @property
    def current(self) -> Session:
        """The session being talked in, as this object last wrote it (no I/O)."""
        if self._current is None:
            raise RuntimeError("Sessions.open() was not called")
        return self._current

    def pending_archives(self) -> list[Session]:
        """Sessions whose archive was started but not finished (oldest first)."""
        return self.store.pending_archives()

    def add_turn(self, role: str, text: str, meta: dict[str, Any] | None = None) -> Turn:
        """Save one turn in the current session (committed before this returns); the
        session's own row first, with the first turn."""
        if not self._stored:
            self._current = self.store.create_session(session_id=self.current.session_id)
            self._stored = True
        turn = self.store.add_turn(self.current.session_id, role, text, meta)
        self._current = replace(self.current, conv_count=self.current.conv_count + 1)
        return turn

    def live_turns(self, upto_seq: int | None = None) -> list[Turn]:
        """The current session's turns not folded into its summary, up to `upto_seq`."""
        session = self.current
        return self.store.turns(
            session.session_id, after_seq=session.folded_upto_seq, upto_seq=upto_seq
        )

    def reset(self) -> list[str]:
        """Forget the current session's turns (and verbatim quotes of them in summaries).

        Returns the removed text ids: the caller must remove them from the vector index too
        (`Indexer.forget`), or their vectors outlive the words.
        """
        ids = self.store.clear_session(self.current.session_id)
        self._current = replace(
            self.current, conv_count=0, rolling_summary="", folded_count=0, folded_upto_seq=0
        )
        return ids

    # --- rolling summary -----------------------------------------------------------------

    async def maybe_fold(self) -> bool:
        """Fold the oldest exchanges into the rolling summary once more than `max_live`."""
        session = self.current
        live = await asyncio.to_thread(self.live_turns)
        # The window counts exchanges (a user message and everything answering it, tool calls
        # included), so a reply that used tools does not bring the fold closer.
        starts = [i for i, turn in enumerate(live) if turn.role == "user"]
        if len(starts) <= self.max_live or self.tool_model is None:
            return False
        cut = starts[self.fold_count]  # the oldest `fold_count` exchanges, whole
        lines = self._lines(live[:cut])
        summary = await self._complete(
            fold_messages(session.rolling_summary, lines), SUMMARY_TOKENS, "summary"
        )
        folded, upto = session.folded_count + cut, live[cut - 1].seq
        await asyncio.to_thread(
            self.store.set_rolling_summary, session.session_id, summary, folded, upto
        )
        self._current = replace(
            session, rolling_summary=summary, folded_count=folded, folded_upto_seq=upto
        )
        return True

    def _lines(self, turns: Sequence[Turn]) -> list[tuple[str, str, str]]:
        """The spoken turns as transcript lines within the tool model's input budget.

        Each turn is clipped for the tool model (never in the store), so a pasted megabyte
        cannot make the request too big to send; past the budget the oldest lines go first
        (a rolling summary already covers what came before them).
        """
        per_line = max(min(TURN_TOKENS, self.input_tokens // 4), 64)
        lines = [
            (self.clock.fmt(t.ts_ms), t.role, clip(t.text, per_line))
            for t in turns
            if t.role in ("user", "assistant") and t.text
        ]
        used = sum(estimate_tokens(text) + 8 for _, _, text in lines)
        while lines and used > self.input_tokens:
            used -= estimate_tokens(lines.pop(0)[2]) + 8
        return lines

    # --- archive -------------------------------------------------------------------------

    async def archive(self, progress: Progress = lambda _: None) -> ArchiveResult:
        """Archive the current session and start a new one.

        The new session begins even when a step fails: the old one is then finished by
        `finish_archive` at the next start, so a failing model never blocks the conversation.
        """
        session = await self.begin_archive()
        try:
            return await self.finish_archive(session, progress)
        except SeelenError as exc:
            raise type(exc)(f"{exc}; the session is kept and archived at the next start") from exc

    async def begin_archive(self) -> Session:
        """Mark the current session for archiving and open a new one; returns the old one,
        for `finish_archive`. Until that finishes, every start resumes it (`pending_archives`)."""
        session = self.current
        if self._stored:
            await asyncio.to_thread(self.store.record_archive_step, session.session_id, "started")
        self._current, self._stored = _unstored(), False
        return session

    async def finish_archive(
        self, session: Session, progress: Progress = lambda _: None
    ) -> ArchiveResult:
        """Run (or resume) the archive steps of one session; done steps are not redone."""
        sid = session.session_id
        steps = await asyncio.to_thread(self.store.archive_steps, sid)
        result = ArchiveResult(sid, resumed=bool(set(steps) - {"started"}))
        if not steps:  # a session never stored (no turn was said in it): nothing to archive
            return result
        turns = await asyncio.to_thread(self.store.turns, sid)
        if any(t.role in ("user", "assistant") for t in turns):
            if self.tool_model is None:
                raise ModelError("no tool model is configured to summarise the session")
            await self._archive_memory(session, turns, steps, result, progress)
        await asyncio.to_thread(self.store.close_archive, sid)
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
            live = [t for t in turns if t.seq > session.folded_upto_seq]
            result.summary = await self._complete(
                session_summary_messages(session.rolling_summary, self._lines(live)),
                SUMMARY_TOKENS,
                "session summary",
            )
            start, end = turns[0].ts_ms, turns[-1].ts_ms
            await asyncio.to_thread(
                self.store.add_summary, sid, result.summary, start, end, step=True
            )
        for name in (PROFILE, PERSONA):
            if name in steps:  # decided before a crash: the file may not have it yet
                await asyncio.to_thread(self._write_recorded, sid, name, steps[name])
        todo = [name for name in (PROFILE, PERSONA) if name not in steps]
        if todo:
            if not self.keep_files:
                progress("updating the user profile and persona")
            changes = await asyncio.gather(
                *(self._update_file(sid, n, result.summary) for n in todo)
            )
            result.changes.extend(changes)
        if "strip_quotes" not in steps:
            progress("tidying recalled quotations")
            await asyncio.to_thread(self._strip_quotes, sid, turns)

    def summary_request(self, turns: Sequence[Turn]) -> list[dict[str, str]]:
        """The tool model's request for a whole session's summary (within the input budget)."""
        return session_summary_messages("", self._lines(turns))

    async def summarize(self, session_id: str) -> str:
        """Summarise a stored session with the tool model, replacing its summary (an
        imported session's, made up from its opening); recorded as its `summary` step."""
        turns = await asyncio.to_thread(self.store.turns, session_id)
        summary = await self._complete(
            self.summary_request(turns), SUMMARY_TOKENS, "session summary"
        )
        start, end = turns[0].ts_ms, turns[-1].ts_ms
        await asyncio.to_thread(self.store.add_summary, session_id, summary, start, end, step=True)
        return summary

    async def _update_file(self, sid: str, name: str, summary: str) -> Change:
        current = self.files.read(name)
        text, note = current, oversized_input(name, current)
        if self.keep_files:  # the same note for both files: said once
            note = f"the profile and persona were kept as they are: {self.keep_files}"
        if note is None:
            if name == PROFILE:
                messages = profile_update_messages(current, summary, PROFILE_WORDS)
            else:
                messages = persona_update_messages(current, summary, PERSONA_WORDS)
            try:
                text = (await self._complete(messages, FILE_TOKENS, name))[:MAX_FILE_CHARS]
            except RefusedAnswer as exc:  # the previous good version stays
                text, note = current, f"{exc}; {name} was kept as it was"
        change = Change(name, current, text)
        step = {"changed": change.changed, "note": note}
        if change.changed:  # kept until the file has it: a crash before is resumed from it
            step |= {"text": text, "replaces": _digest(current)}
        payload = json.dumps(step)
        await asyncio.to_thread(self.store.record_archive_step, sid, name, payload)
        await asyncio.to_thread(self._write_recorded, sid, name, payload)
        return change if note is None else Change(name, current, current, note)

    def _write_recorded(self, sid: str, name: str, payload: str) -> None:
        """Write the rewrite a step recorded, if the file still holds the text it replaces
        (not yet written, or a crash came first); then drop the text from the step. A file
        changed since (written, or edited by hand) is left as it is."""
        step = json.loads(payload or "{}")
        if step.get("text") is None:
            return
        if _digest(self.files.read(name)) == step["replaces"]:
            self.files.write(name, step["text"])
        done = {"changed": step["changed"], "note": step["note"]}
        self.store.record_archive_step(sid, name, json.dumps(done))

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

    def _strip_quotes(self, sid: str, turns: Sequence[Turn]) -> None:
        """Remove the quotation tags from the assistant's turns, and record the step, in one
        transaction (the cleaned turns are embedded again)."""
        cleaned = {}
        for turn in turns:
            if turn.role != "assistant":  # the user's own words are never rewritten
                continue
            text = strip_quotes(turn.text)
            if text != turn.text:
                cleaned[turn.text_id] = text
        self.store.record_archive_step(sid, "strip_quotes", rewritten=cleaned)


def _unstored() -> Session:
    """A new session, not in the store until its first turn (`Sessions.add_turn`)."""
    return Session(new_id(), now_ms(), None, ACTIVE, 0)


def _digest(text: str) -> str:
    """A file's text, identified (so a recorded rewrite knows whether it was written)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
