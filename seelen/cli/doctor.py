"""`seelen doctor`: what is in use, and whether each part works."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from seelen.app import App
from seelen.app.build import chat_model
from seelen.cli.common import labelled, unlabelled
from seelen.config import Settings
from seelen.counts import counted
from seelen.errors import SeelenError, StoreError
from seelen.models.chat import OpenAIChatModel
from seelen.models.provider import Provider, choose_provider, reply_cap, start_local_server


@dataclass(frozen=True)
class Check:
    """One part checked: works (`ok`), failed, or still at work (`pending`: not a failure)."""

    name: str
    ok: bool
    detail: str
    pending: bool = False


class UnderWay(SeelenError):
    """A check found work in progress (the vector index catching up), not a fault."""


# What a doctor says of texts waiting to be embedded, and of a re-index.
INDEXING = (
    "indexing under way: the process that holds this profile embeds them in the background "
    "(or the next one to open it); recall finds them by their words meanwhile"
)
REBUILDING = "a re-index is being built beside the index; recall uses the current one meanwhile"


def facts(app: App) -> list[tuple[str, str]]:
    """What Seelen is using: provider, models, embedding backend, data dir."""
    embedder = app.recall.embedder if app.recall else None
    return _facts(app.settings, app.provider, getattr(embedder, "model_id", "none"))


def _facts(s: Settings, p: Provider, embeddings: str) -> list[tuple[str, str]]:
    endpoint = p.base_url or "https://api.openai.com/v1"
    if p.kind == "local" and p.server is not None:
        endpoint = f"{p.base_url} (llama.cpp, {p.server.model_path.name})"
    return [
        ("provider", p.kind),
        ("endpoint", endpoint),
        ("chat model", p.chat_model),
        ("tool model", p.tool_model),
        ("embeddings", embeddings),
        ("data dir", str(s.profile_dir)),
        ("profile", s.profile),
        ("timezone", s.timezone or "this machine's"),
    ]


async def without_memory(
    settings: Settings, problem: StoreError, on_line: Callable[[str], None]
) -> tuple[list[tuple[str, str]], list[Check]]:
    """When the memory store cannot be opened (damaged, unreadable): the facts and checks
    that need no memory, with the store's failure reported among them, not instead of them."""
    provider = choose_provider(settings)
    if provider.kind == "local":
        provider = start_local_server(settings, provider, on_line)
    model = chat_model(settings, provider, reply_cap(settings, provider))
    try:
        checks = [await _timed("model answers", lambda: _model_answers(model))]
    finally:
        await model.aclose()
        if provider.server is not None:
            provider.server.stop()
    checks.append(Check("memory store", False, str(problem)))
    checks.append(Check("vector index", False, "not checked: the memory store did not open"))
    return _facts(settings, provider, "not checked"), checks


async def _model_answers(model: OpenAIChatModel) -> str:
    reply = await model.complete([{"role": "user", "content": "Reply with the single word: ready"}])
    if not reply:
        raise SeelenError("the model returned an empty answer")
    return f"answered {reply[:40]!r}"


async def _timed(name: str, probe: Callable[[], Awaitable[str]]) -> Check:
    started = time.perf_counter()
    try:
        detail = await probe()
    except UnderWay as exc:
        return Check(name, False, str(exc), pending=True)
    except SeelenError as exc:  # a doctor reports every failure instead of stopping at one
        return Check(name, False, str(exc)[:300])
    except Exception as exc:  # a bug, or a library's own error: its words, not its class
        return Check(name, False, f"unexpected failure: {exc or 'no message'}"[:300])
    return Check(name, True, f"{detail} ({(time.perf_counter() - started) * 1000:.0f} ms)")


async def run_checks(app: App) -> list[Check]:
    """Probe the model, the store and the vector index; each check reports on its own."""

    async def store_healthy() -> str:
        verdict = await asyncio.to_thread(app.store.quick_check)
        if verdict != "ok":
            raise SeelenError(f"SQLite quick_check: {verdict}")
        turns = await asyncio.to_thread(app.store.count_turns)
        return f"{counted(turns, 'turn')}, migrations {', '.join(app.store.applied_migrations())}"

    async def index_healthy() -> str:
        if app.recall is None or app.recall.embedder is None:
            raise SeelenError("recall is not configured")
        from seelen.memory.maintenance import index_findings, rebuild_under_way

        findings = await asyncio.to_thread(index_findings, app)
        wrong = [labelled(f.name, f.detail) for f in findings if not (f.ok or f.pending)]
        if wrong:  # counted against the texts, so a lost index never passes for healthy
            raise SeelenError("; ".join(wrong) + " (seelen db repair fixes it)")
        counts = "; ".join(f.detail for f in findings if f.name != "vector model" or not f.ok)
        if any(f.pending for f in findings):
            raise UnderWay(f"{counts}: {INDEXING}")
        if await asyncio.to_thread(rebuild_under_way, app):
            raise UnderWay(f"{counts}; {REBUILDING}")
        vector = await asyncio.to_thread(app.recall.embedder.embed, ["doctor"])
        return f"{counts}; embedder dim {vector.shape[1]}"

    checks = [await _timed("model answers", lambda: _model_answers(app.model))]
    checks.append(await _timed("memory store", store_healthy))
    checks.append(await _timed("vector index", index_healthy))
    return checks + await mcp_checks(app)


async def mcp_checks(app: App) -> list[Check]:
    """Connect each configured MCP server and report it: ready with its tools, or why not."""
    manager = app.start_mcp(lambda _line: None)
    if manager is None:
        return []
    manager.connect_all()  # a cached tool list proves nothing: start every server
    await manager.wait_handshakes()
    return [
        Check(
            f"MCP server {status.name}",
            status.state in ("ready", "disabled"),
            unlabelled(f"MCP server {status.name}", status.line()),
        )
        for status in manager.status()
    ]
