"""The composition root: builds the real objects from Settings, and closes them again.

The `cli/` commands turn into calls on an `App`; tests build the same `App` with a temporary
data dir and a local model server. Nothing is patched at module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.agent.turn import ChatBot
from seelen.config import Settings, prepare_profile_dir
from seelen.errors import SeelenError
from seelen.logs import PromptLog, attach_debug_log
from seelen.memory.clock import Clock
from seelen.memory.indexer import Indexer
from seelen.memory.persona import PersonaFiles
from seelen.memory.recall import Recall
from seelen.memory.sessions import Sessions
from seelen.models.chat import OpenAIChatModel
from seelen.models.provider import (
    Provider,
    chat_sampling,
    choose_provider,
    prompt_budget,
    reply_cap,
    rewrites_files,
    start_local_server,
)
from seelen.store import Store
from seelen.tools.base import ToolRegistry

if TYPE_CHECKING:
    from seelen.knowledge import Knowledge
    from seelen.tools.mcp import McpManager


@dataclass
class App:
    """Every long-lived object of one Seelen process."""

    settings: Settings
    provider: Provider
    store: Store
    files: PersonaFiles
    sessions: Sessions
    model: OpenAIChatModel
    bot: ChatBot
    clock: Clock
    index: Indexer | None = None
    recall: Recall | None = None
    tools_note: str = ""  # why tools are off, shown once in /tools
    tools: ToolRegistry | None = None
    mcp: McpManager | None = None
    knowledge: Knowledge | None = None
    closers: list[Callable[[], Any]] = field(default_factory=list)
    restored: bool | None = None  # set by `start`: whether last time's session came back

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

        def import_model() -> None:
            try:
                self.model.warm()
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
            self.closers.append(then.cancel)

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

    def forget(self, text_ids: list[str]) -> None:
        """Remove deleted texts from the vector index as well."""
        if text_ids and self.index is not None:
            self.index.forget(text_ids)

    def start_background(self, progress: Callable[[int, int], None] | None = None) -> None:
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
        self.closers.append(self.mcp.aclose)
        return self.mcp

    async def aclose(self) -> None:
        """Stop background work and close everything, newest first."""
        for close in reversed(self.closers):
            result = close()
            if asyncio.iscoroutine(result):
                await result
        self.closers.clear()


def build_app(
    settings: Settings,
    *,
    progress: Callable[[str], None] = lambda _: None,
    with_model: bool = True,
) -> App:
    """Open the profile's store, files and index, and wire the chat bot (no network yet).

    `with_model=False` serves the memory commands: no model server is started or needed.
    """
    directory = prepare_profile_dir(settings)
    closers: list[Callable[[], Any]] = []
    provider = choose_provider(settings) if with_model else Provider("none", "", "", "", "")
    if provider.kind == "local":
        provider = start_local_server(settings, provider, progress)
        assert provider.server is not None  # started just now
        closers.append(provider.server.stop)
    clock = Clock(settings.timezone)
    store = Store(directory / "chat_sessions.db")
    closers.append(store.close)
    files = PersonaFiles(directory)
    files.ensure()
    model = OpenAIChatModel(
        base_url=provider.base_url,
        api_key=provider.api_key,
        model=provider.chat_model,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        max_tokens=reply_cap(settings, provider),
        sampling=chat_sampling(settings, provider),
    )
    closers.append(model.aclose)
    sessions = Sessions(
        store,
        files,
        model if with_model else None,
        clock,
        tool_model_name=provider.tool_model,
        max_live=settings.max_conv_num,
        fold_count=settings.refresh_every_conv_num,
        input_tokens=prompt_budget(settings, provider, model.max_tokens),
        rewrite_files=rewrites_files(settings, provider),
    )
    indexer, recall = build_recall(settings, provider, store, directory)
    closers.append(indexer.stop)
    closers.append(recall.close)
    if provider.server is not None and not provider.server.supports_tools:
        tools_note = "the local model cannot call tools; chatting without them"
    else:
        tools_note = ""
    knowledge = start_knowledge(settings, closers) if with_model else None
    registry = build_tools(settings, recall, sessions, clock, knowledge)
    # A local model reads no images (its llama.cpp server is started with no vision
    # projector); an endpoint gets them unless it refuses (auto).
    vision = "false" if provider.kind == "local" and settings.vision == "auto" else settings.vision
    bot = ChatBot(
        sessions,
        files,
        model,
        clock,
        recall=recall,
        tools=registry,
        context_tokens=prompt_budget(settings, provider, model.max_tokens),
        max_tool_rounds=settings.max_tool_rounds,
        on_saved=indexer.wake,
        log_prompt=debug_logs(settings, provider, closers),
        knowledge=knowledge,
        vision=vision,
    )
    bot.tools_enabled = not tools_note
    return App(
        settings=settings,
        provider=provider,
        store=store,
        files=files,
        sessions=sessions,
        model=model,
        bot=bot,
        clock=clock,
        index=indexer,
        recall=recall,
        tools_note=tools_note,
        tools=registry,
        knowledge=knowledge,
        closers=closers,
    )


def debug_logs(
    settings: Settings, provider: Provider, closers: list[Callable[[], Any]]
) -> PromptLog | None:
    """DEBUG_MODE: logs/prompts.jsonl and logs/seelen.log (redacted); None otherwise."""
    if not settings.debug_mode:
        return None
    folder = settings.profile_dir / "logs"
    secrets = (provider.api_key, settings.openai_api_key, settings.jina_api_key)
    prompts = PromptLog(folder, *secrets)
    closers.append(prompts.close)
    closers.append(attach_debug_log(folder, *secrets))
    return prompts


def start_knowledge(settings: Settings, closers: list[Callable[[], Any]]) -> Knowledge | None:
    """The knowledge folders, indexed and watched in the background (None: no folder)."""
    from seelen.knowledge.folders import open_knowledge

    knowledge = open_knowledge(settings)
    if knowledge is not None:
        knowledge.start()
        closers.append(knowledge.close)
    return knowledge


def build_tools(
    settings: Settings,
    recall: Recall,
    sessions: Sessions,
    clock: Clock,
    knowledge: Knowledge | None = None,
) -> ToolRegistry:
    """The registry with the built-in tools; MCP servers join it later (`App.start_mcp`)."""
    from seelen.tools.local import builtin_tools

    def memory_search(query: str, limit: int = 5) -> str:
        result = recall.search(query, sessions.current.session_id, conv_num=limit)
        lines = [
            f"[{clock.fmt_range(s.start_ms, s.end_ms)}] session summary: {s.text}"
            for s in result.summaries
        ]
        lines += [f"[{clock.fmt(t.start_ms)}] {t.role}: {t.text}" for t in result.turns]
        return "\n".join(lines) or "Nothing in memory matches."

    registry = ToolRegistry(
        timeout=settings.tool_timeout,
        result_chars=settings.tool_result_chars,
        disabled=settings.disabled_tools,
    )
    for tool in builtin_tools(
        timezone=settings.timezone, jina_api_key=settings.jina_api_key, memory_search=memory_search
    ):
        registry.add(tool)
    if knowledge is not None:
        from seelen.knowledge.tool import knowledge_search_tool

        registry.add(knowledge_search_tool(knowledge, settings.tool_result_chars // 4))
    return registry


def build_recall(
    settings: Settings, provider: Provider, store: Store, directory: Path
) -> tuple[Indexer, Recall]:
    """The embedder, the LanceDB index, the background indexer and the recall pipeline."""
    from seelen.models.embed import make_embedder
    from seelen.vectors import VectorIndex

    embedder = make_embedder(
        embedding_provider(settings, store, directory / "lancedb"),
        settings.embedding_model,
        provider.base_url or settings.openai_base_url,
        provider.api_key or settings.openai_api_key,
    )
    index = VectorIndex(directory / "lancedb", embedder.model_id, embedder.dim)
    indexer = Indexer(store, index, embedder)
    recall = Recall(
        store,
        index,
        embedder,
        session_num=settings.recall_session_num,
        conv_num=settings.recall_conv_num,
        token_budget=recall_tokens(settings),
        clock=Clock(settings.timezone),
    )
    return indexer, recall


def embedding_provider(settings: Settings, store: Store, vectors: Path) -> str:
    """EMBEDDING_PROVIDER, with `auto` resolved for this profile: the multilingual model once
    it made the stored vectors or the user writes in a language other than English (see
    languages.py), else the fast English one. Never back: a switch costs a re-index."""
    if settings.embedding_provider != "auto":
        return settings.embedding_provider
    from seelen.models.embed import E5Embedder
    from seelen.models.languages import SAMPLE_CHARS, SAMPLE_TURNS, needs_multilingual
    from seelen.vectors.meta import META_FILE, ModelRecord

    if (ModelRecord(vectors / META_FILE).read() or {}).get("model_id") == E5Embedder.model_id:
        return "multilingual"
    texts = store.recent_user_texts(SAMPLE_TURNS, SAMPLE_CHARS)
    return "multilingual" if needs_multilingual(texts) else "local"


def recall_tokens(settings: Settings) -> int:
    """RECALL_TOKENS, or by default the prompt's share for related turns, so recall returns
    exactly what the prompt builder will keep."""
    from seelen.memory.context import SHARES

    return settings.recall_tokens or int(settings.context_tokens * SHARES["related_turns"])
