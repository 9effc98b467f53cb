"""What MCP tools send back reaches the model and the user: images, progress."""

from __future__ import annotations

import base64
import io
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from model_server import ModelServer, Reply
from rich.console import Console

from seelen.app import App, build_app
from seelen.chat.render import EventPrinter
from seelen.client import place
from seelen.client.connect import request
from seelen.config import load_settings
from seelen.protocol import calls
from seelen.protocol.events import Notice

SERVERS = Path(__file__).resolve().parent / "servers"
TINY = {"command": "python", "args": [str(SERVERS / "tiny_server.py")]}


def with_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENABLE_MCP", "true")
    (tmp_path / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"tiny": TINY}}))


async def open_app() -> App:
    app = build_app(load_settings())
    await app.open_session()
    app.start_mcp(lambda _: None)
    assert await app.mcp.wait_ready(30)
    return app


def tool_call(name: str, call_id: str = "p1") -> Reply:
    return Reply(tool_calls=[{"name": name, "arguments": {}, "id": call_id}])


def image_parts(messages: list[dict]) -> list[dict]:
    return [
        part
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]


async def test_a_tools_image_reaches_the_model_as_image_content(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tiny(tmp_path, monkeypatch)
    env.enqueue(tool_call("tiny_picture"), "A tiny picture of tiny words.", "Hello.")
    app = await open_app()
    [e async for e in app.bot.turn("show me the picture")]
    sent = env.chat_requests()[-1]["messages"]
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["content"] == "a tiny picture:\n[image: image/png, 48 bytes]"
    after = sent[sent.index(tool) + 1]
    assert after["role"] == "user" and after["content"][0]["text"].endswith("tool call p1:")
    [image] = image_parts(sent)
    url = image["image_url"]["url"]
    assert base64.b64decode(url.removeprefix("data:image/png;base64,")).startswith(b"\x89PNG")
    # The image was for that answer: the memory keeps its description, not its bytes.
    [e async for e in app.bot.turn("thanks")]
    assert image_parts(env.chat_requests()[-1]["messages"]) == []
    assert any("[image: image/png" in (m.get("content") or "") for m in env.last_messages())
    await app.aclose()


async def test_a_model_that_refuses_images_reads_their_description(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tiny(tmp_path, monkeypatch)
    refusal = Reply(status=400, text="image input is not supported by this model")
    env.enqueue(tool_call("tiny_picture"), refusal, "It is a tiny PNG.")
    app = await open_app()
    events = [e async for e in app.bot.turn("show me the picture")]
    assert events[-1].text == "It is a tiny PNG."
    assert any(isinstance(e, Notice) and "refused the images" in e.message for e in events)
    requests = env.chat_requests()
    assert image_parts(requests[1]["messages"]) and not image_parts(requests[2]["messages"])
    assert "[image: image/png, 48 bytes]" in json.dumps(requests[2]["messages"])
    await app.aclose()


async def test_vision_false_sends_only_the_description(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tiny(tmp_path, monkeypatch)
    monkeypatch.setenv("VISION", "false")
    env.enqueue(tool_call("tiny_picture"), "A picture.")
    app = await open_app()
    [e async for e in app.bot.turn("show me the picture")]
    assert image_parts(env.chat_requests()[-1]["messages"]) == []
    await app.aclose()


async def test_the_chat_shows_a_running_tools_progress(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tiny(tmp_path, monkeypatch)
    env.enqueue(tool_call("tiny_slow"), "Finished.")
    app = await open_app()
    out = io.StringIO()
    await EventPrinter(Console(file=out, force_terminal=True, width=80)).render(
        app.bot.turn("work slowly")
    )
    await app.aclose()
    shown = out.getvalue()
    for step in (1, 2, 3):
        assert f"tiny_slow: {step}/3 – step {step}" in shown
    assert "slow work done" in shown and "Finished." in shown


def test_ask_on_a_terminal_shows_progress_through_the_warm_owner(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_tiny(tmp_path, monkeypatch)
    monkeypatch.setenv("SEELEN_OWNER", "true")
    env.enqueue(tool_call("tiny_slow"), "Finished.")
    main, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "seelen", "ask", "work slowly"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            text=True,
        )
        os.close(secondary)
        terminal: list[bytes] = []
        reader = threading.Thread(target=read_all, args=(main, terminal))
        reader.start()
        out, _ = proc.communicate(timeout=90)
        reader.join(10)
    finally:
        os.close(main)
        request(place.socket_path(load_settings()), calls.Stop())
    stderr = b"".join(terminal).decode()
    assert proc.returncode == 0, stderr
    assert out == "Finished.\n"
    assert "tiny_slow: 2/3 – step 2" in stderr and stderr.endswith("\r\x1b[K")
    assert stderr.rindex("thinking…") > stderr.index("tiny_slow: 3/3")  # back to the model


def read_all(fd: int, into: list[bytes]) -> None:
    """Everything written to a pty until its other side is closed."""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the writer is gone
            return
        if not chunk:
            return
        into.append(chunk)
