"""A real HTTP server speaking the OpenAI chat-completions protocol, with scripted replies.

Only the model's *words* are fake: the transport (HTTP/1.1, JSON bodies, SSE streaming,
tool-call deltas, error bodies, usage) follows the OpenAI API so the real ``openai``
client can talk to it.  In the spirit of simonw/llm's ``MockModel.enqueue([...])``::

    with ModelServer() as server:
        server.enqueue("Hello there", Reply(tool_calls=[{"name": "f", "arguments": {}}]))
        client = openai.OpenAI(base_url=server.url, api_key="test-key", max_retries=0)

Standard library only: a process a test starts imports it (through tests/helpers.py) without
pytest. The `model_server` fixture is in conftest.py.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "test-model"
EMBEDDING_DIM = 16

# Errors meaning "the client went away"; a handler stops quietly on these.
_DISCONNECT = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)

_ERROR_TYPES = {
    400: ("invalid_request_error", "Bad request"),
    401: ("authentication_error", "Incorrect API key provided"),
    403: ("permission_error", "Permission denied"),
    404: ("not_found_error", "Not found"),
    408: ("timeout_error", "Request timed out"),
    409: ("conflict_error", "Conflict"),
    422: ("invalid_request_error", "Unprocessable entity"),
    429: ("rate_limit_error", "Rate limit reached, please try again later"),
    500: ("server_error", "The server had an error while processing your request"),
    502: ("server_error", "Bad gateway"),
    503: ("server_error", "The engine is currently overloaded, please try again later"),
}


@dataclass
class Reply:
    """One scripted model reply.

    ``status`` other than 200 answers with an OpenAI-style error body; ``text`` (if given)
    is then used as the error message.  ``tool_calls`` items are
    ``{"name": str, "arguments": dict | str, "id": optional str}``.
    """

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    chunk_delay: float = 0.0
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # A reasoning model's thoughts, sent as `reasoning_content` (DeepSeek-R1's field).
    reasoning: str = ""
    # Faults of a stream after ``cut_after`` text pieces: "silent" ends the body cleanly with
    # no finish_reason and no [DONE]; "drop" closes the connection mid-body.
    cut_after: int | None = None
    cut: str = "silent"
    # A 200 answer whose body is this raw text (not JSON, not SSE), e.g. a proxy's error page.
    raw_body: str | None = None
    retry_after: str | None = None  # the Retry-After header of an error reply (429: "0")


def _count_words(value: Any) -> int:
    """Rough token count: number of words in every string inside ``value``."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_count_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_words(v) for v in value)
    return 0


def _count_prompt(messages: Any) -> int:
    """Rough prompt token count: words in each message's content and tool-call arguments."""
    if not isinstance(messages, list):
        return _count_words(messages)
    total = 0
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, list):  # content parts: count only their text
            content = [part.get("text", "") for part in content if isinstance(part, dict)]
        total += _count_words(content)
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict):
                total += _count_words((call.get("function") or {}).get("arguments", ""))
    return total


def _split_text(text: str) -> list[str]:
    """Split text into word-sized pieces whose concatenation is exactly ``text``."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]


def _split_args(arguments: str, parts: int = 3) -> list[str]:
    """Split a JSON arguments string into several fragments (at least one)."""
    if not arguments:
        return []
    size = max(1, math.ceil(len(arguments) / parts))
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Deterministic hashed bag-of-words vector, L2-normalised (shared words → similar)."""
    words = re.findall(r"\w+", text.lower()) or [""]
    vec = [0.0] * dim
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[index] += sign
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:  # words cancelled out: fall back to a fixed unit vector
        vec = [0.0] * dim
        vec[0] = 1.0
        return vec
    return [x / norm for x in vec]


