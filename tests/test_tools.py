"""The tool registry, local tool declarations and the built-in tools."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any, ClassVar, Literal

import pytest

from seelen.errors import ToolError
from seelen.tools.base import ToolCall, ToolOutcome, ToolRegistry, ToolSpec
from seelen.tools.local import builtin_tools, current_time_tool, memory_search_tool, tool


@tool
async def echo(text: str) -> str:
    """Say the text back."""
    return text


@tool
async def nap(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@tool
def explode() -> str:
    """Always fails."""
    raise ValueError("boom")


class FakeRemote:
    """A tool that claims to come from an MCP server, for the registry's routing rules."""

    def __init__(self, origin: str, server: str, *, fail: bool = False) -> None:
        self.spec = ToolSpec(f"{server}_{origin}", f"{origin} remote", {}, f"mcp:{server}", origin)
        self.fail = fail
        self.calls = 0

    async def call(self, arguments: dict[str, Any]) -> str:
        self.calls += 1
        if self.fail:
            raise ToolError("server said no")
        return f"remote {arguments}"


def registry(*tools: Any, **kwargs: Any) -> ToolRegistry:
    reg = ToolRegistry(**kwargs)
    for item in tools:
        reg.add(item)
    return reg


# ---------------------------------------------------------------- declarations


def test_schema_comes_from_the_signature() -> None:
    @tool
    def find(
        query: Annotated[str, "what to find"],
        tags: list[str],
        limit: int = 5,
        exact: bool = False,
        ratio: float | None = None,
        mode: Literal["fast", "deep"] = "fast",
    ) -> str:
        """Find things.

        More detail for the model."""
        return ""

    assert find.spec.name == "find"
    assert find.spec.source == "local"
    assert find.spec.description == "Find things.\n\nMore detail for the model."
    params = find.spec.parameters
    assert params["type"] == "object"
    assert params["required"] == ["query", "tags"]
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "what to find"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["limit"] == {"type": "integer", "default": 5}
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["ratio"] == {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None}
    assert props["mode"] == {"type": "string", "enum": ["fast", "deep"], "default": "fast"}
    assert "title" not in json.dumps(params)


async def test_any_parameter_name_works_even_pydantic_reserved_ones() -> None:
    @tool
    def describe(schema: str, title: str = "none", model_config: int = 0) -> str:
        """Echo the arguments."""
        return f"{schema}/{title}/{model_config}"

    assert set(describe.spec.parameters["properties"]) == {"schema", "title", "model_config"}
    assert await describe.call({"schema": "s", "title": "t", "model_config": "3"}) == "s/t/3"


class Opaque:
    """A type pydantic cannot describe as JSON."""


def test_declaration_errors_are_caught_early() -> None:
    with pytest.raises(TypeError, match="docstring"):
        tool(lambda: "")
    with pytest.raises(TypeError, match="type hint"):

        @tool
        def untyped(x) -> str:  # type: ignore[no-untyped-def]
            """Doc."""
            return ""

    with pytest.raises(TypeError, match="not supported"):

        @tool
        def weird(x: Opaque) -> str:
            """Doc."""
            return ""


def test_name_and_description_can_be_given() -> None:
    @tool(name="shout", description="Shout it.")
    def loud(text: str) -> str:
        return text.upper()

    assert (loud.spec.name, loud.spec.description) == ("shout", "Shout it.")


async def test_sync_tools_run_in_a_worker_thread_and_arguments_are_coerced() -> None:
    seen: list[str] = []

    @tool
    def repeat(text: str, times: int, loud: bool = False) -> list[str]:
        """Repeat a text."""
        seen.append(threading.current_thread().name)
        return [text.upper() if loud else text] * times

    assert await repeat.call({"text": "a", "times": "2", "loud": "true"}) == '["A", "A"]'
    assert seen and seen[0] != threading.current_thread().name


async def test_bad_arguments_raise_clear_tool_errors() -> None:
    with pytest.raises(ToolError, match="missing required argument 'text'"):
        await echo.call({})
    with pytest.raises(ToolError, match=r"unexpected argument 'txt'; .*expected: text"):
        await echo.call({"txt": "x"})
    with pytest.raises(ToolError, match="argument 'seconds': Input should be a valid number"):
        await nap.call({"seconds": "soon"})
    with pytest.raises(ToolError, match=r"argument 'text': .* got 5"):
        await echo.call({"text": 5})


async def test_every_bad_argument_is_named_in_one_line() -> None:
    @tool
    def pick(mode: Literal["fast", "deep"], tags: list[int]) -> str:
        """Pick."""
        return mode

    with pytest.raises(ToolError) as caught:
        await pick.call({"mode": "slow", "tags": [1, "x"]})
    message = str(caught.value)
    assert "argument 'mode': Input should be 'fast' or 'deep', got \"slow\"" in message
    assert "argument 'tags.1'" in message and "\n" not in message


