"""MCP servers start lazily: their tool lists are cached on disk, keyed by their config."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

import pytest
from helpers import call_tool, child_pids, wait_until_async
from model_server import ModelServer, Reply
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from seelen.app import build_app
from seelen.chat.repl import Repl
from seelen.cli.answer import AnswerPrinter
from seelen.cli.oneshot import answer_once
from seelen.config import load_settings
from seelen.protocol.events import ToolFinished
from seelen.runtime import open_writer
from seelen.tools.base import ToolRegistry
from seelen.tools.mcp import McpManager

SERVERS = Path(__file__).resolve().parent / "servers"
PATIENT = 30.0  # real subprocesses start slowly on a busy machine


def tiny(marker: Path, **env: str) -> dict:
    """The tiny stdio server, noting each start in `marker`."""
    return {
        "command": "python",
        "args": [str(SERVERS / "tiny_server.py")],
        "env": {"TINY_MARKER": str(marker), **env},
    }


def starts(marker: Path) -> int:
    return len(marker.read_text().split()) if marker.exists() else 0


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """MCP on, with ./mcp_servers.json configuring the tiny server; the file of its starts."""
    monkeypatch.setenv("ENABLE_MCP", "true")
    marker = tmp_path / "starts"
    (tmp_path / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"tiny": tiny(marker)}}))
    return marker


async def run_once(config: dict, cache: Path, *, wait: bool = True) -> McpManager:
    manager = McpManager(config, ToolRegistry(), cache_file=cache, init_timeout=PATIENT)
    manager.start()
    if wait:
        assert await manager.wait_ready(PATIENT)
    return manager


async def test_a_cached_server_is_offered_at_once_and_started_by_its_first_call(
    tmp_path: Path,
) -> None:
    marker, cache = tmp_path / "starts", tmp_path / "profile" / "mcp_tools.json"
    config = {"mcpServers": {"tiny": tiny(marker)}}
    first = await run_once(config, cache)  # no cache yet: connects, as before
    assert starts(marker) == 1 and first.status()[0].state == "ready"
    await first.aclose()
    assert oct(cache.stat().st_mode & 0o777) == "0o600"
    assert "tiny_server" not in cache.read_text()  # only a digest of the config is kept

    second = await run_once(config, cache)
    offered = sorted(second.registry.names())
    assert offered == ["tiny_crash", "tiny_echo", "tiny_picture", "tiny_slow"]
    assert second.status()[0].line() == "tiny: not started (4 tools known; it starts on first use)"
    # Whatever start() set going has finished (a connection would be waited for here), and
    # the server was not started by it.
    assert await second.wait_ready(PATIENT)
    assert starts(marker) == 1 and second.status()[0].state == "idle"
    outcome = await call_tool(second.registry, "tiny_echo", {"text": "hello"})
    assert (outcome.ok, outcome.content) == (True, "hello")
    assert starts(marker) == 2 and second.status()[0].state == "ready"
    await second.aclose()


async def test_a_config_change_invalidates_the_cached_list(tmp_path: Path) -> None:
    marker, cache = tmp_path / "starts", tmp_path / "mcp_tools.json"
    await (await run_once({"mcpServers": {"tiny": tiny(marker)}}, cache)).aclose()
    changed = {"mcpServers": {"tiny": tiny(marker, MODE="other")}}
    manager = await run_once(changed, cache, wait=False)
    assert manager.status()[0].state == "connecting"  # not offered from the stale entry
    assert await manager.wait_ready(PATIENT)
    assert starts(marker) == 2 and "tiny_echo" in manager.registry.names()
    await manager.aclose()
    again = await run_once(changed, cache)  # the new config's list is now the cached one
    assert again.status()[0].state == "idle" and starts(marker) == 2
    await again.aclose()


async def test_disabled_tools_stay_hidden_when_offered_from_the_cache(tmp_path: Path) -> None:
    marker, cache = tmp_path / "starts", tmp_path / "mcp_tools.json"
    config = {"mcpServers": {"tiny": tiny(marker)}}
    await (await run_once(config, cache)).aclose()
    registry = ToolRegistry(disabled=["tiny_c*", "tiny_slow"])
    manager = McpManager(config, registry, cache_file=cache)
    manager.start()
    assert sorted(registry.names()) == ["tiny_echo", "tiny_picture"]
    assert manager.status()[0].tools == 2
    await manager.aclose()


async def test_a_live_connection_refreshes_a_stale_list(tmp_path: Path) -> None:
    marker, cache = tmp_path / "starts", tmp_path / "mcp_tools.json"
    config = {"mcpServers": {"tiny": tiny(marker)}}
    await (await run_once(config, cache)).aclose()
    data = json.loads(cache.read_text())
    offer = data["servers"]["tiny"]["offer"]
    offer["tools"] = [t for t in offer["tools"] if t["name"] == "echo"]  # as an older server
    cache.write_text(json.dumps(data))
    manager = await run_once(config, cache)
    assert sorted(manager.registry.names()) == ["tiny_echo"]
    assert (await call_tool(manager.registry, "tiny_echo", {"text": "x"})).ok
    assert "tiny_picture" in manager.registry.names()  # the live list replaced the stale one
    names = [t["name"] for t in json.loads(cache.read_text())["servers"]["tiny"]["offer"]["tools"]]
    assert sorted(names) == ["crash", "echo", "picture", "slow"]
    await manager.aclose()


async def test_a_cached_server_that_fails_to_start_fails_the_call_in_one_line(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "mcp_tools.json"
    script = tmp_path / "server.py"
    script.write_text((SERVERS / "tiny_server.py").read_text())
    config = {"mcpServers": {"gone": {"command": "python", "args": [str(script)]}}}
    await (await run_once(config, cache)).aclose()
    script.write_text("raise SystemExit('the server is broken now')\n")
    events: list[str] = []
    manager = McpManager(config, ToolRegistry(), cache_file=cache, on_event=events.append)
    manager.start()
    outcome = await call_tool(manager.registry, "gone_echo", {"text": "x"})
    assert not outcome.ok and "MCP server 'gone'" in outcome.content
    assert "the server is broken now" in outcome.content
    assert "gone_echo" not in manager.registry.names() and len(events) == 1
    await manager.aclose()


async def test_mcp_server_time_is_offered_from_the_cache_without_a_process(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "mcp_tools.json"
    args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    config = {"mcpServers": {"time": {"command": sys.executable, "args": args}}}
    await (await run_once(config, cache)).aclose()
    before = child_pids()
    manager = await run_once(config, cache)
    assert "time_get_current_time" in manager.registry.names()
    assert child_pids() == before  # no server process was started
    outcome = await call_tool(manager.registry, "time_get_current_time", {"timezone": "Asia/Tokyo"})
    assert outcome.ok and "Asia/Tokyo" in outcome.content
    assert len(child_pids() - before) == 1
    await manager.aclose()


async def test_an_ask_in_this_process_waits_for_no_cached_server(
    env: ModelServer, marker: Path
) -> None:
    for question in ("first", "second"):
        env.enqueue(f"answer to {question}")
        app = await open_writer(load_settings(), role="ask")  # as `seelen ask` opens it
        printer = AnswerPrinter(as_json=True, ephemeral=False)
        assert await answer_once(app, question, printer, ephemeral=False) == 0
        await app.aclose()
    assert starts(marker) == 1  # the first ask connected once, to learn the tools
    offered = {t["function"]["name"] for t in env.chat_requests()[-1]["tools"]}
    assert "tiny_echo" in offered
    env.enqueue(Reply(tool_calls=[{"name": "tiny_echo", "arguments": {"text": "hi"}}]), "Done.")
    app = build_app(load_settings())
    await app.open_session()
    app.start_mcp(lambda _: None)
    events = [e async for e in app.bot.turn("echo hi")]
    await app.aclose()
    outcome = next(e for e in events if isinstance(e, ToolFinished))
    assert outcome.ok and outcome.content == "hi" and starts(marker) == 2


async def test_the_interactive_chat_starts_cached_servers_while_the_user_types(
    env: ModelServer, marker: Path
) -> None:
    states = []
    for _ in range(2):  # learn the tools; then a piped chat, which starts nothing
        app = build_app(load_settings())
        Repl(app, Console(file=io.StringIO())).start_mcp()
        states.append(app.mcp.status()[0].state)
        assert await app.mcp.wait_ready(PATIENT)
        await app.aclose()
    assert states == ["connecting", "idle"] and starts(marker) == 1
    # The chat in a terminal, through its real entry point: the cached server starts in the
    # background while the user has typed nothing.
    with create_pipe_input() as pipe:
        console = Console(file=io.StringIO(), width=100)
        repl = Repl(None, console, settings=load_settings(), pt_input=pipe, pt_output=DummyOutput())
        chat = asyncio.create_task(repl.run_terminal())
        await wait_until_async(lambda: starts(marker) == 2, PATIENT, "no server started")
        pipe.send_text("/exit\r")
        await asyncio.wait_for(chat, PATIENT)
    assert starts(marker) == 2 and env.chat_requests() == []
