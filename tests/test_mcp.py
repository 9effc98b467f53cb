"""MCP servers through McpManager, against real servers: in-process, stdio and HTTP."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError as ServerToolError
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from helpers import call_tool, child_pids, wait_until, wait_until_async

from seelen.errors import ConfigError
from seelen.tools.base import ToolRegistry
from seelen.tools.local import tool
from seelen.tools.mcp import (
    McpManager,
    RemoteServer,
    StdioServer,
    ToolProgressed,
    expand_vars,
    exposed_names,
    find_config,
    load_config,
    parse_server,
)

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(__file__).resolve().parent / "servers"
TOKEN = "s3cret-token"
# Real subprocesses start slowly on a busy machine; only the hanging server uses a short limit.
PATIENT = 30.0


def memory_server() -> FastMCP:
    """An in-process server with one tool per kind of result."""
    server = FastMCP("memory")

    @server.tool
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    @server.tool
    def refuse() -> str:
        """Always refuses."""
        raise ServerToolError("not today")

    @server.tool
    def picture() -> mcp_types.ImageContent:
        """A tiny picture."""
        data = base64.b64encode(b"\x89PNG" + b"0" * 296).decode()
        return mcp_types.ImageContent(type="image", data=data, mime_type="image/png")

    @server.tool
    def lookup(key: str) -> str:
        """Look a key up; only knows 'a'."""
        if key != "a":
            raise ServerToolError(f"no key {key!r}")
        return "remote a"

    return server


async def gone(pids: set[int], within: float = PATIENT) -> None:
    """Wait until none of `pids` is a live child of this process any more."""
    await wait_until_async(lambda: not pids & child_pids(), within, "a server process lives on")


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


# ---------------------------------------------------------------- config


def test_invalid_json_is_one_error_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp_servers.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n')
    with pytest.raises(ConfigError, match=r"mcp_servers\.json, line 3, column 26: invalid JSON"):
        load_config(path)


def test_a_missing_file_is_an_error_unless_it_is_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_config("") is None  # no MCP_SERVERS_FILE and no ./mcp_servers.json: no servers
    with pytest.raises(ConfigError, match=r"^MCP_SERVERS_FILE: .*absent\.json does not exist$"):
        find_config(str(tmp_path / "absent.json"))
    with pytest.raises(ConfigError, match="is not a file"):
        find_config(str(tmp_path))
    (tmp_path / "mcp_servers.json").write_text("{}")
    assert find_config("") == Path("mcp_servers.json")
    with pytest.raises(ConfigError, match=r"absent\.json: no such file"):
        load_config(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"mcpServers": {"a": {"command": "caf\xe9"}}}', r"not UTF-8 text \(byte 37\)"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_unreadable_json_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected"),
        ({"mcpServers": []}, "expected"),
        ({"servers": []}, "expected"),
        ({"mcpServers": {}, "servers": {}}, "has both 'mcpServers' and 'servers'"),
        ({"mcpServers": {}, "tools": {}}, "unknown key 'tools'"),
    ],
)
def test_the_file_shape_is_checked(tmp_path: Path, data: Any, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=f"mcp.json: {message}"):
        load_config(path)


def test_comment_keys_are_ignored() -> None:
    servers, _ = load_config({"_comment": "hi", "mcpServers": {"_note": {}, "a": {"url": "x"}}})
    assert list(servers) == ["a"]
    assert parse_server({"_comment": "x", "url": "http://h/mcp"}, {}) == RemoteServer(
        "http://h/mcp"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"command": "x", "argz": []},
            r"unknown field 'argz' \(allowed: command, args, env, envFile, cwd",
        ),
        ({"url": "http://h", "command": "x"}, "has both 'command' and 'url'"),
        ({"args": []}, "needs 'command'"),
        ({"command": "x", "args": "-v"}, "field 'args' must be a list of strings"),
        ({"command": "x", "env": {"A": 1}}, "field 'env' must be an object of strings"),
        ({"command": "x", "transport": "http"}, "has type \"stdio\", not 'http'"),
        ({"command": "x", "type": "sse"}, "has type \"stdio\", not 'sse'"),
        ({"url": "http://h", "type": "stdio"}, 'has type "http" or "sse", not "stdio"'),
        ({"url": "http://h", "type": "http", "transport": "sse"}, "'type' and 'transport'"),
        ({"url": "http://h", "auth": "a", "bearerToken": "b"}, "'auth' or 'bearerToken'"),
        ({"url": "ftp://h"}, "must start with http:// or https://"),
        ({"url": "http://h", "transport": "ws"}, 'must be one of "stdio", "http", "sse"'),
        ({"url": "http://h", "auth": 5}, "field 'auth' must be a string"),
        ("python", "expected an object"),
    ],
)
def test_bad_entries_give_one_line_errors(entry: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_server(entry, {})
    assert "\n" not in str(info.value)


def test_variables_are_expanded_in_every_string() -> None:
    env = {"TOKEN": "t0k", "EMPTY": "", "DIR": "/srv"}
    entry = {
        "url": "https://${HOST:-example.org}/mcp",
        "headers": {"X-Key": "${TOKEN}", "X-Empty": "${EMPTY:-fallback}"},
        "auth": "${TOKEN}",
    }
    assert parse_server(entry, env) == RemoteServer(
        "https://example.org/mcp", "http", {"X-Key": "t0k", "X-Empty": "fallback"}, "t0k"
    )
    stdio = parse_server(
        {"command": "run", "args": ["${DIR}/a", "$HOME"], "env": {"K": "${TOKEN}"}}, env
    )
    assert stdio == StdioServer("run", ("/srv/a", "$HOME"), {"K": "t0k"})
    assert expand_vars("${EMPTY}", env, "x") == ""
    with pytest.raises(
        ConfigError, match=r"environment variable NOPE is not set \(used in env.K\)"
    ):
        parse_server({"command": "run", "env": {"K": "${NOPE}"}}, env)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        # Claude Desktop
        (
            {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
            StdioServer("npx", ("-y", "srv"), {"K": "v"}),
        ),
        ({"url": "https://h/mcp"}, RemoteServer("https://h/mcp")),
        # the design's own: bearerToken and type
        ({"type": "stdio", "command": "run"}, StdioServer("run")),
        (
            {"type": "http", "url": "https://h/x", "bearerToken": "tk"},
            RemoteServer("https://h/x", "http", {}, "tk"),
        ),
        ({"type": "sse", "url": "https://h/events"}, RemoteServer("https://h/events", "sse")),
        # VS Code: type and headers; Windsurf: serverUrl; Cline: streamableHttp
        (
            {"type": "http", "url": "https://h/m", "headers": {"Authorization": "Bearer x"}},
            RemoteServer("https://h/m", "http", {"Authorization": "Bearer x"}),
        ),
        ({"serverUrl": "https://h/sse"}, RemoteServer("https://h/sse", "sse")),
        ({"type": "streamableHttp", "url": "https://h/m"}, RemoteServer("https://h/m")),
    ],
)
def test_entries_as_other_clients_write_them(entry: dict, expected: Any) -> None:
    assert parse_server(entry, {}) == expected


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
        {"command": "run", "cwd": "/"},
        {"type": "stdio", "command": "run"},
        {"url": "https://h/mcp", "headers": {"X-Key": "k"}, "auth": "tk"},
        {"url": "https://h/sse"},
        {"url": "https://h/events", "transport": "sse"},
        {"url": "https://h/sse", "transport": "streamable-http"},
    ],
)
def test_the_canonical_format_means_what_fastmcps_model_reads(entry: dict) -> None:
    """Seelen reads the MCP config format by hand (see seelen.tools.mcp_config); on what the
    canonical format says, it must agree with fastmcp's own model of it."""
    from fastmcp.mcp_config import CanonicalMCPConfig, infer_transport_type_from_url

    theirs = CanonicalMCPConfig.model_validate({"mcpServers": {"s": entry}}).mcpServers["s"]
    ours = parse_server(entry, {})
    if isinstance(ours, StdioServer):
        assert (ours.command, list(ours.args), ours.env, ours.cwd) == (
            theirs.command,
            theirs.args,
            theirs.env,
            theirs.cwd,
        )
    else:
        kind = theirs.transport or infer_transport_type_from_url(theirs.url)
        assert (ours.url, ours.transport, ours.headers, ours.auth or None) == (
            theirs.url,
            "http" if kind == "streamable-http" else kind,
            theirs.headers,
            theirs.auth,
        )


