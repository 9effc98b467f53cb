"""The real ``openai`` client (sync and async) against the scripted ModelServer."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator

import openai
import pytest
from model_server import ModelServer, Reply

from seelen.models.http import async_client, sync_client


def _client(server: ModelServer, **kw: object) -> openai.OpenAI:
    """The SDK's client as Seelen makes it: its HTTP client shares the process's TLS context
    (reading the certificate bundle costs ~40 ms of CPU per client otherwise)."""
    return openai.OpenAI(
        base_url=server.url,
        api_key="test-key",
        max_retries=0,
        http_client=sync_client(server.url),
        **kw,
    )


def _aclient(server: ModelServer, **kw: object) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=server.url,
        api_key="test-key",
        max_retries=0,
        http_client=async_client(server.url),
        **kw,
    )


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """A fresh server per test (same as the shared ``model_server`` fixture)."""
    with ModelServer() as srv:
        yield srv


MSGS = [{"role": "user", "content": "hello there model"}]
TWO_CALLS = [
    {"name": "get_weather", "arguments": {"city": "Berlin", "unit": "celsius"}},
    {"name": "remember", "arguments": '{"fact": "likes tea"}', "id": "call_custom"},
]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_non_stream_text(server: ModelServer) -> None:
    """A queued string comes back as a full chat.completion with usage."""
    server.enqueue("Hello, world!")
    with _client(server) as client:
        resp = client.chat.completions.create(model="test-model", messages=MSGS)
    choice = resp.choices[0]
    assert choice.message.content == "Hello, world!"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == 3
    assert resp.usage.completion_tokens == 2
    assert resp.usage.total_tokens == 5


def test_non_stream_tool_calls(server: ModelServer) -> None:
    """Non-streamed tool calls: content null, arguments as JSON strings."""
    server.enqueue(Reply(tool_calls=TWO_CALLS, prompt_tokens=7, completion_tokens=9))
    with _client(server) as client:
        resp = client.chat.completions.create(model="test-model", messages=MSGS)
    msg = resp.choices[0].message
    assert msg.content is None
    assert resp.choices[0].finish_reason == "tool_calls"
    assert msg.tool_calls is not None
    assert [c.function.name for c in msg.tool_calls] == ["get_weather", "remember"]
    assert json.loads(msg.tool_calls[0].function.arguments) == {"city": "Berlin", "unit": "celsius"}
    assert msg.tool_calls[1].id == "call_custom"
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (7, 9)


def test_stream_text(server: ModelServer) -> None:
    """Streamed deltas join to the text, over several chunks, role first, finish last."""
    text = "The quick brown fox  jumps\nover the lazy dog."
    server.enqueue(text)
    with _client(server) as client:
        chunks = list(
            client.chat.completions.create(model="test-model", messages=MSGS, stream=True)
        )
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 1
    assert "".join(pieces) == text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)


def test_stream_include_usage(server: ModelServer) -> None:
    """stream_options.include_usage adds a final chunk with empty choices and usage."""
    server.enqueue(Reply(text="one two three", finish_reason="length"))
    with _client(server) as client:
        chunks = list(
            client.chat.completions.create(
                model="test-model",
                messages=MSGS,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (3, 3)
    assert chunks[-2].choices[0].finish_reason == "length"


def test_stream_tool_calls_reassemble(server: ModelServer) -> None:
    """Two streamed tool calls reassemble (by index) to the right names and arguments."""
    server.enqueue(Reply(text="Let me check.", tool_calls=TWO_CALLS))
    calls: dict[int, dict[str, str]] = {}
    content = ""
    finish = None
    fragments = 0
    with _client(server) as client:
        stream = client.chat.completions.create(model="test-model", messages=MSGS, stream=True)
        for chunk in stream:
            choice = chunk.choices[0]
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                if tc.id:
                    assert tc.type == "function"
                    assert tc.function is not None and tc.function.arguments == ""
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
                    fragments += 1
    assert content == "Let me check."
    assert finish == "tool_calls"
    assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "remember"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Berlin", "unit": "celsius"}
    assert json.loads(calls[1]["arguments"]) == {"fact": "likes tea"}
    assert calls[1]["id"] == "call_custom" and calls[0]["id"]
    assert fragments > 2


def test_errors_map_to_openai_exceptions(server: ModelServer) -> None:
    """500 → InternalServerError, 429 → RateLimitError, 503 streamed → APIStatusError."""
    server.enqueue(Reply(status=500), Reply(status=429, text="slow down"), Reply(status=503))
    with _client(server) as client:
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="test-model", messages=MSGS)
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="test-model", messages=MSGS)
        assert "slow down" in str(info.value)
        with pytest.raises(openai.APIStatusError) as info2:
            client.chat.completions.create(model="test-model", messages=MSGS, stream=True)
        assert info2.value.status_code == 503
        # the connection is still usable afterwards
        assert client.chat.completions.create(model="m", messages=MSGS).choices[0].message.content
    assert len(server.chat_requests()) == 4


def test_delay_beyond_timeout(server: ModelServer) -> None:
    """A reply slower than the client timeout raises APITimeoutError."""
    server.enqueue(Reply(text="too late", delay=2.0))
    start = time.monotonic()
    with _client(server, timeout=0.2) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="test-model", messages=MSGS)
    assert time.monotonic() - start < 1.5


def test_responder_used_when_queue_empty(server: ModelServer) -> None:
    """Queue first, then the responder (which sees the request body), default 'ok'."""
    with _client(server) as client:

        def ask() -> str | None:
            return (
                client.chat.completions.create(model="t", messages=MSGS).choices[0].message.content
            )

        assert ask() == "ok"
        server.enqueue("queued")
        server.responder = lambda body: Reply(text=f"echo: {body['messages'][-1]['content']}")
        assert ask() == "queued"
        assert server.pending == 0
        assert ask() == "echo: hello there model"


def test_requests_and_auth_recorded(server: ModelServer) -> None:
    """Bodies and Authorization headers of every request are recorded."""
    server.enqueue("a", "b")
    with _client(server) as client:
        client.chat.completions.create(model="test-model", messages=MSGS)
        client.embeddings.create(model="emb", input="x")
        client.chat.completions.create(
            model="test-model",
            messages=[
                *MSGS,
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": "q"},
            ],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        )
        models = client.models.list()
    assert [m.id for m in models.data] == ["test-model"]
    assert len(server.requests) == 3
    assert server.requests[1]["input"] == "x"
    chats = server.chat_requests()
    assert len(chats) == 2
    assert chats[1]["tools"][0]["function"]["name"] == "f"
    assert server.last_messages()[-1] == {"role": "user", "content": "q"}
    assert len(server.headers) == 4
    assert all(h["authorization"] == "Bearer test-key" for h in server.headers)
    assert server.paths[-1] == "GET /v1/models"


def test_embeddings_shape_and_similarity(server: ModelServer) -> None:
    """Deterministic, normalised vectors; shared words → higher cosine; str or list input."""
    texts = ["the cat sat on the mat", "a cat sat on a mat", "quantum chromodynamics lecture"]
    with _client(server) as client:
        resp = client.embeddings.create(model="emb", input=texts)
        single = client.embeddings.create(model="emb", input="The CAT sat on the mat")
        floats = client.embeddings.create(model="emb", input=texts[0], encoding_format="float")
    vecs = [d.embedding for d in resp.data]
    assert [d.index for d in resp.data] == [0, 1, 2]
    assert all(len(v) == 16 for v in vecs)
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-5) for v in vecs)
    assert _cosine(vecs[0], vecs[1]) > _cosine(vecs[0], vecs[2])
    assert _cosine(vecs[0], vecs[1]) > 0.3
    assert single.data[0].embedding == pytest.approx(vecs[0], abs=1e-6)
    assert floats.data[0].embedding == pytest.approx(vecs[0], abs=1e-6)
    assert resp.usage.prompt_tokens > 0


def test_unknown_path_404(server: ModelServer) -> None:
    """Unknown endpoints answer with a 404 JSON error."""
    with _client(server) as client, pytest.raises(openai.NotFoundError):
        client.get("/nope", cast_to=object)


def test_client_disconnect_mid_stream() -> None:
    """Abandoning a slow stream does not hang; the server keeps serving and closes fast."""
    with ModelServer() as server:
        server.enqueue(Reply(text="word " * 50, chunk_delay=0.02), "after")
        with _client(server) as client:
            stream = client.chat.completions.create(model="m", messages=MSGS, stream=True)
            for i, _chunk in enumerate(stream):
                if i == 3:
                    break
            stream.close()
            resp = client.chat.completions.create(model="m", messages=MSGS)
            assert resp.choices[0].message.content == "after"
        start = time.monotonic()
    assert time.monotonic() - start < 1.0


async def test_async_stream_and_text(server: ModelServer) -> None:
    """AsyncOpenAI: streamed text, tool calls and a plain completion."""
    server.enqueue("alpha beta gamma", Reply(tool_calls=TWO_CALLS[:1]), "plain")
    async with _aclient(server) as client:
        stream = await client.chat.completions.create(
            model="test-model",
            messages=MSGS,
            stream=True,
            stream_options={"include_usage": True},
        )
        pieces = [c.choices[0].delta.content async for c in stream if c.choices]
        assert "".join(p for p in pieces if p) == "alpha beta gamma"
        assert len([p for p in pieces if p]) == 3

        args = ""
        stream = await client.chat.completions.create(
            model="test-model", messages=MSGS, stream=True
        )
        async for chunk in stream:
            for tc in chunk.choices[0].delta.tool_calls or []:
                args += (tc.function.arguments or "") if tc.function else ""
        assert json.loads(args) == {"city": "Berlin", "unit": "celsius"}

        resp = await client.chat.completions.create(model="test-model", messages=MSGS)
        assert resp.choices[0].message.content == "plain"


async def test_async_errors_and_timeout(server: ModelServer) -> None:
    """AsyncOpenAI: 500, 429 and timeout map to the right exceptions; embeddings work."""
    server.enqueue(Reply(status=500), Reply(status=429), Reply(delay=2.0))
    # Only the delayed reply gets the short timeout: a loaded machine can take longer than
    # 0.2 s to answer the others, which must fail with their own status, not a timeout.
    async with _aclient(server, timeout=10.0) as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="test-model", messages=MSGS)
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="test-model", messages=MSGS)
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="test-model", messages=MSGS, timeout=0.2)
        emb = await client.embeddings.create(model="emb", input=["x y", "y z"])
        assert len(emb.data) == 2 and len(emb.data[0].embedding) == 16
