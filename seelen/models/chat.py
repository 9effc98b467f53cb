"""The chat model: a small protocol and an OpenAI-compatible client.

The client streams and assembles native tool calls. Retries are the `openai` client's own
(`max_retries`): 429s, 408/409, 5xx answers, timeouts and dropped connections are retried
with jittered exponential backoff, honouring `Retry-After`, before the first token. After
that a failure is a `ModelError` with one clear line; the caller keeps what was shown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from seelen.counts import counted
from seelen.errors import ModelError
from seelen.logs import redact

if TYPE_CHECKING:  # openai costs ~0.3 s to import: its types are for the checker only
    from openai import APIStatusError, AsyncOpenAI
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall
    from openai.types.completion_usage import CompletionUsage


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
    cached_tokens: int = 0  # of the prompt's, those the server reused from its prompt cache


@dataclass(frozen=True)
class Completion:
    """The end of one model answer: all its text, its tool calls and the token usage."""

    text: str
    tool_calls: list[ModelToolCall] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None


class ChatModel(Protocol):
    """What Seelen needs from a model: a streamed answer, a plain one, and a prompt read
    ahead of time."""

    name: str

    async def prefill(self, messages: Sequence[dict[str, Any]]) -> Usage | None:
        """Have the server read `messages` into its prompt cache now."""
        ...

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
        max_tokens: int = 0,
        sampling: dict[str, Any] | None = None,
        settings_named: bool = False,
    ) -> None:
        self.name = model
        # The endpoint is the user's (OPENAI_BASE_URL, OPENAI_API_KEY): a refused key or an
        # unreachable address names the setting to check (not for the bundled local model).
        self._settings_named = settings_named
        self.base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        self.max_tokens = max_tokens  # cap per answer; 0 = the endpoint's
        # Extra request fields for chat replies (temperature, top_p, repeat_penalty…).
        self.sampling = dict(sampling or {})
        self._client: AsyncOpenAI | None = None

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            from openai import AsyncOpenAI  # imported late: it costs ~0.3 s at start-up

            from seelen.models.http import async_client

            self._client = AsyncOpenAI(
                base_url=self.base_url or None,
                api_key=self._api_key or "not-needed",
                timeout=self._timeout,
                max_retries=self._max_retries,  # honours Retry-After; backoff 0.5 s → 8 s
                http_client=async_client(self.base_url),
            )
        return self._client

    def warm(self) -> None:
        """Import the openai package now (~0.3-0.5 s), in a thread, while nothing waits."""
        import openai  # noqa: F401
        from openai.types.chat import ChatCompletionChunk  # noqa: F401

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
        kwargs.update(self.sampling)
        response = await self._create(self._capped(kwargs))
        parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Usage | None = None
        finish: str | None = None
        try:
            async for chunk in response:
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
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

    async def prefill(self, messages: Sequence[dict[str, Any]]) -> Usage | None:
        """Have the server read `messages` now, generating one token, so that its prompt
        cache (llama.cpp keeps a slot's last prompt) holds them: a request that begins with
        them later evaluates only what follows. Returns the usage the server reported."""
        response = await self._create(
            {"model": self.name, "messages": list(messages), "max_tokens": 1}
        )
        found = getattr(response, "usage", None)
        return _usage(found) if found is not None else None

    async def complete(
        self, messages: Sequence[dict[str, Any]], *, model: str = "", max_tokens: int = 0
    ) -> str:
        """One non-streamed answer's text, capped at `max_tokens` when given."""
        kwargs: dict[str, Any] = {"model": model or self.name, "messages": list(messages)}
        kwargs = self._capped(kwargs)
        # A small model's anti-loop settings (llama.cpp's own fields) matter for summaries too.
        kwargs.update({k: v for k, v in self.sampling.items() if k not in _OPENAI_SAMPLING})
        if max_tokens:
            kwargs["max_tokens"] = min(max_tokens, kwargs.get("max_tokens") or max_tokens)
        response = await self._create(kwargs)
        choices = getattr(response, "choices", None)
        if not choices:  # a 200 whose body was not a chat completion (a proxy's error page)
            raise ModelError(_unfinished(self.base_url, False))
        return (choices[0].message.content or "").strip()

    def _capped(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.max_tokens:
            kwargs["max_tokens"] = self.max_tokens
        return kwargs

    # Any: a ChatCompletion, or an AsyncStream of chunks when body["stream"] is true.
    async def _create(self, body: dict[str, Any]) -> Any:
        """One request; the client retries what is worth retrying, then one clear line.

        The body is posted as it is, through the client's own `post` (its retries, errors
        and stream parsing): `chat.completions.create` first walks every message through its
        type annotations, which took 5-6 ms per turn with a full prompt (bench/bench_turn.py),
        for dicts that are already in the wire format.
        """
        import openai
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        stream = bool(body.get("stream"))
        try:
            return await self._get_client().post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                stream=stream,
                stream_cls=openai.AsyncStream[ChatCompletionChunk] if stream else None,
            )
        except openai.APIError as exc:
            message = _describe(exc, self.base_url, self._api_key)
            status = getattr(exc, "status_code", None)
            hint = _hint(exc) if self._settings_named else ""
            raise ModelError(message + self._tries(exc) + hint, status=status) from exc

    def _tries(self, exc: Exception) -> str:
        """How often the client tried, for failures it retries (see `_RETRIED_STATUS`)."""
        import openai

        if not self._max_retries:
            return ""
        if isinstance(exc, openai.APIStatusError):
            if exc.status_code not in _RETRIED_STATUS and exc.status_code < 500:
                return ""
            wait = _retry_after(exc)
            if wait is not None and wait > 120:  # the client does not wait that long
                return f" (it asks to wait {wait:.0f} s)"
        elif not isinstance(exc, openai.APIConnectionError):  # includes timeouts
            return ""
        return f" after {counted(self._max_retries + 1, 'try', 'tries')}"


# Statuses the openai client retries besides 5xx (openai._base_client._should_retry).
_RETRIED_STATUS = {408, 409, 429}
# Sampling fields the chat-completions API defines; others (repeat_penalty, top_k…) are
# llama.cpp's, which OpenAI itself would refuse: a summary sends only those (see `complete`).
_OPENAI_SAMPLING = {"temperature", "top_p", "frequency_penalty", "presence_penalty", "seed"}


def _retry_after(exc: APIStatusError) -> float | None:
    try:
        return float(exc.response.headers.get("retry-after", ""))
    except (AttributeError, ValueError):
        return None


def _usage(usage: CompletionUsage) -> Usage:
    """Seelen's usage from the API's; `cached_tokens` is OpenAI's field, llama.cpp's too."""
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0, cached)


def _merge_tool_delta(calls: dict[int, dict[str, str]], tc: ChoiceDeltaToolCall) -> None:
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


def _hint(exc: Exception) -> str:
    """What to check for a refused key or an unreachable endpoint, as settings to look at."""
    import openai

    if isinstance(exc, openai.APIStatusError) and exc.status_code in (401, 403):
        return ": check OPENAI_API_KEY (the environment or .env)"
    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        return ": is it running? check OPENAI_BASE_URL (the environment or .env)"
    return ""


def _error_message(exc: APIStatusError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]