class ModelServer:
    """Threaded OpenAI-compatible HTTP server on 127.0.0.1 with a queue of scripted replies."""

    def __init__(self, responder: Callable[[dict], Reply] | None = None) -> None:
        self.responder: Callable[[dict], Reply] | None = responder
        # Called with the texts of each embedding request before it is answered (a test can
        # hold the request there, e.g. to stop a process in the middle of it).
        self.on_embed: Callable[[list[str]], None] | None = None
        self.requests: list[dict] = []  # JSON bodies of POSTs (chat + embeddings), in order
        self.headers: list[dict[str, str]] = []  # lower-cased headers of every HTTP request
        self.paths: list[str] = []  # "METHOD /path" of every HTTP request, in order
        self._chat: list[dict] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        host, port = self._httpd.server_address[:2]
        self.host: str = str(host)
        self.port: int = int(port)
        self.url: str = f"http://{self.host}:{self.port}/v1"
        self._httpd.timeout = 1  # `handle_request` after a wake-up that was no connection
        self._wake, self._waker = socket.socketpair()
        self._thread = threading.Thread(
            target=self._serve, name=f"model-server-{self.port}", daemon=True
        )
        self._thread.start()

    # -- scripting -------------------------------------------------------------------------

    def enqueue(self, *replies: Reply | str) -> None:
        """Queue replies for the next chat requests; a ``str`` means ``Reply(text=...)``."""
        with self._lock:
            for reply in replies:
                self._queue.append(Reply(text=reply) if isinstance(reply, str) else reply)

    @property
    def pending(self) -> int:
        """Number of queued replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    def chat_requests(self) -> list[dict]:
        """Bodies of the ``/chat/completions`` requests received, in order."""
        with self._lock:
            return list(self._chat)

    def last_messages(self) -> list[dict]:
        """``messages`` of the most recent chat request (empty list if none)."""
        chats = self.chat_requests()
        return list(chats[-1].get("messages", [])) if chats else []

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop serving; sleeping handlers wake up and drop their replies."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._waker.send(b"\0")
        self._thread.join(timeout=2)
        self._httpd.server_close()
        self._wake.close()
        self._waker.close()

    def _serve(self) -> None:
        """Accept connections until `close`, waiting on the listening socket and on a wake-up
        socket: `close` ends the wait at once. (`serve_forever` looks for a shutdown once per
        poll interval: with 20 ms, 50 wake-ups a second and up to 20 ms more of each test's
        wall time, in the hundreds of tests that start a server.)"""
        with selectors.DefaultSelector() as selector:
            selector.register(self._httpd, selectors.EVENT_READ)
            selector.register(self._wake, selectors.EVENT_READ)
            while not self._closed.is_set():
                if any(key.fileobj is self._httpd for key, _ in selector.select()):
                    self._httpd.handle_request()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals used by the handler -----------------------------------------------------

    def _record(self, method: str, path: str, headers: dict[str, str], body: dict | None) -> None:
        with self._lock:
            self.paths.append(f"{method} {path}")
            self.headers.append(headers)
            if body is not None:
                self.requests.append(body)
                if path.rstrip("/").endswith("/chat/completions"):
                    self._chat.append(body)

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        responder = self.responder
        reply = responder(body) if responder is not None else Reply(text="ok")
        return Reply(text=reply) if isinstance(reply, str) else reply

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server closes first; return True if still open."""
        if seconds > 0:
            return not self._closed.wait(seconds)
        return not self._closed.is_set()


