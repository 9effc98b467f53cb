"""`seelen mcp` as other assistants use it: real MCP clients (the official SDK over stdio and
HTTP, fastmcp's client) against the installed `seelen mcp` process, which talks to the real
owner; a chat open beside them; the owner killed in the middle of a call."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from helpers import (
    open_store,
    owner_serves,
    piped_chat,
    run_cli,
    run_seelen,
    wait_gone,
    wait_until,
    wait_until_async,
)
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation
from model_server import ModelServer

from seelen.client.connect import owner_status
from seelen.config import load_settings

SEELEN = str(Path(sys.executable).with_name("seelen"))
# An SSE read may wait for a fresh owner to open the profile (httpx waits 5 s by default).
LONG = httpx2.Timeout(30, read=120)  # the installed command


@asynccontextmanager
async def stdio_session(
    *args: str, name: str = "test-client", errlog: Path | None = None
) -> AsyncIterator[ClientSession]:
    """The official SDK's client, talking to `seelen mcp ARGS` over stdio (its stderr to
    `errlog`, or nowhere)."""
    params = StdioServerParameters(command=SEELEN, args=["mcp", *args], env=dict(os.environ))
    info = Implementation(name=name, version="1.0")
    with open(errlog or os.devnull, "w") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write, client_info=info) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """A tool's structured result; fails the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A tool error's one sentence."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    (content,) = result.content
    assert "\n" not in content.text and "Traceback" not in content.text
    return content.text


async def _search_json(query: str) -> dict[str, Any]:
    """`seelen memory search --json QUERY`, run in this process (in a thread: it has its
    own event loop)."""
    out = await asyncio.to_thread(run_cli, "memory", "search", "--json", query)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def test_an_sdk_client_over_stdio_searches_adds_to_and_forgets_from_memory(
    owner_env: ModelServer, data_dir: Path
) -> None:
    assert run_seelen("ask", "My sister Lena lives in Porto.").returncode == 0
    async with stdio_session() as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"search_memory", "remember", "forget", "recent_sessions"} | {
            "get_profile"
        }  # no knowledge folder, no search_knowledge
        assert tools["search_memory"].input_schema["properties"]["limit"]["type"] == "integer"
        # Descriptions a model reads as text: no indentation carried over from the source.
        assert all("\n " not in (t.description or "") for t in tools.values())
        assert "text_id" in json.dumps(tools["search_memory"].output_schema)
        kept = await call(session, "remember", text="I am allergic to peanuts.")
        assert kept["role"] == "user" and kept["client"] == "test-client"
        found = await call(session, "search_memory", query="peanut allergy")
        first = found["turns"][0]
        assert first["text_id"] == kept["text_id"] and first["session_id"] == kept["session_id"]
        # The same ranking, ids and dates as `seelen memory search --json`.
        cli = (await _search_json("peanut allergy"))["turns"][0]
        assert {k: first[k] for k in ("text_id", "session_id", "time", "role", "text")} == {
            k: cli[k] for k in ("text_id", "session_id", "time", "role", "text")
        }
        sister = await call(session, "search_memory", query="where does Lena live", limit=3)
        assert sister["turns"][0]["text"] == "My sister Lena lives in Porto."
        none = await call(session, "search_memory", query="Lena", since="2999-01-01")
        assert none["turns"] == []
        recent = await call(session, "recent_sessions", n=5)
        assert {s["session_id"] for s in recent["sessions"]} >= {kept["session_id"]}
        profile = await call(session, "get_profile")
        assert set(profile) >= {"profile", "persona"}
        resource = await session.read_resource("seelen://persona")
        assert resource.contents[0].text == profile["persona"]
        prompt = await session.get_prompt("seelen_memory")
        assert "search_memory" in prompt.messages[0].content.text
        # Bad input: one sentence each, and the session goes on.
        assert "query" in await error(session, "search_memory", query="   ")
        assert "limit" in await error(session, "search_memory", query="x", limit="ten")
        assert "limit" in await error(session, "search_memory", query="x", limit=10_000)
        assert "query is required" in await error(session, "search_memory")
        assert "since" in await error(session, "search_memory", query="x", since="last tuesday")
        assert "4,000" in await error(session, "remember", text="x" * 5000)
        assert "no memory" in await error(session, "forget", text_id="ffffffffffff")
        assert "4 characters" in await error(session, "forget", text_id="ab")
        assert "text" in await error(session, "remember", text=["not", "a", "string"])
        assert (await call(session, "forget", text_id=kept["text_id"]))["forgotten"] == 1
        assert "peanuts" not in json.dumps(await _search_json("peanut allergy"))
    # The chat's session holds only the chat's turns: the remembered text had its own.
    store = open_store(data_dir)
    live = [t.text for t in store.turns(store.active_session().session_id)]
    assert live == ["My sister Lena lives in Porto.", "answer to My sister Lena lives in Porto."]


