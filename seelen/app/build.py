"""`build_app`: each part of an App built from Settings, in order, each one's closing
registered the moment it is open, so a step that raises closes what came before it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from seelen.agent.turn import ChatBot
from seelen.app.core import DB_FILE, App, WriterLock
from seelen.app.recall import build_recall
from seelen.config import Settings, prepare_profile_dir
from seelen.files import PRIVATE_UMASK
from seelen.logs import PromptLog, attach_debug_log
from seelen.memory.clock import Clock
from seelen.memory.persona import PersonaFiles
from seelen.memory.recall import Recall
from seelen.memory.sessions import Sessions
from seelen.models.chat import OpenAIChatModel
from seelen.models.provider import (
    Provider,
    bundled,
    chat_sampling,
    choose_provider,
    files_kept_reason,
    prompt_budget,
    reply_cap,
    start_local_server,
)
from seelen.store import Store
from seelen.tools.base import ToolRegistry

if TYPE_CHECKING:
    from seelen.knowledge import Knowledge


def build_app(
    settings: Settings,
    *,
    progress: Callable[[str], None] = lambda _: None,
    with_model: bool = True,
    read_only: bool = False,
    lock: WriterLock | None = None,
) -> App:
    """Open the profile's store, files and index, and wire the chat bot (no network yet,
    but for asking an endpoint embedding model of unknown size for its size).

    `with_model=False` serves the memory commands: no model server, chat model, bot or
    tools. `read_only=True` serves readers: the store and the vectors open read-only, there
    is no indexer, and no folder or file is created. `lock` is the writer lock this process
    holds (`App.index_pending` needs it); the App releases it when it closes, last. A step
    that raises closes what the steps before it opened, newest first (the lock stays the
    caller's then).
    """
    with contextlib.ExitStack() as opened:
        app = _open_memory(settings, opened, progress, with_model=with_model, read_only=read_only)
        app.lock = lock
        if with_model:
            _add_chat(app, opened)
        if lock is not None:  # the App lets the next writer in, after closing all else
            app.stack.callback(lock.release)
        app.stack.enter_context(opened.pop_all())
    if app.chat_model is not None:  # it holds connections only once it has been used
        app.stack.push_async_callback(app.chat_model.aclose)
    if app.chatbot is not None:  # closed first: its warm-up uses the model's connections
        app.stack.push_async_callback(app.chatbot.aclose)
    return app


def _open_memory(
    settings: Settings,
    opened: contextlib.ExitStack,
    progress: Callable[[str], None],
    *,
    with_model: bool,
    read_only: bool,
) -> App:
    """The steps every App takes: model server, store, files, sessions, index and recall;
    each registers its closing on `opened` right after it opens."""
    if read_only:
        os.umask(PRIVATE_UMASK)  # files an observer writes (logs, caches) are born private
        directory = settings.profile_dir
    else:
        directory = prepare_profile_dir(settings)
    provider = choose_provider(settings) if with_model else Provider("none", "", "", "", "")
    if provider.kind == "local":
        provider = start_local_server(settings, provider, progress)
        assert provider.server is not None  # started just now
        opened.callback(provider.server.stop)
    clock = Clock(settings.timezone)
    store = Store(directory / DB_FILE, read_only=read_only)
    opened.callback(store.close)
    files = PersonaFiles(directory)
    if read_only:
        files.load()
    else:
        files.ensure()
    replies = reply_cap(settings, provider)
    model = chat_model(settings, provider, replies) if with_model else None
    sessions = Sessions(
        store,
        files,
        model,
        clock,
        tool_model_name=provider.tool_model,
        max_live=settings.max_conv_num,
        fold_count=settings.refresh_every_conv_num,
        input_tokens=prompt_budget(settings, provider, replies),
        keep_files=files_kept_reason(settings, provider),
    )
    indexer, recall = build_recall(settings, provider, store, directory, read_only=read_only)
    if indexer is not None:
        opened.callback(indexer.stop)
    opened.callback(recall.close)
    return App(
        settings, provider, store, files, sessions, clock, model, index=indexer, recall=recall
    )


def chat_model(settings: Settings, provider: Provider, max_tokens: int) -> OpenAIChatModel:
    """The chat model's client for `provider` (it connects on first use)."""
    return OpenAIChatModel(
        base_url=provider.base_url,
        api_key=provider.api_key,
        model=provider.chat_model,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        max_tokens=max_tokens,
        sampling=chat_sampling(settings, provider),
        settings_named=provider.kind == "openai",
    )


def _add_chat(app: App, opened: contextlib.ExitStack) -> None:
    """What answering needs besides memory: knowledge folders, tools, debug logs, the bot."""
    settings, provider, recall = app.settings, app.provider, app.recall
    assert recall is not None
    if provider.server is not None and not provider.server.supports_tools:
        app.tools_note = "the local model cannot call tools; chatting without them"
    app.knowledge = start_knowledge(settings, opened)
    app.tools = build_tools(settings, recall, app.sessions, app.clock, app.knowledge)
    # A local model reads no images (its llama.cpp server is started with no vision
    # projector); an endpoint gets them unless it refuses (auto).
    vision = "false" if provider.kind == "local" and settings.vision == "auto" else settings.vision
    model = app.model
    app.chatbot = ChatBot(
        app.sessions,
        app.files,
        model,
        app.clock,
        recall=recall,
        tools=app.tools,
        context_tokens=prompt_budget(settings, provider, model.max_tokens),
        max_tool_rounds=settings.max_tool_rounds,
        on_saved=app.index.wake if app.index is not None else lambda: None,
        log_prompt=debug_logs(settings, provider, opened),
        knowledge=app.knowledge,
        vision=vision,
        # llama.cpp evaluates a prompt at tens of tokens a second on 2 cores: worth reading
        # its stable beginning ahead of the question (memory/context.py's prompt layout).
        prefill=provider.kind == "local",
        # SmolLM2's ChatML template takes a second system message; a template of a GGUF of
        # the user's own or an endpoint's might refuse it (memory/context.py, `with_context`).
        context_apart=bundled(settings, provider),
    )
    app.chatbot.tools_enabled = not app.tools_note


def debug_logs(
    settings: Settings, provider: Provider, opened: contextlib.ExitStack
) -> PromptLog | None:
    """DEBUG_MODE: logs/prompts.jsonl and logs/seelen.log (redacted); None otherwise."""
    if not settings.debug_mode:
        return None
    folder = settings.profile_dir / "logs"
    secrets = (provider.api_key, settings.openai_api_key, settings.jina_api_key)
    prompts = PromptLog(folder, *secrets)
    opened.callback(prompts.close)
    opened.callback(attach_debug_log(folder, *secrets))
    return prompts


def start_knowledge(settings: Settings, opened: contextlib.ExitStack) -> Knowledge | None:
    """The knowledge folders, indexed and watched in the background (None: no folder)."""
    from seelen.knowledge.folders import open_knowledge

    knowledge = open_knowledge(settings)
    if knowledge is not None:
        knowledge.start()
        opened.callback(knowledge.close)
    return knowledge


def add_knowledge(app: App) -> None:
    """Start the knowledge folders for an App built `with_model=False` that serves them
    (an owner of memory calls: `search_knowledge`); they close with the App."""
    with contextlib.ExitStack() as opened:
        app.knowledge = start_knowledge(app.settings, opened)
        app.stack.enter_context(opened.pop_all())


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