def _make_handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    """Build a request-handler class bound to ``server``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "SeelenModelServer/1.0"
        timeout = 30  # idle keep-alive connections end eventually
        # Send each streamed chunk at once, as real model servers do: with Nagle's algorithm
        # a chunk waited for the client's delayed ACK, 40 ms per answer on a reused connection.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            """Silence default request logging."""

        # -- plumbing ----------------------------------------------------------------------

        def _headers_dict(self) -> dict[str, str]:
            return {k.lower(): v for k, v in self.headers.items()}

        def _read_body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _send_json(self, status: int, payload: Any, retry_after: str | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if retry_after is None and status == 429:
                retry_after = "0"
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _send_error(
            self, status: int, message: str | None = None, retry_after: str | None = None
        ) -> None:
            err_type, default = _ERROR_TYPES.get(status, ("api_error", f"HTTP {status}"))
            self._send_json(
                status,
                {
                    "error": {
                        "message": message or default,
                        "type": err_type,
                        "param": None,
                        "code": None,
                    }
                },
                retry_after,
            )

        def _dispatch(self, method: str) -> None:
            try:
                body_bytes = self._read_body() if method == "POST" else b""
                path = self.path.split("?", 1)[0]
                body: dict | None = None
                bad_json = False
                if method == "POST":
                    try:
                        parsed = json.loads(body_bytes or b"{}")
                        body = parsed if isinstance(parsed, dict) else {"_body": parsed}
                    except ValueError:
                        bad_json = True
                server._record(method, path, self._headers_dict(), body)
                if bad_json:
                    self._send_error(400, "Request body is not valid JSON")
                    return
                route = path.rstrip("/")
                if method == "POST" and route == "/v1/chat/completions":
                    self._chat_completions(body or {})
                elif method == "POST" and route == "/v1/embeddings":
                    self._embeddings(body or {})
                elif method == "GET" and route == "/v1/models":
                    self._send_json(200, {"object": "list", "data": [_model_card()]})
                elif method == "GET" and route == f"/v1/models/{MODEL_ID}":
                    self._send_json(200, _model_card())
                else:
                    self._send_error(404, f"Unknown endpoint: {method} {path}")
            except _DISCONNECT:
                self.close_connection = True

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_DELETE(self) -> None:
            self._dispatch("DELETE")

        # -- endpoints ---------------------------------------------------------------------

        def _chat_completions(self, body: dict) -> None:
            reply = server._next_reply(body)
            if not server._sleep(reply.delay):
                self.close_connection = True
                return
            if reply.status != 200:
                self._send_error(reply.status, reply.text or None, reply.retry_after)
                return
            if reply.raw_body is not None:
                data = reply.raw_body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                return
            n = server._next_id()
            model = str(body.get("model") or MODEL_ID)
            calls = [
                {
                    "id": str(c.get("id") or f"call_{n}_{i}"),
                    "type": "function",
                    "function": {
                        "name": str(c["name"]),
                        "arguments": c.get("arguments", {})
                        if isinstance(c.get("arguments", {}), str)
                        else json.dumps(c.get("arguments", {})),
                    },
                }
                for i, c in enumerate(reply.tool_calls)
            ]
            finish = reply.finish_reason or ("tool_calls" if calls else "stop")
            prompt = (
                reply.prompt_tokens
                if reply.prompt_tokens is not None
                else _count_prompt(body.get("messages", []))
            )
            completion = (
                reply.completion_tokens
                if reply.completion_tokens is not None
                else _count_words(reply.text)
                + sum(_count_words(c["function"]["arguments"]) + 1 for c in calls)
            )
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            base = {
                "id": f"chatcmpl-test{n}",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_test",
            }
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._stream(base, reply, calls, finish, usage if include_usage else None)
                return
            message: dict[str, Any] = {
                "role": "assistant",
                "content": reply.text if (reply.text or not calls) else None,
                "refusal": None,
            }
            if calls:
                message["tool_calls"] = calls
            if reply.reasoning:
                message["reasoning_content"] = reply.reasoning
            self._send_json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                    ],
                    "usage": usage,
                },
            )

        def _stream(
            self,
            base: dict,
            reply: Reply,
            calls: list[dict],
            finish: str,
            usage: dict | None,
        ) -> None:
            """Send an SSE stream of ``chat.completion.chunk`` objects (chunked encoding)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(delta: dict, finish_reason: str | None = None) -> dict:
                out = {
                    **base,
                    "object": "chat.completion.chunk",
                    "choices": [
                        {
                            "index": 0,
                            "delta": delta,
                            "logprobs": None,
                            "finish_reason": finish_reason,
                        }
                    ],
                }
                if usage is not None:
                    out["usage"] = None
                return out

            events: list[dict | str] = [
                chunk({"role": "assistant", "content": "" if reply.text or not calls else None})
            ]
            events += [
                chunk({"reasoning_content": piece}) for piece in _split_text(reply.reasoning)
            ]
            events += [chunk({"content": piece}) for piece in _split_text(reply.text)]
            for index, call in enumerate(calls):
                fn = call["function"]
                first = {
                    "index": index,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": fn["name"], "arguments": ""},
                }
                events.append(chunk({"tool_calls": [first]}))
                events += [
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": frag}}]})
                    for frag in _split_args(fn["arguments"])
                ]
            events.append(chunk({}, finish))
            if usage is not None:
                events.append(
                    {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                )
            events.append("[DONE]")
            if reply.cut_after is not None:  # the role chunk, then cut_after text pieces
                events = events[: 1 + reply.cut_after]

            for i, event in enumerate(events):
                if i and not server._sleep(reply.chunk_delay):
                    self.close_connection = True
                    return
                data = event if isinstance(event, str) else json.dumps(event)
                self._write_chunk(f"data: {data}\n\n".encode())
            if reply.cut_after is not None and reply.cut == "drop":
                self.close_connection = True
                self.connection.shutdown(2)  # mid-body: no terminating chunk
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _embeddings(self, body: dict) -> None:
            raw = body.get("input", "")
            if isinstance(raw, str):
                inputs: list[Any] = [raw]
            elif isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
                inputs = [raw]  # a single token array
            elif isinstance(raw, list):
                inputs = raw
            else:
                self._send_error(400, "'input' must be a string or a list")
                return
            texts = [
                x
                if isinstance(x, str)
                else " ".join(f"tok{t}" for t in x)
                if isinstance(x, list)
                else str(x)
                for x in inputs
            ]
            if server.on_embed is not None:
                server.on_embed(texts)
            dim = int(body.get("dimensions") or EMBEDDING_DIM)
            as_base64 = body.get("encoding_format") == "base64"
            data = []
            for i, text in enumerate(texts):
                vec = embed_text(text, dim)
                encoded: Any = (
                    base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode() if as_base64 else vec
                )
                data.append({"object": "embedding", "index": i, "embedding": encoded})
            tokens = sum(max(1, _count_words(t)) for t in texts)
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": str(body.get("model") or MODEL_ID),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

    return Handler


def _model_card() -> dict:
    return {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "seelen-tests"}
