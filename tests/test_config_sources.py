"""A setting's mistake says where it was made; folders Seelen creates are private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers import run_cli
from model_server import ModelServer

from seelen.config import load_settings
from seelen.errors import ConfigError


def test_a_misspelt_dotenv_key_is_named_with_the_closest_setting(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("CHAT_MODEL=m\n# a comment\nTEMPRATURE=0.9\nFOO_BAR=1\n")
    told: list[str] = []
    settings = load_settings({}, environ={}, dotenv_path=dotenv, warn=told.append)
    assert settings.temperature is None  # ignored, as before, but no longer silently
    assert told == [
        f"{dotenv}, line 3: TEMPRATURE is not a Seelen setting (did you mean TEMPERATURE?); "
        "ignored",
        f"{dotenv}, line 4: FOO_BAR is not a Seelen setting; ignored",
    ]


def test_another_program_s_dotenv_is_left_alone_but_a_near_miss_is_named(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("DATABASE_URL=postgres://x\nSECRET_KEY=abc\n")
    told: list[str] = []
    load_settings({}, environ={}, dotenv_path=dotenv, warn=told.append)
    assert told == []
    dotenv.write_text("DATABASE_URL=postgres://x\nCHAT_MODLE=llama3\n")
    load_settings({}, environ={}, dotenv_path=dotenv, warn=told.append)
    assert told == [
        f"{dotenv}, line 2: CHAT_MODLE is not a Seelen setting (did you mean CHAT_MODEL?); ignored"
    ]


def test_a_bad_value_says_where_it_came_from(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("CHAT_MODEL=m\nexport TEMPERATURE=hot\n")
    with pytest.raises(ConfigError) as raised:
        load_settings({}, environ={}, dotenv_path=dotenv)
    assert str(raised.value) == f"TEMPERATURE (in {dotenv}, line 2): expected a number, got 'hot'"
    with pytest.raises(ConfigError, match=r"^TEMPERATURE: expected a number, got 'warm'$"):
        load_settings({}, environ={"TEMPERATURE": "warm"}, dotenv_path=dotenv)


@pytest.mark.parametrize("name", ["-", "--", "x..", ".hidden", "x.", "a/b", "../up", "x" * 65])
def test_names_that_are_no_folder_or_read_as_flags_are_no_profiles(name: str) -> None:
    result = run_cli("--profile", name, "sessions", "list")
    assert result.returncode == 2
    assert result.stderr.startswith("seelen: --profile: a profile name is up to 64 letters")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("name", ["work", "x", "my.work-2", "a_b"])
def test_ordinary_profile_names_are_accepted(name: str, tmp_path: Path) -> None:
    settings = load_settings({"SEELEN_PROFILE": name}, environ={}, dotenv_path=tmp_path / "no")
    assert settings.profile == name


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_folders_seelen_creates_are_private_parents_included(
    env: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SEELEN_DATA_DIR")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    old = os.umask(0o022)
    try:
        result = run_cli("ask", "hello")  # the default data dir, ~/.local/share/seelen
        assert result.returncode == 0, result.stderr
    finally:
        os.umask(old)
    for folder in (".local", ".local/share", ".local/share/seelen", ".local/share/seelen/default"):
        assert mode(home / folder) == 0o700, folder
    assert mode(home) == 0o755  # a folder that was there is left as it was


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"EMBEDDING_PROVIDER": "openai"}, "EMBEDDING_MODEL: required when EMBEDDING_PROVIDER"),
        ({"KNOWLEDGE_PATTERNS": " , "}, "KNOWLEDGE_PATTERNS: give at least one pattern"),
    ],
)
def test_settings_that_failed_only_later_fail_when_read(
    tmp_path: Path, environ: dict[str, str], expected: str
) -> None:
    # Both were refused only once the profile and the local model were open.
    with pytest.raises(ConfigError, match=expected):
        load_settings({}, environ=environ, dotenv_path=tmp_path / "none")


def test_a_flag_given_empty_is_refused_not_read_as_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--data-dir "$DIR"` with DIR unset opened the default data dir, the user's real
    memory, in place of the folder the script meant; an empty --model or --profile is
    refused the same way, before anything is opened."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEELEN_DATA_DIR", raising=False)
    for args in (
        ("--data-dir", "", "sessions", "list"),
        ("sessions", "list", "--data-dir", ""),
        ("-m", "", "sessions", "list"),
        ("sessions", "list", "-p", ""),
    ):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "it is empty: give a value or leave it out" in result.stderr, args
    assert list(tmp_path.iterdir()) == []


def test_relative_folders_are_resolved_once_against_the_env_file_or_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KNOWLEDGE_DIRS and LOCAL_MODEL_PATH were kept as typed: `notes` and `./notes/` were two
    folders, and each process read them against the folder it happened to start in."""
    from seelen.knowledge.folders import add_folder, all_folders

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "notes").mkdir(parents=True)
    elsewhere.mkdir()
    dotenv = project / ".env"
    dotenv.write_text("KNOWLEDGE_DIRS=notes:./notes/\nLOCAL_MODEL_PATH=models/m.gguf\n", "utf-8")
    monkeypatch.chdir(elsewhere)
    data = {"SEELEN_DATA_DIR": str(tmp_path / "data")}
    from_file = load_settings({}, environ=data, dotenv_path=dotenv)
    notes = str(project / "notes")
    assert from_file.knowledge_dirs == f"{notes}{os.pathsep}{notes}"
    assert from_file.local_model_path == str(project / "models" / "m.gguf")
    (from_file.profile_dir).mkdir(parents=True)
    assert add_folder(from_file.profile_dir, str(project / "notes" / ".")) == (notes, True)
    assert all_folders(from_file) == [notes]
    from_env = load_settings(
        {}, environ={**data, "KNOWLEDGE_DIRS": "~/n:../project/notes"}, dotenv_path=tmp_path / "x"
    )
    assert from_env.knowledge_dirs == f"{Path.home() / 'n'}{os.pathsep}{notes}"
