"""One turn through the real app: store, model client and HTTP server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from helpers import asked, context_of, wait_until_async
from model_server import ModelServer, Reply

from seelen.app import App, build_app
from seelen.config import load_settings
from seelen.protocol.events import Done, Failed, TextDelta


async def open_app() -> App:
    app = build_app(load_settings())
    await app.open_session()
    return app


async def collect(events) -> list:
    return [e async for e in events]


async def test_reply_streams_and_both_turns_are_saved(env: ModelServer) -> None:
    env.enqueue("Nice to meet you, Ada!")
    app = await open_app()
    events = await collect(app.bot.turn("Hi, I am Ada"))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Nice to meet you, Ada!"
    turns = app.sessions.live_turns()
    assert [(t.role, t.text) for t in turns] == [
        ("user", "Hi, I am Ada"),
        ("assistant", "Nice to meet you, Ada!"),
    ]
    request = env.chat_requests()[-1]
    assert request["stream"] is True and request["model"] == "test-model"
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][-1]["role"] == "user" and asked(request) == "Hi, I am Ada"
    # The time comes with the question, in its context block; the system message stays the
    # same from one question to the next.
    assert "## Current time" in context_of(request)
    assert "Current time" not in request["messages"][0]["content"]
    assert env.headers[-1]["authorization"] == "Bearer sk-test-secret-key-123"
    await app.aclose()


async def test_session_is_restored_after_restart(env: ModelServer) -> None:
    env.enqueue("Noted: blue.")
    app = await open_app()
    sid = app.sessions.current.session_id
    await collect(app.bot.turn("My favourite colour is blue"))
    await app.aclose()

    app2 = await open_app()
    assert app2.sessions.current.session_id == sid
    env.enqueue("It is blue.")
    await collect(app2.bot.turn("What is my favourite colour?"))
    sent = env.chat_requests()[-1]["messages"]
    assert {"role": "user", "content": "My favourite colour is blue"} in sent
    assert {"role": "assistant", "content": "Noted: blue."} in sent
    await app2.aclose()


async def test_failed_call_keeps_the_turn_and_retry_answers_it(env: ModelServer) -> None:
    env.enqueue(Reply(status=500), Reply(status=503, text="overloaded"))
    app = await open_app()
    events = await collect(app.bot.turn("Please remember my dentist is Dr. Oz"))
    failure = [e for e in events if isinstance(e, Failed)]
    assert failure and "503" in failure[0].message and "overloaded" in failure[0].message
    assert len(env.chat_requests()) == 2  # one retry (MAX_RETRIES=1), then the error
    assert failure[0].message.endswith("after 2 tries") and "\n" not in failure[0].message
    assert [t.text for t in app.sessions.live_turns()] == ["Please remember my dentist is Dr. Oz"]
    assert app.bot.unanswered().text == "Please remember my dentist is Dr. Oz"

    env.enqueue("Got it: Dr. Oz.")
    events = await collect(app.bot.retry())
    assert isinstance(events[-1], Done) and events[-1].text == "Got it: Dr. Oz."
    assert [(t.role, t.text) for t in app.sessions.live_turns()] == [
        ("user", "Please remember my dentist is Dr. Oz"),
        ("assistant", "Got it: Dr. Oz."),
    ]
    assert asked(env.chat_requests()[-1]) == "Please remember my dentist is Dr. Oz"
    assert app.bot.unanswered() is None
    await app.aclose()


async def test_the_prompt_is_built_around_its_own_question(env: ModelServer) -> None:
    # A question stored later (by another front-end) must not become this turn's question.
    env.enqueue(Reply(status=500), Reply(status=500))
    app = await open_app()
    await collect(app.bot.turn("first question"))
    app.store.add_turn(app.sessions.current.session_id, "user", "a later question")
    app.bot.unanswered = lambda: app.store.turns(app.sessions.current.session_id)[0]
    env.enqueue("answer")
    await collect(app.bot.retry())
    users = [m for m in env.last_messages() if m["role"] == "user"]
    assert len(users) == 1 and asked(env.last_messages()) == "first question"
    await app.aclose()


async def test_rate_limit_is_retried_with_backoff(env: ModelServer) -> None:
    env.enqueue(Reply(status=429), "after the wait")
    app = await open_app()
    events = await collect(app.bot.turn("hello"))
    assert isinstance(events[-1], Done) and events[-1].text == "after the wait"
    assert len(env.chat_requests()) == 2
    await app.aclose()


async def test_the_client_waits_as_long_as_retry_after_asks(env: ModelServer) -> None:
    env.enqueue(Reply(status=503, retry_after="0.6"), "after the pause")
    app = await open_app()
    started = time.monotonic()
    events = await collect(app.bot.turn("hello"))
    waited = time.monotonic() - started
    assert isinstance(events[-1], Done) and events[-1].text == "after the pause"
    assert len(env.chat_requests()) == 2
    assert waited >= 0.6  # the client's own backoff alone would start at 0.5 s minus jitter
    await app.aclose()


async def test_a_bad_request_is_not_retried(env: ModelServer) -> None:
    env.enqueue(Reply(status=400, text="context too long"), "never sent")
    app = await open_app()
    events = await collect(app.bot.turn("hello"))
    assert isinstance(events[-1], Failed)
    assert events[-1].message.endswith("answered 400: context too long")
    assert len(env.chat_requests()) == 1
    await app.aclose()


async def test_timeout_becomes_a_clear_error(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REQUEST_TIMEOUT", "1")
    monkeypatch.setenv("MAX_RETRIES", "0")
    env.enqueue(Reply(text="too late", delay=3))
    app = await open_app()
    events = await collect(app.bot.turn("are you there?"))
    assert isinstance(events[-1], Failed)
    assert "did not answer in time" in events[-1].message
    assert app.bot.unanswered().text == "are you there?"
    await app.aclose()


async def test_cancelled_reply_keeps_what_was_shown(env: ModelServer) -> None:
    env.enqueue(Reply(text="one two three four five six seven eight", chunk_delay=0.15))
    app = await open_app()
    seen: list[str] = []

    async def consume() -> None:
        async for event in app.bot.turn("count slowly"):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    task = asyncio.create_task(consume())
    await wait_until_async(lambda: len(seen) >= 3, 30, "the reply never streamed three pieces")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = app.sessions.live_turns()[-1]
    assert last.role == "assistant" and last.meta.get("interrupted") is True
    assert last.text == "".join(seen) and 0 < len(last.text) < 30
    await app.aclose()


async def test_debug_log_never_contains_the_api_key(
    env: ModelServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBUG_MODE", "true")
    app = await open_app()
    await collect(app.bot.turn("my key is sk-test-secret-key-123, keep it"))
    log = (data_dir / "default" / "logs" / "prompts.jsonl").read_text()
    assert "keep it" in log and "sk-test-secret-key-123" not in log
    json.loads(log.splitlines()[-1])
    await app.aclose()


async def test_debug_log_records_the_clients_retries_without_the_key(
    env: ModelServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBUG_MODE", "true")
    env.enqueue(Reply(status=429), "fine now")
    app = await open_app()
    await collect(app.bot.turn("hello"))
    await app.aclose()
    log = (data_dir / "default" / "logs" / "seelen.log").read_text()
    assert "Retrying request in" in log
    assert "sk-test-secret-key-123" not in log


async def test_the_model_clients_of_a_process_share_one_tls_context_that_checks_certificates(
    env: ModelServer,
) -> None:
    import ssl

    from seelen.models.chat import OpenAIChatModel
    from seelen.models.embed import OpenAIEmbedder
    from seelen.models.http import tls_context

    def context_of(client: object) -> ssl.SSLContext:
        # httpx2 keeps its transport's TLS context here; the SDK would build one per client.
        return client._client._transport._pool._ssl_context  # type: ignore[attr-defined,no-any-return]

    secure = "https://models.example/v1"
    contexts = [
        context_of(OpenAIChatModel(base_url=secure, api_key="k", model="m")._get_client()),
        context_of(OpenAIEmbedder(base_url=secure, api_key="k", model="e")._get_client()),
    ]
    assert contexts == [tls_context(), tls_context()] and contexts[0] is contexts[1]
    assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
    assert contexts[0].cert_store_stats()["x509_ca"] > 0  # the system's certificates

    # A plain-http endpoint (this test's server) never reads the certificates: its context
    # trusts none, so a redirect to https fails closed, and is as strict as the other.
    chat = OpenAIChatModel(base_url=env.url, api_key="k", model="m")
    embedder = OpenAIEmbedder(base_url=env.url, api_key="k", model="e")
    plain = [context_of(chat._get_client()), context_of(embedder._get_client())]
    assert plain[0] is plain[1] and plain[0] is not tls_context()
    assert plain[0].verify_mode == ssl.CERT_REQUIRED and plain[0].check_hostname
    assert plain[0].cert_store_stats()["x509_ca"] == 0
    env.enqueue("streamed through the shared client")
    chunks = [c async for c in chat.stream([{"role": "user", "content": "hi"}])]
    assert "streamed through the shared client" in "".join(getattr(c, "text", "") for c in chunks)
    await chat.aclose()
