"""The App: every long-lived object of one Seelen process, and its lifecycle.

Whatever the App opens is closed through its `AsyncExitStack`, newest first: `build_app`
(`app/build.py`) fills it step by step, and `App.aclose` closes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from seelen.agent.turn import ChatBot
from seelen.app.recall import embedding_provider
from seelen.config import Settings
from seelen.errors import SeelenError
from seelen.memory.clock import Clock
from seelen.memory.indexer import Indexer, Progress
from seelen.memory.persona import PersonaFiles
from seelen.memory.recall import Recall
from seelen.memory.sessions import Sessions
from seelen.models.chat import OpenAIChatModel
from seelen.models.provider import Provider
from seelen.store import Store
from seelen.tools.base import ToolRegistry

if TYPE_CHECKING:
    from seelen.knowledge import Knowledge
    from seelen.tools.mcp import McpManager

DB_FILE = "chat_sessions.db"


class WriterLock(Protocol):
    """The profile's writer lock as the App sees it (`runtime.ProfileLock`)."""

    @property
    def held(self) -> bool:
        """True while this process holds it."""
        ...

    def release(self) -> None:
        """Let the next writer in."""
        ...


class NotWriter(SeelenError):
    """Work that writes was asked of a process that does not hold the profile's lock."""


@dataclass
class App:
    """Every long-lived object of one Seelen process.

    A reader's App (`read_only`) has no indexer; an App built for memory alone
    (`with_model=False`) has no chat model, bot or tools.
    """

    settings: Settings
    provider: Provider
    store: Store
    files: PersonaFiles
    sessions: Sessions
    clock: Clock
    chat_model: OpenAIChatModel | None = None
    chatbot: ChatBot | None = None
    index: Indexer | None = None
    recall: Recall | None = None
    tools_note: str = ""  # why tools are off, shown once in /tools
    tools: ToolRegistry | None = None
    mcp: McpManager | None = None
    knowledge: Knowledge | None = None
    lock: WriterLock | None = None  # held by this process: it is the profile's writer
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    restored: bool | None = None  # set by `start`: whether last time's session came back
    # Hears, as closing begins, each closing step that may take a while (a chat says it).
    closing: Callable[[str], None] = lambda _: None

    @property
    def model(self) -> OpenAIChatModel:
        """The chat model (none when built `with_model=False`)."""
        if self.chat_model is None:
            raise SeelenError("this command opened the memory without a chat model")
        return self.chat_model

    @property
    def bot(self) -> ChatBot:
        """The chat bot (none when built `with_model=False`)."""
        if self.chatbot is None:
            raise SeelenError("this command opened the memory without a chat model")
        return self.chatbot

    async def start(
        self,
        on_line: Callable[[str], None] = lambda _: None,
        *,
        start_indexer: bool = True,
        finish_archives: bool = True,
    ) -> bool:
        """Start-up, in order: restore or open the session, finish a half-done archive
        (unless the caller does it later: `finish_archives`), re-index after an
        embedding-model change, warm recall up, start the indexer.
        Returns True when last time's session was restored; a second call does nothing."""
        if self.restored is not None:
            return self.restored
        self.restored = await self.open_session(
            progress=lambda step: on_line(f"{step}…"), finish_archives=finish_archives
        )
        if self.index is not None and self.store.has_history() and self.index.needs_reindex():
            on_line(
                "The vector index needs rebuilding (new embedding model, or unreadable): "
                "re-indexing in the background; recall uses keywords meanwhile."
            )
        self._warm_up(self.sessions.current.session_id, start_indexer)
        return self.restored

    def _warm_up(self, session_id: str, start_indexer: bool) -> None:
        """While the user types: the model client first (every answer needs it), then the
        embedder and LanceDB and the indexer (a chat recalls by keywords until they are
        loaded). Imports share one interpreter lock: side by side, each finished late."""
        model_ready: Future[None] = Future()
        model = self.chat_model

        def import_model() -> None:
            try:
                if model is not None:
                    model.warm()
            finally:
                # Closing cancels the future when the chat ends before the import does.
                with contextlib.suppress(InvalidStateError):
                    model_ready.set_result(None)

        threading.Thread(target=import_model, name="seelen-warm", daemon=True).start()
        if self.recall is not None:
            self.recall.warm(session_id, after=model_ready)
        if self.index is not None and start_indexer:
            index = self.index
            # Started from the event loop, so closing (which stops it) never races the start.
            then = asyncio.wrap_future(model_ready)

            def start(done: asyncio.Future[None]) -> None:
                if not done.cancelled():
                    index.start()

            then.add_done_callback(start)
            self.stack.callback(then.cancel)

    async def open_session(
        self, progress: Callable[[str], None] = lambda _: None, *, finish_archives: bool = True
    ) -> bool:
        """Open the session to talk in: True when last time's session was restored.

        Leftover ephemeral sessions are deleted, and half-done archives are finished; one that
        fails again is reported in one line and retried at the next start, never blocking.
        """
        self.forget(await asyncio.to_thread(self.sessions.drop_leftover_ephemeral))
        _, restored = await asyncio.to_thread(self.sessions.open)
        if finish_archives:
            await self.finish_archives(progress)
        return restored

    async def finish_archives(self, progress: Callable[[str], None] = lambda _: None) -> None:
        """Finish the archives that an earlier process began; a failure is one line."""
        for session in await asyncio.to_thread(self.sessions.pending_archives):
            progress("finishing the archive of an earlier session")
            try:
                await self.sessions.finish_archive(session, progress)
            except SeelenError as exc:
                progress(f"archive not finished ({exc}); it is retried at the next start")

    def follow_language(self) -> bool:
        """With EMBEDDING_PROVIDER=auto, switch to the multilingual model once the memory
        asks for it (after an import, or an archived session, in another language); the
        indexer then embeds everything again. The objects are shared, so every holder
        follows. True when it switched."""
        if self.index is None or self.recall is None or self.settings.embedding_provider != "auto":
            return False
        if self.recall.embedder is None:
            return False
        from seelen.models.embed import E5Embedder, make_embedder

        if self.recall.embedder.model_id == E5Embedder.model_id:
            return False  # switched already (never back): no need to sample the memory again
        vectors = self.settings.profile_dir / "lancedb"
        if embedding_provider(self.settings, self.store, vectors) != "multilingual":
            return False
        embedder = make_embedder("multilingual", "", "", "")
        self.index.use(embedder)
        self.recall.embedder = embedder
        self.index.wake()  # a running indexer starts the re-index now
        return True

    def release_idle(self) -> None:
        """Free what an idle process no longer needs: the embedding model and the vector
        index's copies of small tables (made again by the next search or indexing pass),
        then the heap's free pages and the libraries' pages (read again when next used)."""
        from seelen.heap import give_back, page_out_files

        if self.recall is not None and self.recall.embedder is not None:
            self.recall.embedder.release()
        if self.index is not None:
            self.index.index.release()
        give_back()
        page_out_files()

    def forget(self, text_ids: list[str]) -> None:
        """Remove deleted texts from the vector index as well."""
        if text_ids and self.index is not None:
            self.index.forget(text_ids)

    def index_pending(self, progress: Progress | None = None) -> int:
        """Index what waits, now and in this thread (every text again after an embedding-
        model change); returns how many texts were embedded. Only the profile's writer
        indexes: `NotWriter` unless this process holds the lock."""
        if self.lock is None or not self.lock.held:
            raise NotWriter("only the process that holds the profile's writer lock indexes it")
        if self.index is None or not self.index.behind():
            return 0
        return self.index.index_all(progress)

    def start_background(self, progress: Progress | None = None) -> None:
        """Keep the vector index in step in the background: repair it, re-index after an
        embedding-model change, then index new texts as they come."""
        if self.index is not None:
            self.index.start(progress)

    def start_mcp(self, on_event: Callable[[str], None]) -> McpManager | None:
        """Offer the MCP servers' tools: the cached lists at once (those servers start on first
        use, or at `McpManager.connect_all`); the others connect in the background now.
        Needs the running event loop."""
        if not self.settings.enable_mcp or self.tools is None:
            return None
        from seelen.tools.mcp_config import find_config

        path = find_config(self.settings.mcp_servers_file)  # a missing MCP_SERVERS_FILE raises
        if path is None:
            return None
        from seelen.tools.mcp import McpManager
        from seelen.tools.mcp_cache import CACHE_FILE

        self.mcp = McpManager(
            path,
            self.tools,
            init_timeout=self.settings.mcp_init_timeout,
            on_event=on_event,
            log_dir=self.settings.profile_dir / "logs",
            cache_file=self.settings.profile_dir / CACHE_FILE,
            on_progress=self.bot.tool_progress,
        )
        self.mcp.start()
        self.stack.push_async_callback(self.mcp.aclose)
        return self.mcp

    async def aclose(self) -> None:
        """Stop background work and close everything, newest first; `closing` first hears
        what of it may take a while (`slow_closing`)."""
        for line in self.slow_closing():
            self.closing(line)
        await self.stack.aclose()

    def slow_closing(self) -> list[str]:
        """The closing steps that wait for work under way, each in a few words: a batch of
        embeddings (up to `Indexer.stop`'s 5 s), notes being indexed (a batch), MCP server
        processes to end. Stopping a local model server is not among them: SIGTERM ends it
        in about 0.1 s (measured on 2 cores)."""
        lines = []
        if self.index is not None and self.index.working():
            lines.append("finishing the vector index's current batch…")
        if self.knowledge is not None and not self.knowledge.progress.done:
            lines.append("stopping the indexing of your notes…")
        if self.mcp is not None and any(
            s.state in ("connecting", "ready") for s in self.mcp.status()
        ):
            lines.append("closing the MCP servers…")
        return lines
