"""Configuration: precedence, validation and clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli

from seelen.config import load_settings, setting_docs
from seelen.errors import ConfigError


def test_flag_beats_environment_beats_dotenv(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("CHAT_MODEL=from-dotenv\nTOOL_MODEL=tool-from-dotenv\nMAX_CONV_NUM=30\n")
    env = {"CHAT_MODEL": "from-env"}
    settings = load_settings({}, environ=env, dotenv_path=dotenv)
    assert settings.chat_model == "from-env"
    assert settings.tool_model == "tool-from-dotenv"
    assert settings.max_conv_num == 30
    flagged = load_settings({"CHAT_MODEL": "from-flag"}, environ=env, dotenv_path=dotenv)
    assert flagged.chat_model == "from-flag"


def test_defaults_and_tool_model_falls_back_to_chat_model(tmp_path: Path) -> None:
    settings = load_settings({}, environ={"CHAT_MODEL": "m1"}, dotenv_path=tmp_path / "none")
    assert settings.max_conv_num == 20
    assert settings.refresh_every_conv_num == 10
    assert settings.effective_tool_model == "m1"
    assert settings.profile_dir.name == "default"


def test_temperature_and_disabled_tools_parse(tmp_path: Path) -> None:
    environ = {"TEMPERATURE": "0.3", "DISABLED_TOOLS": " web_search, time_* ,"}
    settings = load_settings({}, environ=environ, dotenv_path=tmp_path / "none")
    assert settings.temperature == 0.3
    assert settings.disabled_tools == ("web_search", "time_*")
    default = load_settings({}, environ={}, dotenv_path=tmp_path / "none")
    assert (default.temperature, default.disabled_tools) == (None, ())


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("MAX_CONV_NUM", "abc", "MAX_CONV_NUM: expected a whole number"),
        ("TIMEZONE", "Mars/Olympus", "TIMEZONE: unknown timezone"),
        ("DEBUG_MODE", "maybe", "DEBUG_MODE: expected true or false"),
        ("SEELEN_PROFILE", "../escape", "SEELEN_PROFILE"),
        ("REFRESH_EVERY_CONV_NUM", "25", "REFRESH_EVERY_CONV_NUM: must be smaller"),
        ("TEMPERATURE", "hot", "TEMPERATURE: expected a number"),
        ("TEMPERATURE", "2.5", "TEMPERATURE: must be between 0 and 2"),
        ("DISABLED_TOOLS", "web_search, rm -rf", "DISABLED_TOOLS: tool names are letters"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings({}, environ={key: value}, dotenv_path=tmp_path / "none")


def test_bad_value_exits_2_with_one_line_and_no_traceback() -> None:
    result = run_cli("ask", "hello", env={"MAX_CONV_NUM": "abc"})
    assert result.returncode == 2
    assert result.stderr.strip() == "seelen: MAX_CONV_NUM: expected a whole number, got 'abc'"
    assert "Traceback" not in result.stderr


def test_unwritable_data_dir_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    result = run_cli(
        "ask",
        "hi",
        env={
            "SEELEN_DATA_DIR": str(blocker / "sub"),
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "CHAT_MODEL": "x",
        },
    )
    assert result.returncode == 2
    assert result.stderr.startswith("seelen: SEELEN_DATA_DIR: cannot write to")
    assert len(result.stderr.strip().splitlines()) == 1


def test_importing_creates_no_files(tmp_path: Path, data_dir: Path) -> None:
    code = (
        "import seelen.cli.main, seelen.config, seelen.store, seelen.app, seelen.agent.turn, "
        "seelen.chat.repl, seelen.models.chat"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
    assert not data_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_env_example_documents_every_setting() -> None:
    example = (Path(__file__).parents[1] / ".env.example").read_text()
    for key, default, _doc in setting_docs():
        assert f"{key}=" in example, key
        if isinstance(default, bool):
            assert f"{key}={str(default).lower()}" in example
        elif default not in ("", None, ()):
            assert f"{key}={default}" in example, key