def test_a_vs_code_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    vscode = {
        "inputs": [{"type": "promptString", "id": "key", "password": True}],
        "servers": {"fs": {"type": "stdio", "command": "run", "args": ["."]}},
    }
    path.write_text(json.dumps(vscode))
    servers, base = load_config(path)
    assert parse_server(servers["fs"], {}, base) == StdioServer("run", (".",))


@needs_proc
async def test_a_vs_code_env_file_reaches_the_server(tmp_path: Path) -> None:
    (tmp_path / "server.env").write_text(f"TINY_MARKER={tmp_path / 'started'}\nMODE=file\n")
    entry = {
        "type": "stdio",
        "command": "python",
        "args": [str(SERVERS / "tiny_server.py")],
        "envFile": "server.env",
        "env": {"MODE": "entry"},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": {"tiny": entry}}))
    servers, base = load_config(path)
    assert parse_server(servers["tiny"], {}, base).env["MODE"] == "entry"  # env wins
    async with McpManager(path, ToolRegistry()) as manager:
        assert await manager.wait_ready(PATIENT)
    assert (tmp_path / "started").read_text().strip().isdigit()  # the server got the file's vars
    with pytest.raises(ConfigError, match=r"envFile .*nope\.env' is not a file"):
        parse_server({**entry, "envFile": "nope.env"}, {}, base)


def test_a_token_in_a_bad_url_is_not_shown() -> None:
    with pytest.raises(ConfigError) as info:
        parse_server({"url": "ws://h/mcp?token=hunter2hunter2"}, {})
    assert "hunter2" not in str(info.value)


def test_python_means_this_interpreter_and_cwd_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    path = tmp_path / "mcp_servers.json"
    path.write_text(json.dumps({"mcpServers": {"p": {"command": "python", "cwd": "srv"}}}))
    servers, base = load_config(path)
    parsed = parse_server(servers["p"], {}, base)
    assert parsed == StdioServer(sys.executable, (), {}, str(tmp_path / "srv"))
    assert parse_server({"url": "http://h/sse"}, {}).transport == "sse"


def test_the_shipped_example_config_starts_nothing_but_every_entry_parses() -> None:
    servers, base = load_config(ROOT / "mcp_servers.json")
    assert servers and all(e.get("disabled") is True for e in servers.values())
    environ = {"HOME": "/home/u", "GITHUB_TOKEN": "t"}
    parsed = {name: parse_server(entry, environ, base) for name, entry in servers.items()}
    assert parsed["time"].command == sys.executable
    assert parsed["github"] == RemoteServer("https://api.githubcopilot.com/mcp/", "http", {}, "t")


# ---------------------------------------------------------------- names


def test_exposed_names_are_prefixed_valid_and_unique() -> None:
    names = exposed_names(
        "my server", ["get.time", "get_time", "ok", "x" * 80], taken={"my_server_ok"}
    )
    assert names["get.time"] != names["get_time"]
    assert all(n.startswith("my_server_get_time_") for n in (names["get.time"], names["get_time"]))
    assert names["ok"].startswith("my_server_ok_") and names["ok"] != "my_server_ok"
    assert len(names["x" * 80]) == 64
    assert len(set(names.values())) == 4
    assert all(n.replace("_", "").replace("-", "").isalnum() for n in names.values())
    again = exposed_names(
        "my server", ["get.time", "get_time", "ok", "x" * 80], taken={"my_server_ok"}
    )
    assert names == again  # stable from run to run
    assert exposed_names("time", ["now"]) == {"now": "time_now"}


# ---------------------------------------------------------------- in-process server


async def test_in_process_server_tools_are_registered_and_called() -> None:
    registry = ToolRegistry()
    manager = McpManager({"mcpServers": {"mem": memory_server()}}, registry, init_timeout=PATIENT)
    manager.start()
    assert [s.state for s in manager.status()] == ["connecting"]  # start() waits for nothing
    assert await manager.wait_ready(PATIENT)
    try:
        assert [s.line() for s in manager.status()] == ["mem: ready (4 tools)"]
        assert {s.name for s in registry.tools()} == {
            "mem_echo",
            "mem_refuse",
            "mem_picture",
            "mem_lookup",
        }
        assert all(s.source == "mcp:mem" for s in registry.tools())
        echoed = await call_tool(registry, "mem_echo", {"text": "hi"})
        assert (echoed.ok, echoed.content, echoed.source) == (True, "hi", "mcp:mem")
        refused = await call_tool(registry, "mem_refuse")
        assert (refused.ok, refused.content) == (False, "error: not today")
        picture = await call_tool(registry, "mem_picture")
        assert picture.content == "[image: image/png, 300 bytes]"
        assert picture.images[0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    finally:
        await manager.aclose()
    assert registry.tools() == []


async def test_an_mcp_tool_is_tried_before_the_local_tool_of_the_same_name() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up locally."""
        return f"local {key}"

    registry = ToolRegistry()
    registry.add(lookup)
    async with McpManager({"mcpServers": {"mem": memory_server()}}, registry) as manager:
        assert await manager.wait_ready(PATIENT)
        assert [s.source for s in registry.route("lookup")] == ["mcp:mem", "local"]
        names = [t["function"]["name"] for t in registry.openai_tools()]
        assert "lookup" in names and "mem_lookup" not in names
        remote = await call_tool(registry, "lookup", {"key": "a"})
        assert (remote.content, remote.source) == ("remote a", "mcp:mem")
        fallback = await call_tool(registry, "lookup", {"key": "b"})
        assert (fallback.ok, fallback.content, fallback.source) == (True, "local b", "local")


# ---------------------------------------------------------------- failing servers


@needs_proc
async def test_failing_servers_fail_alone_and_quickly() -> None:
    events: list[str] = []
    registry = ToolRegistry()
    config = {
        "mcpServers": {
            "mem": memory_server(),
            "ghost": {"command": "no-such-command-seelen"},
            "silent": {"command": "python", "args": [str(SERVERS / "silent_server.py")]},
            "keyless": {"url": "https://example.org/mcp", "auth": "${SEELEN_TEST_UNSET}"},
            "typo": {"command": "python", "argv": []},
            "off": {"url": "${SEELEN_TEST_UNSET}", "disabled": True},
        }
    }
    manager = McpManager(config, registry, init_timeout=1.0, on_event=events.append, environ={})
    manager.start()
    assert await manager.wait_ready(PATIENT)  # the silent one is cut off at its 1 s, below
    try:
        assert [s.line() for s in manager.status()] == [
            "mem: ready (4 tools)",
            "ghost: failed — command 'no-such-command-seelen' not found",
            "silent: failed — no answer to the MCP handshake within 1 s",
            "keyless: failed — environment variable SEELEN_TEST_UNSET is not set (used in auth)",
            "typo: failed — unknown field 'argv' "
            "(allowed: command, args, env, envFile, cwd, type, transport, disabled)",
            "off: disabled",
        ]
        assert sorted(events) == sorted(
            f"MCP server {s.name!r} failed: {s.reason}"
            for s in manager.status()
            if s.state == "failed"
        )
        echoed = await call_tool(registry, "mem_echo", {"text": "still here"})
        assert echoed.content == "still here"
        await gone(child_pids())  # the silent server was stopped, not left behind
    finally:
        await manager.aclose()


@needs_proc
async def test_closing_while_a_server_is_still_connecting_ends_it() -> None:
    before = child_pids()
    config = {
        "mcpServers": {"silent": {"command": "python", "args": [str(SERVERS / "silent_server.py")]}}
    }
    manager = McpManager(config, ToolRegistry(), init_timeout=PATIENT)
    manager.start()
    await wait_until_async(lambda: child_pids() - before, PATIENT, "no server process started")
    spawned = child_pids() - before
    await manager.aclose()
    await gone(spawned)


async def test_start_twice_is_a_bug_and_bad_files_raise() -> None:
    manager = McpManager({"mcpServers": {}}, ToolRegistry())
    manager.start()
    with pytest.raises(RuntimeError):
        manager.start()
    await manager.aclose()
    broken = McpManager({"mcpServers": 3}, ToolRegistry())
    with pytest.raises(ConfigError):
        broken.start()


# ---------------------------------------------------------------- stdio servers


@needs_proc
async def test_third_party_stdio_server_works_and_leaves_no_process() -> None:
    before = child_pids()
    registry = ToolRegistry()
    time_server = {
        "command": "python",
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }
    manager = McpManager({"mcpServers": {"time": time_server}}, registry, init_timeout=PATIENT)
    manager.start()
    assert await manager.wait_ready(PATIENT)
    assert [s.line() for s in manager.status()] == ["time: ready (2 tools)"]
    assert [s.name for s in registry.tools()] == ["time_get_current_time", "time_convert_time"]
    result = await call_tool(registry, "time_get_current_time", {"timezone": "Asia/Tokyo"})
    assert result.ok and json.loads(result.content)["timezone"] == "Asia/Tokyo"
    bad_zone = await call_tool(registry, "time_get_current_time", {"timezone": "Mars/Base"})
    assert not bad_zone.ok and "Invalid timezone" in bad_zone.content
    spawned = child_pids() - before
    assert len(spawned) == 1
    await manager.aclose()
    await gone(spawned)


@needs_proc
async def test_a_server_that_dies_mid_session_is_reported_once() -> None:
    events: list[str] = []
    registry = ToolRegistry()
    tiny = {"command": "python", "args": [str(SERVERS / "tiny_server.py")]}
    async with McpManager(
        {"mcpServers": {"crashy": tiny}}, registry, init_timeout=PATIENT, on_event=events.append
    ) as manager:
        assert await manager.wait_ready(PATIENT)
        assert (await call_tool(registry, "crashy_echo", {"text": "x"})).content == "x"
        crashed = await call_tool(registry, "crashy_crash")
        assert not crashed.ok and crashed.content.startswith("error: MCP server 'crashy': ")
        assert [s.state for s in manager.status()] == ["failed"]
        assert manager.status()[0].reason.startswith("connection lost")
        assert events == [f"MCP server 'crashy' failed: {manager.status()[0].reason}"]
        assert registry.tools() == []


@needs_proc
def test_no_server_outlives_a_keyboard_interrupt() -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from pathlib import Path
        from seelen.tools.base import ToolRegistry
        from seelen.tools.mcp import McpManager

        from seelen.client.procs import children as child_processes

        def children():
            return sorted(child_processes(os.getpid()))

        async def main():
            server = {{"command": "python", "args": [{str(SERVERS / "tiny_server.py")!r}]}}
            servers = {{"a": server, "b": server}}
            manager = McpManager({{"mcpServers": servers}}, ToolRegistry(), init_timeout=60)
            manager.start()
            try:
                assert await manager.wait_ready(60)
                print("children", *children(), flush=True)
                os.kill(os.getpid(), signal.SIGINT)  # as if the user pressed Ctrl-C
                await asyncio.sleep(60)
            finally:
                await manager.aclose()

        asyncio.run(main())
        """
    )
    host = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = host.communicate(timeout=90)
    assert out.startswith(b"children "), err.decode()
    assert b"KeyboardInterrupt" in err
    pids = [int(pid) for pid in out.split()[1:]]
    assert len(pids) == 2
    survivors = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert survivors == []


# ---------------------------------------------------------------- HTTP with a bearer token


def serve_in_thread(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    runner = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: runner.started, 20, "the web server never started")
    return runner, thread, sock.getsockname()[1]


@pytest.fixture(scope="module")
def web_urls() -> Iterator[dict[str, str]]:
    """One token-protected server, over streamable HTTP and over SSE."""
    verifier = StaticTokenVerifier(tokens={TOKEN: {"client_id": "test", "scopes": []}})
    server = FastMCP("web", auth=verifier)

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    http = serve_in_thread(server.http_app(path="/mcp"))
    sse = serve_in_thread(server.http_app(path="/sse", transport="sse"))
    yield {"http": f"http://127.0.0.1:{http[2]}/mcp", "sse": f"http://127.0.0.1:{sse[2]}/sse"}
    for runner, thread, _ in (http, sse):
        runner.should_exit = True
        thread.join(10)


async def test_remote_servers_with_a_bearer_token(web_urls: dict[str, str]) -> None:
    registry = ToolRegistry()
    http_url, sse_url = web_urls["http"], web_urls["sse"]
    config = {
        "mcpServers": {
            "web": {"url": http_url, "auth": "${WEB_TOKEN}"},
            "viaheader": {"url": http_url, "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
            "wrong": {"url": http_url, "auth": "not-the-token"},
            "stream": {"url": sse_url, "transport": "sse", "auth": "${WEB_TOKEN}"},
            "wrongsse": {"url": sse_url, "auth": "nope"},
        }
    }
    environ = {"WEB_TOKEN": TOKEN}
    async with McpManager(config, registry, init_timeout=PATIENT, environ=environ) as manager:
        assert await manager.wait_ready(PATIENT)
        assert [s.line() for s in manager.status()] == [
            "web: ready (1 tool)",
            "viaheader: ready (1 tool)",
            f"wrong: failed — HTTP 401 Unauthorized from {http_url}",
            "stream: ready (1 tool)",
            f"wrongsse: failed — HTTP 401 Unauthorized from {sse_url}",
        ]
        for name in ("web_add", "stream_add"):
            added = await call_tool(registry, name, {"a": 2, "b": 3})
            assert (added.ok, added.content) == (True, "5")


@needs_proc
async def test_config_files_in_each_clients_format_connect(
    tmp_path: Path, web_urls: dict[str, str]
) -> None:
    http_url, sse_url = web_urls["http"], web_urls["sse"]
    tiny = {"command": "python", "args": [str(SERVERS / "tiny_server.py")]}
    files = {
        "claude": {
            "mcpServers": {
                "local": tiny,
                "remote": {"url": http_url, "headers": {"Authorization": f"Bearer {TOKEN}"}},
            }
        },
        "design": {
            "mcpServers": {
                "local": {"type": "stdio", **tiny},
                "remote": {"type": "http", "url": http_url, "bearerToken": "${WEB_TOKEN}"},
                "events": {"type": "sse", "url": sse_url, "bearerToken": "${WEB_TOKEN}"},
            }
        },
        "vscode": {
            "inputs": [{"type": "promptString", "id": "token", "password": True}],
            "servers": {
                "local": {"type": "stdio", **tiny},
                "remote": {
                    "type": "http",
                    "url": http_url,
                    "headers": {"Authorization": "Bearer ${WEB_TOKEN}"},
                },
            },
        },
    }
    for kind, content in files.items():
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(content))
        registry = ToolRegistry()
        environ = {"WEB_TOKEN": TOKEN, "PATH": os.environ["PATH"]}
        async with McpManager(path, registry, init_timeout=PATIENT, environ=environ) as manager:
            assert await manager.wait_ready(PATIENT)
            assert all(s.state == "ready" for s in manager.status()), (kind, manager.status())
            assert (await call_tool(registry, "local_echo", {"text": kind})).content == kind
            for name in {"remote_add", "events_add"} & registry.names():
                assert (await call_tool(registry, name, {"a": 1, "b": 2})).content == "3"


async def test_a_token_in_a_server_url_is_never_shown(web_urls: dict[str, str]) -> None:
    events: list[str] = []
    url = web_urls["http"] + "?token=hunter2hunter2"
    config = {"mcpServers": {"leaky": {"url": url, "auth": "wrong"}}}
    async with McpManager(config, ToolRegistry(), on_event=events.append) as manager:
        assert await manager.wait_ready(PATIENT)
        line = manager.status()[0].line()
        assert line.startswith("leaky: failed — HTTP 401 Unauthorized from http://")
        assert "token=[redacted]" in line
        assert "hunter2" not in line and "hunter2" not in " ".join(events)


# ---------------------------------------------------------------- what servers send back


def chatty_server() -> FastMCP:
    """Logs, reports progress and offers resources."""
    server = FastMCP("chatty")

    @server.tool
    async def work(ctx: Context) -> str:
        """Work in three steps, logging loudly."""
        await ctx.log("disk on fire", level="emergency", logger_name="watchdog")
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
        await ctx.error("still burning")
        return "worked"

    @server.resource("notes://today", description="Today's notes")
    def today() -> str:
        return "buy milk"

    @server.resource("pics://dot", mime_type="image/png")
    def dot() -> bytes:
        return b"\x89PNG" + b"1" * 60

    return server


# The in-process test server warns (server side) that MCP logging is deprecated in 2026-07-28.
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_server_logs_go_to_its_file_never_to_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    progress: list[ToolProgressed] = []
    registry = ToolRegistry()
    async with McpManager(
        {"mcpServers": {"chatty": chatty_server()}},
        registry,
        log_dir=tmp_path / "logs",
        on_progress=progress.append,
        init_timeout=PATIENT,
    ) as manager:
        assert await manager.wait_ready(PATIENT)
        assert (await call_tool(registry, "chatty_work")).content == "worked"
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    log = (tmp_path / "logs" / "mcp-chatty.log").read_text()
    assert "CRITICAL server log: [watchdog]" in log and "disk on fire" in log
    assert "ERROR server log:" in log and "still burning" in log
    assert oct((tmp_path / "logs" / "mcp-chatty.log").stat().st_mode & 0o777) == "0o600"
    assert [p.line() for p in progress] == [
        "chatty_work: 1/3 – step 1",
        "chatty_work: 2/3 – step 2",
        "chatty_work: 3/3 – step 3",
    ]


@needs_proc
async def test_a_task_only_tool_is_not_offered() -> None:
    registry = ToolRegistry()
    tiny = {"command": "python", "args": [str(SERVERS / "tiny_server.py")]}
    async with McpManager({"mcpServers": {"tiny": tiny}}, registry) as manager:
        assert await manager.wait_ready(PATIENT)
        assert [s.line() for s in manager.status()] == [
            "tiny: ready (4 tools; 1 task-only not offered)"
        ]
        assert sorted(registry.names()) == ["tiny_crash", "tiny_echo", "tiny_picture", "tiny_slow"]


async def test_resources_can_be_read_through_a_tool() -> None:
    registry = ToolRegistry()
    config = {"mcpServers": {"chatty": chatty_server()}}
    async with McpManager(config, registry, init_timeout=PATIENT) as manager:
        assert await manager.wait_ready(PATIENT)
        assert [s.line() for s in manager.status()] == ["chatty: ready (2 tools)"]
        assert sorted(registry.names()) == ["chatty_read_resource", "chatty_work"]
        reader = next(s for s in registry.tools() if s.name == "chatty_read_resource")
        assert "notes://today: Today's notes" in reader.description
        assert "pics://dot" in reader.description
        text = await call_tool(registry, "chatty_read_resource", {"uri": "notes://today"})
        assert (text.ok, text.content) == (True, "buy milk")
        picture = await call_tool(registry, "chatty_read_resource", {"uri": "pics://dot"})
        assert picture.content == "[image pics://dot: image/png, 64 bytes]"
        url = picture.images[0]["image_url"]["url"]
        assert base64.b64decode(url.removeprefix("data:image/png;base64,")).startswith(b"\x89PNG")
        missing = await call_tool(registry, "chatty_read_resource", {"uri": "notes://nope"})
        assert not missing.ok and "chatty" in missing.content
