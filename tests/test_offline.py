"""Fully offline: the bundled SmolLM2 model through the real local llama.cpp server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from helpers import alive, wait_gone

from seelen.app import build_app
from seelen.config import load_settings
from seelen.errors import ConfigError
from seelen.memory.context import build_messages, recall_budget
from seelen.models.local import LOCAL_REPLY_TOKENS, LOCAL_SAMPLING
from seelen.models.provider import (
    BUNDLED_CONTEXT_TOKENS,
    DEFAULT_CONTEXT_TOKENS,
    Provider,
    chat_sampling,
    choose_provider,
    planned_prompt_budget,
    prompt_budget,
    reply_cap,
    rewrites_files,
)
from seelen.protocol.events import Done, Event, TextDelta, TurnUsage
from seelen.store import now_ms


async def test_chat_and_archive_with_the_bundled_model(monkeypatch: pytest.MonkeyPatch) -> None:
    # Five tokens: fewer than the model's shortest hello back (6-10 tokens seen), so a cap
    # that did not reach llama.cpp fails the test; and a second of decoding at most.
    monkeypatch.setenv("MAX_REPLY_TOKENS", "5")
    monkeypatch.setenv("ENABLE_MCP", "false")
    settings = load_settings()
    assert choose_provider(settings).kind == "local"  # no endpoint configured
    app = build_app(settings)
    pid = app.provider.server.pid
    assert pid is not None and alive(pid)  # the llama.cpp child runs while Seelen does
    try:
        await app.open_session()
        assert app.provider.base_url.startswith("http://127.0.0.1:")
        assert not app.bot.tools_enabled and "cannot call tools" in app.tools_note
        events = [e async for e in app.bot.turn("Hello! Please say hello back.")]
        streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
        done = [e for e in events if isinstance(e, Done)]
        assert streamed.strip() and done and done[0].text == streamed
        usage = next(e for e in events if isinstance(e, TurnUsage))
        assert 0 < usage.completion_tokens <= 5  # the reply cap reached llama.cpp
        assert app.model.sampling == LOCAL_SAMPLING
        # A small prompt, and recall within a fifth of it: the model evaluates every token.
        assert app.bot.context_tokens == BUNDLED_CONTEXT_TOKENS
        assert app.recall.token_budget == recall_budget(BUNDLED_CONTEXT_TOKENS)
        sid = app.sessions.current.session_id
        assert [t.role for t in app.store.turns(sid)] == ["user", "assistant"]

        persona, profile = app.files.persona, app.files.profile
        result = await app.sessions.archive()
        assert result.summary.strip()
        assert app.store.session_summary(sid).text == result.summary
        # The 135M model's rewrites were invented text: by default it keeps both files.
        assert (app.files.persona, app.files.profile) == (persona, profile)
    finally:
        await app.aclose()
    assert wait_gone(pid, 10)  # and is gone once Seelen closes


def test_without_endpoint_or_local_model_the_message_names_both_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "auto")
    monkeypatch.setenv("LOCAL_MODEL_PATH", "/nonexistent/model.gguf")
    with pytest.raises(ConfigError) as err:
        choose_provider(load_settings())
    message = str(err.value)
    assert "OPENAI_BASE_URL" in message and "install" in message


def test_the_local_provider_gets_small_model_sampling_and_a_reply_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, remote = Provider("local", "", "k", "m", "m"), Provider("openai", "u", "k", "m", "m")
    settings = load_settings()
    assert reply_cap(settings, local) == LOCAL_REPLY_TOKENS <= 300
    assert reply_cap(settings, remote) == 0  # an endpoint's own limit
    assert chat_sampling(settings, local)["repeat_penalty"] > 1
    assert chat_sampling(settings, remote) == {}
    monkeypatch.setenv("TEMPERATURE", "0.9")
    monkeypatch.setenv("MAX_REPLY_TOKENS", "100")
    settings = load_settings()
    assert chat_sampling(settings, local)["temperature"] == 0.9
    assert reply_cap(settings, local) == 100


def test_only_the_bundled_model_is_kept_from_rewriting_persona_and_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, remote = Provider("local", "", "k", "m", "m"), Provider("openai", "u", "k", "m", "m")
    assert not rewrites_files(load_settings(), local)
    assert rewrites_files(load_settings(), remote)
    monkeypatch.setenv("LOCAL_MODEL_PATH", "/models/bigger.gguf")  # the user's own choice
    assert rewrites_files(load_settings(), local)
    monkeypatch.setenv("REWRITE_FILES", "true")
    monkeypatch.delenv("LOCAL_MODEL_PATH")
    assert rewrites_files(load_settings(), local)
    monkeypatch.setenv("REWRITE_FILES", "false")
    assert not rewrites_files(load_settings(), remote)


def test_the_prompt_budget_is_small_only_for_the_bundled_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, remote = Provider("local", "", "k", "m", "m"), Provider("openai", "u", "k", "m", "m")
    settings = load_settings()
    assert prompt_budget(settings, local, LOCAL_REPLY_TOKENS) == BUNDLED_CONTEXT_TOKENS
    assert planned_prompt_budget(settings) == BUNDLED_CONTEXT_TOKENS  # what memory search uses
    assert prompt_budget(settings, remote, 0) == DEFAULT_CONTEXT_TOKENS
    monkeypatch.setenv("LOCAL_MODEL_PATH", "/models/bigger.gguf")  # the user's own: what fits
    assert prompt_budget(load_settings(), local, LOCAL_REPLY_TOKENS) == 4096 - LOCAL_REPLY_TOKENS
    monkeypatch.delenv("LOCAL_MODEL_PATH")
    monkeypatch.setenv("CONTEXT_TOKENS", "2500")  # a budget set by hand is kept
    assert prompt_budget(load_settings(), local, LOCAL_REPLY_TOKENS) == 2500
    monkeypatch.setenv("CONTEXT_TOKENS", "100")
    with pytest.raises(ConfigError, match=r"CONTEXT_TOKENS.*at least 512"):
        load_settings()


def test_a_small_prompt_budget_gets_the_compact_rules() -> None:
    from datetime import UTC, datetime

    from seelen.memory.context import PromptParts
    from seelen.memory.prompts import COMPACT_RULES, RULES

    parts = PromptParts("persona", "profile", "", [], [], [], datetime.now(UTC))
    assert build_messages(parts, 3840)[0]["content"].startswith(COMPACT_RULES)
    assert build_messages(parts, 8000)[0]["content"].startswith(RULES)


async def _usage(events: AsyncIterator[Event]) -> TurnUsage:
    return next(e for e in [e async for e in events] if isinstance(e, TurnUsage))


async def test_the_next_question_reuses_the_prompt_read_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What changes per question (the time, what was recalled) comes with the question, so
    the next prompt begins byte for byte as the last one did before its question; the
    warm-up after an answer has llama.cpp read that beginning, and the next question takes
    it from the cache."""
    monkeypatch.setenv("MAX_REPLY_TOKENS", "2")  # two tokens: the prompt is the point
    monkeypatch.setenv("ENABLE_MCP", "false")
    app = build_app(load_settings())
    prompts: list[list[dict[str, Any]]] = []
    app.bot.log_prompt = prompts.append
    try:
        await app.open_session()
        past = app.store.create_session(start_ms=now_ms() - 86_400_000)
        said = ["My cat is called Pixel.", "Lovely!", "I work as a nurse in Porto.", "Nice."]
        rows = [
            ("user" if i % 2 == 0 else "assistant", text, None, None) for i, text in enumerate(said)
        ]
        app.store.add_turns(past.session_id, rows)
        app.store.mark_archived(past.session_id)
        await _usage(app.bot.turn("What is my cat called?"))
        assert app.bot.warmer is not None  # the local model's prompt is read ahead
        warm = await app.bot.warmer.warm()  # what an open chat or owner does after an answer
        second = await _usage(app.bot.turn("Where do I work as a nurse?"))
    finally:
        await app.aclose()
    one, two = prompts
    # What was recalled for each question, in a system message of its own before it: the
    # 135M model copied the block's headings into its answers when they opened the question.
    assert one[-2]["role"] == "system" and "Pixel" in one[-2]["content"]
    assert two[-2]["role"] == "system" and "Porto" in two[-2]["content"]
    assert one[-1] == {"role": "user", "content": "What is my cat called?"}
    assert two[: len(one) - 2] == one[:-2]  # the system message and the turns before
    assert two[len(one) - 2] == {"role": "user", "content": "What is my cat called?"}
    # All of what was read ahead but its last two tokens ("assistant", a newline: where the
    # read-ahead asked for a reply, the question's prompt has the context's system message).
    assert warm is not None and second.cached_tokens >= warm.prompt_tokens - 2, (warm, second)