async def test_an_owner_started_for_memory_calls_has_no_chat_model_until_an_ask_needs_one(
    owner_env: ModelServer, data_dir: Path
) -> None:
    (data_dir / "default").mkdir(parents=True)
    open_store(data_dir).close()
    settings = load_settings()
    async with stdio_session() as session:
        kept = await call(session, "remember", text="My bike is a green Brompton.")
        first = owner_status(settings)
        assert first is not None and first.memory_only  # no model server for memory calls
        shown = await asyncio.to_thread(run_cli, "server", "status")
        assert f"pid {first.pid} (background, memory calls only)" in shown.stdout
        # An ask replaces it with an owner that answers, and the memory is the same.
        asked = await asyncio.to_thread(run_seelen, "ask", "which bike do I have?")
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.strip() == "answer to which bike do I have?"
        second = owner_status(settings)
        assert second is not None and not second.memory_only and second.pid != first.pid
        found = await call(session, "search_memory", query="Brompton bike")
        assert found["turns"][0]["text_id"] == kept["text_id"]


async def test_a_profile_that_does_not_exist_is_one_sentence_and_nothing_is_made(
    owner_env: ModelServer, data_dir: Path
) -> None:
    from mcp import Client

    from seelen.mcp_server.server import build_server

    (data_dir / "default").mkdir(parents=True)
    (data_dir / "default" / "chat_sessions.db").touch()
    server = build_server(load_settings({"SEELEN_PROFILE": "nosuchprofile"}))
    async with Client(server) as client:  # in process: no transport is under test here
        result = await client.call_tool("search_memory", {"query": "x"})
        assert result.is_error
        assert "no profile 'nosuchprofile'" in result.content[0].text
        assert "(profiles: default)" in result.content[0].text
    assert not (data_dir / "nosuchprofile").exists()
    token = await asyncio.to_thread(run_cli, "mcp", "token", "--profile", "nosuchprofile")
    assert token.returncode == 1 and token.stderr.count("\n") == 1
    assert not (data_dir / "nosuchprofile").exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server(owner_env: ModelServer, data_dir: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`seelen mcp --http` on a free port; yields its URL and process."""
    port = _free_port()
    process = subprocess.Popen(
        [SEELEN, "mcp", "--http", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def listening(client: httpx2.Client) -> bool:
        assert process.poll() is None, process.communicate()
        try:
            client.get(url, timeout=1)
        except httpx2.TransportError:
            return False
        return True

    # One client for every try: each new one reads the certificate bundle (~40 ms of CPU).
    with httpx2.Client() as client:
        wait_until(lambda: listening(client), 60, "seelen mcp --http never listened")
    try:
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_http_needs_the_bearer_token_and_serves_the_sdk_client(
    http_server: tuple[str, subprocess.Popen], data_dir: Path
) -> None:
    url, process = http_server
    token_file = data_dir / "default" / "mcp_token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = (await asyncio.to_thread(run_cli, "mcp", "token")).stdout.strip()
    assert token == token_file.read_text().strip() and len(token) >= 32
    remember = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"text": "intruder was here"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx2.Client(timeout=10) as plain:
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
            refused = plain.post(url, json=remember, headers={**headers, **auth})
            assert refused.status_code == 401
            assert "Bearer" in refused.headers["www-authenticate"]
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=LONG) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        assert "remember" in {t.name for t in (await session.list_tools()).tools}
        kept = await call(session, "remember", text="The spare key is under the blue pot.")
        found = await call(session, "search_memory", query="where is the spare key")
        assert found["turns"][0]["text_id"] == kept["text_id"]
    store = open_store(data_dir)
    texts = [t.text for s in store.list_sessions() for t in store.turns(s.session_id)]
    assert "intruder was here" not in texts
    rotated = (await asyncio.to_thread(run_cli, "mcp", "token", "--rotate")).stdout.strip()
    assert rotated != token
    old = httpx2.post(url, json=remember, headers={**headers, "Authorization": f"Bearer {token}"})
    assert old.status_code == 401
    process.terminate()
    _out, err = process.communicate(timeout=30)
    logs = "".join(p.read_text(errors="replace") for p in (data_dir / "default").rglob("*.log"))
    for secret in (token, rotated):
        assert secret not in err and secret not in logs


async def test_clients_remember_at_once_beside_an_open_chat(
    owner_env: ModelServer, data_dir: Path
) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    chat = piped_chat([SEELEN, "chat"])
    try:
        assert chat.stdin is not None
        chat.stdin.write("hello from the chat\n")
        chat.stdin.flush()
        await wait_until_async(
            lambda: owner_serves("chat", chat), 60, "the chat never served the profile"
        )
        texts = {n: [f"{n} fact {i}: the code is {n}-{i}" for i in range(3)] for n in "ab"}
        async with stdio_session(name="client-a") as a, stdio_session(name="client-b") as b:
            sessions = {"a": a, "b": b}
            kept = await asyncio.gather(
                *(call(sessions[name], "remember", text=t) for name in "ab" for t in texts[name])
            )
            for (name, text), result in zip(
                [(n, t) for n in "ab" for t in texts[n]], kept, strict=True
            ):
                assert result["text"] == text and result["client"] == f"client-{name}"
            read_only = StdioTransport(SEELEN, ["mcp", "--read-only"], env=dict(os.environ))
            async with Client(read_only) as reader:
                assert {t.name for t in await reader.list_tools()} == {
                    "search_memory",
                    "recent_sessions",
                    "get_profile",
                }
                found = await reader.call_tool("search_memory", {"query": "the code is b-2"})
                assert found.structured_content["turns"][0]["text"] == texts["b"][2]
        out, _err = chat.communicate("and back in the chat\n", timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0 and "answer to and back in the chat" in out
    store = open_store(data_dir)
    everything = [t for s in store.list_sessions() for t in store.turns(s.session_id)]
    for name in "ab":
        for text in texts[name]:
            assert [t.text for t in everything].count(text) == 1
        mine = {t.session_id for t in everything if t.meta.get("client") == f"client-{name}"}
        assert len(mine) == 1  # one session per client and day
    live = [t.text for t in store.turns(store.active_session().session_id)]
    assert live == [
        "hello from the chat",
        "answer to hello from the chat",
        "and back in the chat",
        "answer to and back in the chat",
    ]


async def test_the_owner_killed_in_the_middle_of_a_call_is_replaced_unseen(
    owner_env: ModelServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")  # embedding goes through the server
    monkeypatch.setenv("EMBEDDING_MODEL", "test-embedding")
    held, release = threading.Event(), threading.Event()

    def hold(texts: list[str]) -> None:
        if any("kill me" in t for t in texts) and not release.is_set():
            held.set()
            release.wait(60)

    owner_env.on_embed = hold
    async with stdio_session() as session:
        await call(session, "recent_sessions")  # the owner is up
        pid = owner_status(load_settings()).pid
        remember = asyncio.create_task(call(session, "remember", text="kill me while I embed"))
        # Stored, then embedding (held): now the owner dies.
        assert await asyncio.to_thread(held.wait, 60)
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid)
        release.set()
        kept = await asyncio.wait_for(remember, 90)
        found = await call(session, "search_memory", query="kill me while I embed")
        assert found["turns"][0]["text_id"] == kept["text_id"]
        assert owner_status(load_settings()).pid != pid
    store = open_store(data_dir)
    texts = [t.text for s in store.list_sessions() for t in store.turns(s.session_id)]
    assert texts.count("kill me while I embed") == 1  # the retried call stored it once
    assert re.fullmatch(r"[0-9a-f]{32}", kept["text_id"])


def _fill_with_summaries(data_dir: Path) -> None:
    """Three archived days, each with a long summary, one of them about the question, all
    embedded (as the profile's writer, before any owner runs)."""
    (data_dir / "default").mkdir(parents=True, exist_ok=True)
    store = open_store(data_dir)
    days = [
        ("I keep bees on the roof; the hive is called Queen Maud.", "beekeeping"),
        ("My neighbour plays the cello every evening.", "music"),
        ("We drove to the coast and ate mussels.", "travel"),
    ]
    for n, (fact, topic) in enumerate(days):
        start = 1_700_000_000_000 + n * 86_400_000
        sid = store.create_session("archived", start_ms=start).session_id
        store.add_turns(
            sid, [("user", fact, None, start), ("assistant", "Noted.", None, start + 1)]
        )
        long = f"A long conversation about {topic}. " + "It went on and on. " * 60
        store.add_summary(sid, long, start, start + 1)
    store.close()
    assert run_cli("memory", "reindex").returncode == 0


async def test_search_memory_returns_at_most_limit_items_best_first_and_the_chats_prompt(
    owner_env: ModelServer, data_dir: Path
) -> None:
    await asyncio.to_thread(_fill_with_summaries, data_dir)
    cli = await _search_json("what is my beehive called")
    async with stdio_session() as session:
        two = await session.call_tool(
            "search_memory", {"query": "what is my beehive called", "limit": 2}
        )
        assert not two.is_error
        data = two.structured_content
        assert len(data["turns"]) + len(data["summaries"]) <= 2
        first_line = two.content[0].text.splitlines()[0]
        assert "Queen Maud" in first_line  # the text leads with what matches best
        assert sum(len(line) for line in two.content[0].text.splitlines()) < 1_200
        ten = await call(session, "search_memory", query="what is my beehive called", limit=10)
    # The same `in_prompt` as `seelen memory search --json` (the chat's budget) for each.
    cli_marks = {i["text_id"]: i["in_prompt"] for i in [*cli["turns"], *cli["summaries"]]}
    for item in [*ten["turns"], *ten["summaries"]]:
        assert item["in_prompt"] == cli_marks[item["text_id"]], item["text"][:40]
    assert any(s["in_prompt"] for s in ten["summaries"])  # summaries reach the prompt too


async def test_clients_see_what_each_tool_may_do_and_unknown_prompts_are_bad_params(
    owner_env: ModelServer,
) -> None:
    from mcp.shared.exceptions import MCPError

    async with stdio_session() as session:
        tools = {t.name: t.annotations for t in (await session.list_tools()).tools}
        assert tools["search_memory"].read_only_hint and tools["search_memory"].idempotent_hint
        assert tools["get_profile"].read_only_hint and tools["recent_sessions"].read_only_hint
        assert tools["forget"].destructive_hint and not tools["forget"].read_only_hint
        assert not tools["remember"].read_only_hint and not tools["remember"].destructive_hint
        with pytest.raises(MCPError) as raised:
            await session.get_prompt("no_such_prompt")
        assert raised.value.code == -32602
        assert "seelen_memory" in raised.value.message


async def test_a_client_without_seelen_data_dir_is_told_which_memory_it_gets(
    owner_env: ModelServer, data_dir: Path, tmp_path: Path
) -> None:
    stderr = tmp_path / "mcp-stderr.txt"
    async with stdio_session(errlog=stderr) as session:
        info = await session.call_tool("get_profile", {})
        assert not info.is_error
        said = info.content[0].text
        assert str(data_dir) in said and "new and empty" in said
        assert info.structured_content["data_dir"] == str(data_dir)
        assert info.structured_content["name"] == "default"
        # Once it holds something, it says how much instead.
        await call(session, "remember", text="My cat is called Miso.")
        said = (await session.call_tool("get_profile", {})).content[0].text
        assert "new and empty" not in said and "(1 session, 1 turn)" in said
    # And at its start it said so once on stderr, where a client's log keeps it.
    lines = [line for line in stderr.read_text().splitlines() if str(data_dir) in line]
    assert len(lines) == 1 and "new and empty" in lines[0]


async def test_the_server_instructions_name_the_memory_served(
    owner_env: ModelServer, data_dir: Path
) -> None:
    params = StdioServerParameters(command=SEELEN, args=["mcp"], env=dict(os.environ))
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            started = await session.initialize()
    assert f"profile 'default' in {data_dir}" in (started.instructions or "")
    assert "new and empty" in (started.instructions or "")


def test_the_stdio_catalog_is_what_the_sdks_server_announces() -> None:
    from seelen.mcp_server import catalog

    generated = catalog.render(catalog.generate())
    assert generated == catalog.CATALOG.read_text("utf-8"), (
        "the tools changed: run `.venv/bin/python -m seelen.mcp_server.catalog`"
    )


def test_the_stdio_server_needs_no_mcp_sdk() -> None:
    from helpers import heavy_imports

    heavy = ("mcp", "mcp_types", "anyio", "uvicorn", "starlette", "fastmcp")
    assert heavy_imports("seelen.mcp_server.stdio", heavy) == []
    assert heavy_imports("seelen.mcp_server.run", heavy) == []


def _rpc(lines: list[object], *, count: int) -> list[dict[str, Any]]:
    """Raw JSON-RPC lines to `seelen mcp` over stdio; its first `count` answers, by id."""
    process = subprocess.Popen(
        [SEELEN, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    for line in lines:
        process.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    process.stdin.flush()
    answers = [json.loads(process.stdout.readline()) for _ in range(count)]
    process.stdin.close()
    process.wait(timeout=60)
    return sorted(answers, key=lambda a: str(a.get("id")))


def test_the_stdio_server_speaks_json_rpc_and_says_what_it_cannot_do(
    owner_env: ModelServer,
) -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw"}}
    answers = _rpc(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}},
            "{ not json",
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope"}},
            {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "x://y"}},
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
            # An unknown revision gets the newest one it speaks (each `initialize` is
            # answered on its own: one process shows it).
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "initialize",
                "params": {**init, "protocolVersion": "2099-01-01"},
            },
        ],
        count=8,
    )
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
    assert by_id[1]["result"]["serverInfo"]["name"] == "seelen"
    assert by_id[2]["result"] == {}
    assert by_id[3]["error"]["code"] == -32601  # a client of the newer revision falls back
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[4]["error"]["code"] == -32602 and "nope" in by_id[4]["error"]["message"]
    assert by_id[5]["error"] == {
        "code": -32602,
        "message": "Unknown resource: x://y",
        "data": {"uri": "x://y"},
    }
    assert {t["name"] for t in by_id[6]["result"]["tools"]} >= {"search_memory", "remember"}
    assert by_id[7]["result"]["protocolVersion"] == "2025-11-25"
