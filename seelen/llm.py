"""The chat model: a small protocol and an OpenAI-compatible client.

The client streams, assembles native tool calls, and retries 429s, 5xx answers, timeouts
and dropped connections with exponential backoff before the first token. After that a
failure is a `ModelError` with one clear line; the caller keeps what was shown.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from seelen.errors import ModelError
from seelen.redact import redact


@dataclass(frozen=True)
class TextChunk:
    """A piece of the reply's text, as it streams."""

    text: str


@dataclass(frozen=True)
class ModelToolCall:
    """One native tool call the model asked for; `arguments` is the raw JSON string."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    """The end of one model answer: all its text, its tool calls and the token usage."""

    text: str
    tool_calls: list[ModelToolCall] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None


class ChatModel(Protocol):
    """What Seelen needs from a model: a streamed answer and a plain one."""

    name: str

    def stream(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()
    ) -> AsyncIterator[TextChunk | Completion]:
        """Yield `TextChunk`s, then exactly one `Completion`."""
        ...

    async def complete(
        self, messages: Sequence[dict[str, Any]], *, model: str = "", max_tokens: int = 0
    ) -> str:
        """The whole answer at once (summaries, memory upkeep); `model` overrides the name."""
        ...


class OpenAIChatModel:
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, DeepSeek, Ollama, llama.cpp)."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = 60.0,
        max_retries: int = 3,
        retry_base: float = 0.5,
        max_tokens: int = 0,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.name = model
        # Sampling options sent with every request (`extra_body` for endpoint-specific ones).
        self.options = dict(options or {})
        self.base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        self._retry_base = retry_base
        self._max_tokens = max_tokens
        self._client: Any = None

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI  # imported late: it costs ~0.3 s at start-up

            self._client = AsyncOpenAI(
                base_url=self.base_url or None,
                api_key=self._api_key or "not-needed",
                timeout=self._timeout,
                max_retries=0,  # retries are ours, so they are counted and reported once
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        if self._client is not None:
            await self._client.close()

    async def stream(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()
    ) -> AsyncIterator[TextChunk | Completion]:
        """Stream one answer; retries happen only before the first chunk arrives."""
        kwargs: dict[str, Any] = {
            "model": self.name,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            kwargs["tools"] = list(tools)
        response = await self._with_retries(self._capped(kwargs))
        parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Usage | None = None
        finish: str | None = None
        try:
            async for chunk in response:
                if chunk.usage is not None:
                    usage = Usage(
                        chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0
                    )
                for choice in chunk.choices or ():
                    finish = choice.finish_reason or finish
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        parts.append(delta.content)
                        yield TextChunk(delta.content)
                    for tc in delta.tool_calls or ():
                        _merge_tool_delta(calls, tc)
        except Exception as exc:
            if parts or calls:  # it was answering: the answer is cut, not unreachable
                raise ModelError(f"{_where(self.base_url)} broke off mid-answer") from exc
            raise ModelError(_describe(exc, self.base_url, self._api_key)) from exc
        finally:
            await response.close()
        if finish is None:
            # Every complete answer ends with a finish_reason; without one the stream was cut
            # (or the body was no stream at all), so nothing here may pass for a whole reply.
            raise ModelError(_unfinished(self.base_url, bool(parts or calls)))
        tool_calls = [
            ModelToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"] or "{}")
            for i, c in sorted(calls.items())
            if c["name"]
        ]
        yield Completion("".join(parts), tool_calls, usage, finish)

    async def complete(
        self, messages: Sequence[dict[str, Any]], *, model: str = "", max_tokens: int = 0
    ) -> str:
        """One non-streamed answer's text, capped at `max_tokens` when given."""
        kwargs: dict[str, Any] = {"model": model or self.name, "messages": list(messages)}
        kwargs = self._capped(kwargs)
        if max_tokens:
            kwargs["max_tokens"] = min(max_tokens, kwargs.get("max_tokens") or max_tokens)
        response = await self._with_retries(kwargs)
        choices = getattr(response, "choices", None)
        if not choices:  # a 200 whose body was not a chat completion (a proxy's error page)
            raise ModelError(_unfinished(self.base_url, False))
        return (choices[0].message.content or "").strip()

    def _capped(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs.update(self.options)
        if self._max_tokens:
            kwargs["max_tokens"] = self._max_tokens
        return kwargs

    async def _with_retries(self, kwargs: dict[str, Any]) -> Any:
        import openai

        client = self._get_client()
        retryable = (
            openai.RateLimitError,
            openai.InternalServerError,
            openai.APITimeoutError,
            openai.APIConnectionError,
        )
        for attempt in range(self._max_retries + 1):
            try:
                return await client.chat.completions.create(**kwargs)
            except retryable as exc:
                if attempt == self._max_retries:
                    tries = f" after {attempt + 1} tries" if attempt else ""
                    raise ModelError(_describe(exc, self.base_url, self._api_key) + tries) from exc
                delay = self._retry_base * 2**attempt
                await asyncio.sleep(delay * (0.75 + random.random() / 2))
            except openai.APIError as exc:
                raise ModelError(_describe(exc, self.base_url, self._api_key)) from exc
        raise AssertionError("unreachable")


def _merge_tool_delta(calls: dict[int, dict[str, str]], tc: Any) -> None:
    """Fold one streamed tool-call fragment into the calls assembled so far."""
    slot = calls.setdefault(tc.index or 0, {"id": "", "name": "", "arguments": ""})
    if tc.id:
        slot["id"] = tc.id
    if tc.function is not None:
        if tc.function.name:
            slot["name"] += tc.function.name
        if tc.function.arguments:
            slot["arguments"] += tc.function.arguments


def _where(base_url: str) -> str:
    return f"the model at {base_url or 'the OpenAI API'}"


def _unfinished(base_url: str, started: bool) -> str:
    """One line for an answer that never said it was complete."""
    if started:
        return f"{_where(base_url)} stopped before finishing its answer"
    return f"{_where(base_url)} answered with no completion (is it OpenAI-compatible?)"


def _describe(exc: Exception, base_url: str, api_key: str = "") -> str:
    """One line for the user; never includes the API key, even when the endpoint echoes it."""
    return redact(_explain(exc, base_url), api_key)


def _explain(exc: Exception, base_url: str) -> str:
    import openai

    where = base_url or "the OpenAI API"
    if isinstance(exc, openai.APITimeoutError):
        return f"the model at {where} did not answer in time"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach the model at {where}"
    if isinstance(exc, openai.APIStatusError):
        message = _error_message(exc)
        return f"the model at {where} answered {exc.status_code}: {message}"
    return f"the model at {where} failed: {type(exc).__name__}: {exc}"


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]
