"""`ProfileService`: the one interface of an open profile, implemented once over its `App`.

Ask (a turn's events), search, remember, forget, recent sessions, the profile, the notes, an
import, how far the index is: each takes a request class of `seelen.protocol.calls` and
answers with the protocol's events or results. The chat and the in-process `ask` call it
directly; the owner serves it on its socket, where `seelen ask`, `seelen mcp` and `seelen
import` reach it; `memory search` and the Python API call it on a profile they opened
themselves. One ranking, one prompt budget, one shape for all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from seelen.errors import SeelenError
from seelen.models.provider import planned_prompt_budget
from seelen.protocol import calls
from seelen.protocol.codec import Frame
from seelen.protocol.events import Event, Failed
from seelen.protocol.results import (
    FileWritten,
    Forgotten,
    Imported,
    ImportProgress,
    IndexState,
    NoteResult,
    ProfileInfo,
    Remembered,
    SearchResult,
    SessionList,
)
from seelen.service import reading, writing

if TYPE_CHECKING:
    from seelen.app import App
    from seelen.memory.explain import Ranking
    from seelen.memory.recall import RecallResult
    from seelen.store import Turn


class ProfileService:
    """What every front-end asks of one open profile (`app`).

    `turn_lock` is held by whoever runs a turn (the chat for each of its lines, the owner for
    each question it takes): turns never interleave, and memory calls run beside them.
    """

    def __init__(self, app: App, *, turn_lock: asyncio.Lock | None = None) -> None:
        self.app = app
        self.turn_lock = turn_lock or asyncio.Lock()
        self._ranking: Ranking | None = None
        self._calls: dict[type[calls.Request], Callable[[Any], Frame]] = {
            calls.Search: self.search,
            calls.Remember: self.remember,
            calls.Forget: self.forget,
            calls.ForgetSession: self.forget_session,
            calls.WriteFile: self.write_file,
            calls.ListSessions: self.recent_sessions,
            calls.GetProfile: lambda _: self.profile(),
            calls.SearchNotes: self.search_notes,
            calls.GetIndexState: lambda _: self.index_state(),
        }

    # --- a turn ----------------------------------------------------------------------------

    @property
    def answers(self) -> bool:
        """Whether it answers questions (a profile opened for memory calls has no model)."""
        return self.app.chatbot is not None

    def ask(
        self, text: str, *, ephemeral: bool = False, unsaved: list[Turn] | None = None
    ) -> AsyncIterator[Event]:
        """Answer `text`: the turn's events, the last `Done` or `Failed`. An ephemeral turn
        writes nothing (`unsaved` collects an incognito conversation's turns). The caller
        holds `turn_lock`."""
        return self.app.bot.turn(text, ephemeral=ephemeral, unsaved=unsaved)

    def retry(self) -> AsyncIterator[Event]:
        """Answer the last unanswered question again (`/retry`)."""
        return self.app.bot.retry()

    @property
    def last_recall(self) -> RecallResult | None:
        """What recall put in the prompt of the last answer (`/why`)."""
        return self.app.chatbot.last_recall if self.app.chatbot is not None else None

    # --- memory calls ----------------------------------------------------------------------

    @property
    def ranking(self) -> Ranking:
        """Recall's ranking with the prompt budget a chat with these settings has."""
        if self._ranking is None:
            from seelen.memory.explain import Ranking

            if self.app.recall is None:
                raise SeelenError("recall is not available in this profile")
            budget = planned_prompt_budget(self.app.settings)
            self._ranking = Ranking(self.app.recall, self.app.clock, budget)
        return self._ranking

    def search(self, request: calls.Search) -> SearchResult:
        """Recall's ranking for `request.query`, as the chat ranks it."""
        return reading.search(self.app, self.ranking, request)

    def remember(self, request: calls.Remember) -> Remembered:
        """Keep a text as the user's words (writes: the caller holds the profile)."""
        return writing.remember(self.app, request)

    def forget(self, request: calls.Forget) -> Forgotten:
        """Delete one turn or summary for good (writes)."""
        return writing.forget(self.app, request)

    def forget_session(self, request: calls.ForgetSession) -> Forgotten:
        """Delete a whole session for good (writes)."""
        return writing.forget_whole_session(self.app, request)

    def write_file(self, request: calls.WriteFile) -> FileWritten:
        """Replace the persona or the user profile, keeping the old one in history/ (writes)."""
        return writing.write_file(self.app, request)

    def recent_sessions(self, request: calls.ListSessions) -> SessionList:
        """The newest sessions with their summaries."""
        return reading.recent_sessions(self.app, request)

    def profile(self) -> ProfileInfo:
        """The profile and persona files, and which memory this is."""
        return reading.profile(self.app)

    def search_notes(self, request: calls.SearchNotes) -> NoteResult:
        """The best passages of the knowledge folders."""
        return reading.search_notes(self.app, request)

    def index_state(self) -> IndexState:
        """How many texts wait for their vectors."""
        return reading.index_state(self.app)

    def import_file(
        self, request: calls.Import, progress: Callable[[ImportProgress], None] = lambda _: None
    ) -> Imported:
        """Write an export's conversations (writes); their vectors follow in the background."""
        return writing.import_file(self.app, request, progress)

    def call(self, request: calls.Request) -> Frame:
        """One memory call: its result, or `Failed` saying in one sentence why there is none."""
        handler = self._calls.get(type(request))
        if handler is None:
            return Failed(message=f"{request.TAG} is not a memory call")
        try:
            return handler(request)
        except SeelenError as exc:
            return Failed(message=str(exc))

    async def call_async(self, request: calls.Request) -> Frame:
        """`call` in a worker thread (SQLite and LanceDB block): turns go on meanwhile."""
        return await asyncio.to_thread(self.call, request)

    def release(self) -> None:
        """Free what the profile holds in memory but can load again (`App.release_idle`)."""
        self.app.release_idle()

    @property
    def busy(self) -> bool:
        """Whether background work would be lost if the process ended now (texts wait for
        their vectors, or the indexer is still at work: a graph being built): an owner
        does not leave on its idle timeout, nor rest, meanwhile."""
        index = self.app.index
        if index is None or not index.running or index.error:
            return False
        return index.working() or index.behind()