# ---------------------------------------------------------------- the registry


async def test_two_calls_one_failing_give_both_outcomes_in_call_order() -> None:
    reg = registry(echo, explode, nap)
    done: list[ToolOutcome] = []
    calls = [
        ToolCall("a", "nap", '{"seconds": 0.05}'),
        ToolCall("b", "explode", "{}"),
        ToolCall("c", "echo", '{"text": "hi"}'),
    ]
    outcomes = await reg.run_all(calls, on_done=done.append)
    assert [o.call_id for o in outcomes] == ["a", "b", "c"]
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].content == "error: tool 'explode' failed: ValueError: boom"
    assert outcomes[2].content == "hi" and outcomes[2].source == "local"
    assert done[-1].call_id == "a"  # on_done sees outcomes as they finish


async def test_calls_run_concurrently() -> None:
    together = asyncio.Barrier(5)

    @tool
    async def meet() -> str:
        """Return once all five calls are running."""
        await together.wait()  # one call at a time would wait here for ever
        return "met"

    reg = registry(meet, timeout=10)
    outcomes = await reg.run_all([ToolCall(str(i), "meet", "{}") for i in range(5)])
    assert [o.content for o in outcomes] == ["met"] * 5


async def test_a_slow_tool_times_out_into_an_error_outcome() -> None:
    reg = registry(nap, echo, timeout=0.1)
    slow, fast = await reg.run_all(
        [ToolCall("1", "nap", '{"seconds": 5}'), ToolCall("2", "echo", '{"text": "ok"}')]
    )
    assert not slow.ok
    assert slow.content == "error: tool 'nap' timed out after 0.1 s"
    assert slow.seconds < 1
    assert fast.ok and fast.content == "ok"


async def test_a_tool_may_ask_for_more_time() -> None:
    patient = tool(timeout=0.5)(nap.fn)
    outcome = (
        await registry(patient, timeout=0.05).run_all([ToolCall("1", "nap", '{"seconds": 0.2}')])
    )[0]
    assert outcome.ok


async def test_long_results_are_cut_with_a_visible_marker() -> None:
    reg = registry(echo, result_chars=100)
    outcome = (await reg.run_all([ToolCall("1", "echo", json.dumps({"text": "x" * 12_445}))]))[0]
    assert outcome.content == "x" * 100 + "\n… [cut: 12,345 more characters]"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"text": ', "error: arguments are not valid JSON"),
        ('["hi"]', "error: arguments must be a JSON object, got list"),
    ],
)
async def test_malformed_arguments_become_error_outcomes(arguments: str, message: str) -> None:
    outcome = (await registry(echo).run_all([ToolCall("1", "echo", arguments)]))[0]
    assert not outcome.ok and outcome.content.startswith(message)


async def test_empty_arguments_mean_none() -> None:
    outcome = (await registry(explode).run_all([ToolCall("1", "explode", "")]))[0]
    assert "boom" in outcome.content  # it ran


async def test_unknown_tool_names_the_available_ones() -> None:
    outcome = (await registry(echo, nap).run_all([ToolCall("1", "ecko", "{}")]))[0]
    assert not outcome.ok
    assert outcome.content == "error: unknown tool 'ecko' (available: echo, nap)"
    assert outcome.source == ""


