"""Against the MCP reference server, `@modelcontextprotocol/server-everything`, over stdio.

`./install.sh --test` installs it (pinned) into .venv/npm; node 20 or newer runs it.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path

import pytest
from helpers import call_tool, wait_until_async
from model_server import ModelServer, Reply
from rich.console import Console

from seelen.app import build_app
from seelen.chat.render import EventPrinter
from seelen.config import load_settings
from seelen.tools.base import ToolRegistry
from seelen.tools.mcp import McpManager, ToolProgressed

EVERYTHING = Path(sys.prefix) / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
PATIENT = 30.0  # node starts slowly on a busy machine


@pytest.fixture
def everything() -> dict:
    """The config entry of the reference server."""
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: run ./install.sh --test (it needs npm)")
    return {"command": str(EVERYTHING), "args": ["stdio"]}


async def test_logs_stay_in_the_log_file_task_only_tools_are_hidden_resources_read(
    everything: dict, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    progress: list[ToolProgressed] = []
    registry = ToolRegistry()
    config = {"mcpServers": {"everything": everything}}
    logs = tmp_path / "logs"
    async with McpManager(
        config, registry, log_dir=logs, on_progress=progress.append, init_timeout=PATIENT
    ) as manager:
        assert await manager.wait_ready(PATIENT)
        [status] = manager.status()
        assert status.state == "ready" and status.skipped >= 1, status.line()
        names = registry.names()
        assert "everything_get-tiny-image" in names
        assert not any("simulate-research-query" in n for n in names)  # taskSupport: required
        reader = next(s for s in registry.tools() if s.name == "everything_read_resource")
        assert "- demo://resource/dynamic/text/{resourceId}: " in reader.description
        uri = {"uri": "demo://resource/dynamic/text/7"}
        resource = await call_tool(registry, "everything_read_resource", uri)
        assert resource.ok and resource.content.startswith("Resource 7: ")
        assert (await call_tool(registry, "everything_toggle-simulated-logging")).ok
        log = logs / "mcp-everything.log"
        await wait_until_async(lambda: "server log:" in log.read_text(), 10, "no server log line")
        # Off again: with its 5-second timer running, the server does not exit when its
        # stdin closes, and closing waits 2 s for it before ending it.
        assert (await call_tool(registry, "everything_toggle-simulated-logging")).ok
        steps = {"duration": 0.6, "steps": 3}
        outcome = await call_tool(registry, "everything_trigger-long-running-operation", steps)
        assert outcome.ok and "Steps: 3" in outcome.content
    notes = [line for line in log.read_text().splitlines() if "server log:" in line]
    assert notes and "level" in notes[0]  # e.g. "… CRITICAL server log: Critical-level message"
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert [p.line() for p in progress] == [
        f"everything_trigger-long-running-operation: {i}/3" for i in (1, 2, 3)
    ]


async def test_its_image_reaches_the_model_and_its_progress_the_chat(
    everything: dict, env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENABLE_MCP", "true")
    (tmp_path / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"e": everything}}))
    image = Reply(tool_calls=[{"name": "e_get-tiny-image", "arguments": {}, "id": "i1"}])
    slow = {"duration": 0.6, "steps": 3}
    work = Reply(tool_calls=[{"name": "e_trigger-long-running-operation", "arguments": slow}])
    env.enqueue(image, work, "A small MCP logo, and the work is done.")
    app = build_app(load_settings())
    await app.open_session()
    app.start_mcp(lambda _: None)
    assert await app.mcp.wait_ready(PATIENT)
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, force_terminal=True, width=100))
    await printer.render(app.bot.turn("show me the logo, then do the slow work"))
    await app.aclose()
    sent = env.chat_requests()[1]["messages"]
    parts = [p for m in sent if isinstance(m["content"], list) for p in m["content"]]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(urls) == 1 and urls[0].startswith("data:image/png;base64,")
    png = base64.b64decode(urls[0].removeprefix("data:image/png;base64,"))
    assert png.startswith(b"\x89PNG")
    tool = next(m for m in sent if m["role"] == "tool")
    assert f"[image: image/png, {len(png):,} bytes]" in tool["content"]
    assert "e_trigger-long-running-operation: 2/3" in out.getvalue()
