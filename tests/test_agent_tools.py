"""The tool-calling loop end to end: model server ⇄ ChatBot ⇄ local tools and MCP servers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fastmcp import FastMCP
from model_server import ModelServer, Reply
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from seelen.app import App, build_app
from seelen.chat.repl import Repl
from seelen.config import load_settings
from seelen.errors import ConfigError
from seelen.protocol.events import Done, ToolFinished, ToolStarted
from seelen.tools.mcp import McpManager

# A stdio MCP server in plain Python (0.03 s of CPU to start; mcp_server_time, built on the
# MCP SDK, takes 1.1 s): what these tests show is Seelen's side of any stdio server.
# tests/test_mcp.py and tests/test_mcp_cache.py run the third-party mcp_server_time.
TINY = {
    "command": "python",
    "args": [str(Path(__file__).resolve().parent / "servers" / "tiny_server.py")],
}


async def open_app() -> App:
    app = build_app(load_settings())
    await app.open_session()
    return app


def call(name: str, args: dict, call_id: str) -> dict:
    return {"name": name, "arguments": args, "id": call_id}


async def test_two_calls_in_one_reply_one_failing(env: ModelServer) -> None:
    env.enqueue(
        Reply(
            tool_calls=[
                call("current_time", {"timezone": "Asia/Tokyo"}, "c1"),
                call("current_time", {"timezone": "Not/AZone"}, "c2"),
            ]
        ),
        "It is evening in Tokyo.",
    )
    app = await open_app()
    events = [e async for e in app.bot.turn("What time is it in Tokyo?")]
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = {e.call_id: e for e in events if isinstance(e, ToolFinished)}
    assert [s.name for s in started] == ["current_time", "current_time"]
    assert finished["c1"].ok and "JST" in finished["c1"].content
    assert not finished["c2"].ok and "unknown timezone" in finished["c2"].content
    assert isinstance(events[-1], Done) and events[-1].text == "It is evening in Tokyo."

    first, second = env.chat_requests()[-2:]
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"current_time", "memory_search"} <= offered
    sent = second["messages"]
    assistant = next(m for m in sent if m.get("tool_calls"))
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    results = [m for m in sent if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["c1", "c2"]
    assert "unknown timezone" in results[1]["content"]
    reply = app.sessions.live_turns()[-1]
    assert reply.meta["usage"]["tool_calls"] == 2
    await app.aclose()


async def test_tool_history_survives_a_restart(env: ModelServer) -> None:
    env.enqueue(Reply(tool_calls=[call("current_time", {}, "t1")]), "Done checking.")
    app = await open_app()
    [e async for e in app.bot.turn("check the clock")]
    await app.aclose()
    app2 = await open_app()
    env.enqueue("Hello again.")
    [e async for e in app2.bot.turn("hi")]
    sent = env.chat_requests()[-1]["messages"]
    roles = [m["role"] for m in sent]
    assert roles[1:] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] == "t1"
    await app2.aclose()


async def test_rounds_are_capped_and_then_the_model_must_answer(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_TOOL_ROUNDS", "2")
    looping = Reply(tool_calls=[call("current_time", {}, "again")])
    env.enqueue(looping, looping, "Fine, here is my answer.")
    app = await open_app()
    events = [e async for e in app.bot.turn("loop forever")]
    assert isinstance(events[-1], Done) and events[-1].text == "Fine, here is my answer."
    requests = env.chat_requests()
    assert "tools" in requests[0] and "tools" in requests[1]
    assert "tools" not in requests[2]
    await app.aclose()


async def test_memory_search_tool_reads_earlier_sessions(env: ModelServer) -> None:
    app = await open_app()
    old = app.store.create_session()
    app.store.add_turn(old.session_id, "user", "My locker code at the gym is 4711")
    app.store.mark_archived(old.session_id)
    app.index.index_all()
    env.enqueue(
        Reply(tool_calls=[call("memory_search", {"query": "gym locker code"}, "m1")]), "It is 4711."
    )
    events = [e async for e in app.bot.turn("what was my locker code?")]
    outcome = next(e for e in events if isinstance(e, ToolFinished))
    assert outcome.ok and "4711" in outcome.content and "user:" in outcome.content
    await app.aclose()


async def test_an_in_process_mcp_server_in_the_loop(env: ModelServer) -> None:
    server = FastMCP("calc")

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    app = await open_app()
    manager = McpManager({"mcpServers": {"calc": server}}, app.tools, init_timeout=30)
    manager.start()
    assert await manager.wait_ready(30)
    env.enqueue(Reply(tool_calls=[call("calc_add", {"a": 2, "b": 40}, "k1")]), "42 it is.")
    events = [e async for e in app.bot.turn("add 2 and 40")]
    outcome = next(e for e in events if isinstance(e, ToolFinished))
    assert outcome.ok and outcome.content.strip() == "42"
    assert env.chat_requests()[-1]["messages"][-1]["content"].strip() == "42"
    await manager.aclose()
    await app.aclose()


async def test_stdio_server_from_mcp_servers_json_and_tools_command(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENABLE_MCP", "true")
    config = {"mcpServers": {"tiny": TINY, "ghost": {"command": "no-such-mcp-command-anywhere"}}}
    (tmp_path / "mcp_servers.json").write_text(json.dumps(config))
    out = io.StringIO()
    with create_pipe_input() as pipe:
        app = build_app(load_settings())
        repl = Repl(app, Console(file=out, width=120), pt_input=pipe, pt_output=DummyOutput())
        await repl.start()
        repl.start_mcp()
        await app.mcp.wait_ready(60)
        env.enqueue(
            Reply(tool_calls=[call("tiny_echo", {"text": "It is noon in Europe/Berlin"}, "s1")]),
            "Done.",
        )
        await repl.handle("what time is it in Berlin?")
        await repl.handle("/tools")
        await app.aclose()
    text = out.getvalue()
    assert "MCP server 'ghost' failed" in text and "not found" in text
    assert "tiny_echo" in text and "mcp:tiny" in text
    assert "tiny: ready" in text
    tool_message = env.chat_requests()[-1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"] == "It is noon in Europe/Berlin"


async def test_tools_says_why_there_are_no_mcp_servers(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    for enabled in ("false", "true"):  # the test's folder holds no mcp_servers.json
        monkeypatch.setenv("ENABLE_MCP", enabled)
        app = build_app(load_settings())
        repl = Repl(app, Console(file=out, width=120))
        await repl.start()
        repl.start_mcp()
        await repl.handle("/tools")
        await app.aclose()
    lines = [line for line in out.getvalue().splitlines() if "MCP servers:" in line]
    assert lines == [
        "MCP servers: off (ENABLE_MCP=false)",
        "MCP servers: none: no mcp_servers.json in this folder (MCP_SERVERS_FILE names one)",
    ]


async def test_a_crash_between_a_tool_call_and_its_result_does_not_wedge_the_session(
    env: ModelServer,
) -> None:
    app = await open_app()
    app.sessions.add_turn("user", "what time is it?")
    calls = [{"id": "lost1", "name": "current_time", "arguments": "{}"}]
    app.sessions.add_turn("assistant", "", {"tool_calls": calls})  # then the process died
    await app.aclose()
    app2 = await open_app()
    env.enqueue("Sorry, let me answer now.")
    events = [e async for e in app2.bot.turn("hello?")]
    assert isinstance(events[-1], Done) and events[-1].text == "Sorry, let me answer now."
    sent = env.chat_requests()[-1]["messages"]
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["tool_call_id"] == "lost1" and "interrupted" in tool["content"]
    await app2.aclose()


async def test_a_missing_mcp_servers_file_is_reported_not_ignored(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENABLE_MCP", "true")
    app = build_app(load_settings())
    assert app.start_mcp(lambda _: None) is None  # nothing configured, no ./mcp_servers.json
    monkeypatch.setenv("MCP_SERVERS_FILE", str(tmp_path / "my_servers.json"))
    app2 = build_app(load_settings())
    with pytest.raises(ConfigError, match=r"^MCP_SERVERS_FILE: .*my_servers\.json does not exist"):
        app2.start_mcp(lambda _: None)
    await app.aclose()
    await app2.aclose()


async def test_disabled_tools_are_neither_offered_nor_callable(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISABLED_TOOLS", "current_*")
    env.enqueue(Reply(tool_calls=[call("current_time", {}, "x1")]), "No clock, sorry.")
    app = await open_app()
    events = [e async for e in app.bot.turn("what time is it?")]
    offered = [t["function"]["name"] for t in env.chat_requests()[0].get("tools", [])]
    assert "current_time" not in offered and "memory_search" in offered
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert not finished[0].ok and "unknown tool 'current_time'" in finished[0].content
    await app.aclose()


async def test_temperature_reaches_the_chat_request(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = await open_app()
    [e async for e in app.bot.turn("hi")]
    assert "temperature" not in env.chat_requests()[-1]  # unset: the endpoint's own default
    await app.aclose()
    monkeypatch.setenv("TEMPERATURE", "0.4")
    app = await open_app()
    [e async for e in app.bot.turn("hi again")]
    assert env.chat_requests()[-1]["temperature"] == 0.4
    await app.aclose()


async def test_doctor_checks_each_mcp_server(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seelen.cli.doctor import mcp_checks

    monkeypatch.setenv("ENABLE_MCP", "true")
    monkeypatch.setenv("MCP_INIT_TIMEOUT", "10")
    config = {
        "mcpServers": {
            "tiny": TINY,
            "ghost": {"command": "no-such-mcp-command-anywhere"},
        }
    }
    (tmp_path / "mcp_servers.json").write_text(json.dumps(config))
    app = build_app(load_settings())
    try:
        checks = {c.name: c for c in await mcp_checks(app)}
    finally:
        await app.aclose()
    assert checks["MCP server tiny"].detail.startswith("ready (")  # not "tiny: ready ("
    assert not checks["MCP server ghost"].ok
    assert checks["MCP server ghost"].detail == (
        "failed — command 'no-such-mcp-command-anywhere' not found"
    )