def test_openai_tools_shape_and_registry_bookkeeping() -> None:
    reg = registry(echo, FakeRemote("ping", "net"))
    assert reg.openai_tools()[0] == {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Say the text back.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
    with pytest.raises(ToolError, match="already registered"):
        reg.add(echo)
    reg.remove_source("mcp:net")
    assert [s.name for s in reg.tools()] == ["echo"]


def test_tool_order_does_not_depend_on_connection_order() -> None:
    first = registry(FakeRemote("b", "zeta"), echo, FakeRemote("a", "alpha"))
    second = registry(FakeRemote("a", "alpha"), FakeRemote("b", "zeta"), echo)
    assert [s.name for s in first.tools()] == ["echo", "alpha_a", "zeta_b"]
    assert first.openai_tools() == second.openai_tools()


async def test_mcp_tool_with_a_local_tools_name_is_tried_first_then_the_local_one() -> None:
    remote = FakeRemote("echo", "srv")
    reg = registry(echo, remote)
    # the model sees the shared name once, with the local tool's contract
    assert [t["function"]["name"] for t in reg.openai_tools()] == ["echo"]
    assert [s.source for s in reg.route("echo")] == ["mcp:srv", "local"]
    outcome = (await reg.run_all([ToolCall("1", "echo", '{"text": "hi"}')]))[0]
    assert (outcome.content, outcome.source) == ("remote {'text': 'hi'}", "mcp:srv")

    remote.fail = True
    outcome = (await reg.run_all([ToolCall("2", "echo", '{"text": "hi"}')]))[0]
    assert (outcome.ok, outcome.content, outcome.source) == (True, "hi", "local")
    assert remote.calls == 2

    reg.remove_source("mcp:srv")  # the server dropped: the local tool simply answers
    assert [s.source for s in reg.route("echo")] == ["local"]


async def test_when_both_fail_the_model_sees_both_reasons() -> None:
    reg = registry(explode, FakeRemote("explode", "srv", fail=True))
    outcome = (await reg.run_all([ToolCall("1", "explode", "{}")]))[0]
    assert not outcome.ok
    assert outcome.content == (
        "error: mcp:srv: server said no; then local: tool 'explode' failed: ValueError: boom"
    )


async def test_cancelling_run_all_cancels_the_calls() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def linger() -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    task = asyncio.create_task(registry(linger).run_all([ToolCall("1", "linger", "{}")]))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


# ---------------------------------------------------------------- built-in tools


async def test_current_time_uses_the_configured_zone_or_the_given_one() -> None:
    clock = current_time_tool("Asia/Tokyo")
    assert "UTC+0900, Asia/Tokyo" in await clock.call({})
    assert "UTC+0000, UTC" in await clock.call({"timezone": "UTC"})
    reg = registry(clock)
    outcome = (await reg.run_all([ToolCall("1", "current_time", '{"timezone": "Mars/Base"}')]))[0]
    assert not outcome.ok
    assert (
        outcome.content
        == "error: unknown timezone 'Mars/Base' (use an IANA name like Europe/Berlin)"
    )


async def test_memory_search_accepts_sync_and_async_search_functions() -> None:
    def sync_search(query: str, limit: int) -> str:
        return f"sync {query} {limit}"

    async def async_search(query: str, limit: int) -> str:
        return f"async {query} {limit}"

    assert await memory_search_tool(sync_search).call({"query": "cats"}) == "sync cats 5"
    assert (
        await memory_search_tool(async_search).call({"query": "dogs", "limit": 99})
        == "async dogs 20"
    )


def test_builtin_tools_are_registered_only_when_configured() -> None:
    names = [t.spec.name for t in builtin_tools(timezone="UTC")]
    assert names == ["current_time"]
    names = [
        t.spec.name
        for t in builtin_tools(timezone="", jina_api_key="k", memory_search=lambda q, n: "")
    ]
    assert names == ["current_time", "web_search", "memory_search"]


class DeepSearchHandler(BaseHTTPRequestHandler):
    """Answers like Jina DeepSearch's chat endpoint; remembers the last request."""

    requests: ClassVar[list[tuple[dict[str, str], dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((dict(self.headers), body))
        if self.headers.get("Authorization") != "Bearer jina-key":
            self._send(401, {"detail": "invalid key"})
            return
        message = {
            "role": "assistant",
            "content": f"Answer to: {body['messages'][-1]['content']}",
            "annotations": [
                {"type": "url_citation", "url_citation": {"url": "https://example.org/a"}},
                {"type": "url_citation", "url_citation": {"url": "https://example.org/a"}},
            ],
        }
        self._send(
            200, {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


@pytest.fixture
def deepsearch_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), DeepSearchHandler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


async def test_web_search_asks_deepsearch_and_lists_sources(deepsearch_url: str) -> None:
    tools = builtin_tools(timezone="UTC", jina_api_key="jina-key", jina_url=deepsearch_url)
    reg = registry(*tools)
    outcome = (
        await reg.run_all([ToolCall("1", "web_search", '{"query": "why is the sky blue"}')])
    )[0]
    assert outcome.ok
    assert outcome.content == "Answer to: why is the sky blue\n\nSources:\n- https://example.org/a"
    _, body = DeepSearchHandler.requests[-1]
    assert body["model"] == "jina-deepsearch-v1"
    assert body["stream"] is False
    assert body["messages"] == [{"role": "user", "content": "why is the sky blue"}]


async def test_web_search_reports_http_errors(deepsearch_url: str) -> None:
    reg = registry(*builtin_tools(timezone="UTC", jina_api_key="bad", jina_url=deepsearch_url))
    outcome = (await reg.run_all([ToolCall("1", "web_search", '{"query": "x"}')]))[0]
    assert not outcome.ok
    assert outcome.content.startswith("error: web search: HTTP 401")
