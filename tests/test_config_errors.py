"""A configuration mistake is one line and exit 2, before anything starts or is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Terminal, run_cli

BAD_JSON = '{"mcpServers": {"a": {"command": "x"},}}'  # a trailing comma


@pytest.fixture
def bad_mcp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken ./mcp_servers.json, MCP on, and no endpoint: the bundled model would answer."""
    (tmp_path / "mcp_servers.json").write_text(BAD_JSON)
    monkeypatch.setenv("ENABLE_MCP", "true")
    monkeypatch.setenv("LLM_PROVIDER", "local")


@pytest.mark.parametrize("command", [["ask", "hello"], ["doctor"], ["chat"]])
def test_a_broken_mcp_file_stops_before_the_model_starts(
    bad_mcp_file: None, data_dir: Path, command: list[str]
) -> None:
    result = run_cli(*command)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "seelen: mcp_servers.json, line 1, column 39: invalid JSON: "
        "Expecting property name enclosed in double quotes"
    ]
    assert not data_dir.exists()  # no profile opened, no model started


def test_the_chat_in_a_terminal_says_it_before_its_prompt(bad_mcp_file: None, data_dir) -> None:
    with Terminal("chat") as terminal:
        code = terminal.wait(30)
    assert code == 2, terminal.text
    assert "invalid JSON" in terminal.text
    assert "Seelen is listening" not in terminal.text and "›" not in terminal.text
    assert "llama.cpp" not in terminal.text
    assert not data_dir.exists()
