"""Settings: command-line flags > environment > `.env` > defaults.

Nothing here touches the disk at import time. `load_settings` reads `.env` (without
changing `os.environ`), validates every value and raises `ConfigError` naming the key.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from seelen.config import values as parse
from seelen.errors import ConfigError

T = TypeVar("T")


def _default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "seelen")


def _setting(env: str, default: T, parse: Callable[[str], T], doc: str) -> T:
    return field(default=default, metadata={"env": env, "parse": parse, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """Every setting of Seelen, validated. Build it with `load_settings`."""

    openai_api_key: str = _setting("OPENAI_API_KEY", "", parse.text, "API key of the endpoint")
    openai_base_url: str = _setting(
        "OPENAI_BASE_URL",
        "",
        parse.web_address,
        "any OpenAI-compatible endpoint, e.g. http://localhost:11434/v1",
    )
    llm_provider: str = _setting(
        "LLM_PROVIDER",
        "auto",
        parse.one_of("auto", "openai", "local"),
        "auto: the endpoint if OPENAI_BASE_URL or OPENAI_API_KEY is set, else the local model",
    )
    chat_model: str = _setting("CHAT_MODEL", "", parse.text, "model for the conversation")
    tool_model: str = _setting(
        "TOOL_MODEL", "", parse.text, "model for summaries and memory upkeep"
    )
    local_model_path: str = _setting(
        "LOCAL_MODEL_PATH",
        "",
        parse.text,
        "a GGUF file for the local provider (default: bundled; relative: to .env's folder)",
    )
    data_dir: str = _setting("SEELEN_DATA_DIR", "", parse.text, "where memories live")
    profile: str = _setting(
        "SEELEN_PROFILE", "default", parse.profile, "separate memories per profile"
    )
    max_conv_num: int = _setting(
        "MAX_CONV_NUM",
        20,
        parse.whole(2),
        "live exchanges (a message and its reply) before folding",
    )
    refresh_every_conv_num: int = _setting(
        "REFRESH_EVERY_CONV_NUM",
        10,
        parse.whole(1),
        "oldest exchanges folded into the summary at once",
    )
    recall_session_num: int = _setting(
        "RECALL_SESSION_NUM", 3, parse.whole(0, 50), "related past sessions shown to the model"
    )
    # A safety bound only: RECALL_TOKENS decides. At the default budget the passages held
    # 31 turns on MemoryBank and 70 on bench_recall.py's shorter turns (means a question).
    recall_conv_num: int = _setting(
        "RECALL_CONV_NUM", 100, parse.whole(0, 400), "most past turns (with their context) recalled"
    )
    recall_tokens: int = _setting(
        "RECALL_TOKENS",
        0,
        parse.whole(0),
        "token budget of recalled past turns; 0 = 1500, at most 20% of the prompt budget",
    )
    timezone: str = _setting("TIMEZONE", "", parse.timezone, "IANA name; empty = this machine's")
    debug_mode: bool = _setting(
        "DEBUG_MODE", False, parse.boolean, "log prompts and retries to logs/ (redacted, rotated)"
    )
    enable_mcp: bool = _setting("ENABLE_MCP", True, parse.boolean, "connect the MCP servers")
    mcp_servers_file: str = _setting(
        "MCP_SERVERS_FILE",
        "",
        parse.text,
        "MCP server list (must exist); empty = ./mcp_servers.json when there is one",
    )
    embedding_provider: str = _setting(
        "EMBEDDING_PROVIDER",
        "auto",
        parse.one_of("auto", "local", "multilingual", "openai"),
        "auto (local until you write in another language, then multilingual), local "
        "(English, fastest), multilingual (any language) or openai (the endpoint)",
    )
    embedding_model: str = _setting(
        "EMBEDDING_MODEL", "", parse.text, "embedding model name when EMBEDDING_PROVIDER=openai"
    )
    # The bundled 135M model rewrote the persona and profile with invented text at nearly
    # every /save (README, "The first five minutes"); the summary alone is still written.
    rewrite_files: str = _setting(
        "REWRITE_FILES",
        "auto",
        parse.one_of("auto", "true", "false"),
        "let /save rewrite the persona and profile; auto: not with the bundled 135M model",
    )
    max_reply_tokens: int = _setting(
        "MAX_REPLY_TOKENS", 0, parse.whole(0), "cap on tokens per model answer; 0 = the endpoint's"
    )
    temperature: float | None = _setting(
        "TEMPERATURE", None, parse.temperature, "chat model sampling, 0-2; empty = the endpoint's"
    )
    request_timeout: float = _setting(
        "REQUEST_TIMEOUT", 60.0, parse.number(1), "seconds per request"
    )
    max_retries: int = _setting(
        "MAX_RETRIES", 3, parse.whole(0, 10), "retries on 429, 5xx, timeouts"
    )
    max_tool_rounds: int = _setting(
        "MAX_TOOL_ROUNDS", 6, parse.whole(0, 50), "tool rounds per turn"
    )
    tool_timeout: float = _setting("TOOL_TIMEOUT", 30.0, parse.number(0.1), "seconds per tool call")
    tool_result_chars: int = _setting(
        "TOOL_RESULT_CHARS", 8000, parse.whole(100), "tool results are cut to this size"
    )
    vision: str = _setting(
        "VISION",
        "auto",
        parse.one_of("auto", "true", "false"),
        "send tools' images to the model; auto = unless it refuses them (never the bundled one)",
    )
    mcp_init_timeout: float = _setting(
        "MCP_INIT_TIMEOUT",
        15.0,
        parse.number(0.1),
        "seconds an MCP server has to answer its handshake",
    )
    context_tokens: int = _setting(
        "CONTEXT_TOKENS",
        0,
        parse.budget,
        "token budget of the whole prompt; 0 = 8000, or 1536 for the bundled local model",
    )
    jina_api_key: str = _setting("JINA_API_KEY", "", parse.text, "enables the web_search tool")
    owner: bool = _setting(
        "SEELEN_OWNER", True, parse.boolean, "answer `ask` through a warm background process"
    )
    idle_minutes: float = _setting(
        "SEELEN_IDLE_MINUTES", 15.0, parse.number(0.01), "the background process exits after this"
    )
    # Two minutes: a chat opening (the local model loads in 5-20 s) or an owner finishing its
    # answers is long done by then; a re-index of a large memory is not, and is told so.
    wait_seconds: float = _setting(
        "SEELEN_WAIT_SECONDS",
        120.0,
        parse.number(0),
        "how long a command waits for another Seelen process to finish with the profile",
    )
    knowledge_dirs: str = _setting(
        "KNOWLEDGE_DIRS",
        "",
        parse.text,
        "note folders Seelen reads by itself, separated by ':' (relative ones: to .env's folder)",
    )
    knowledge_patterns: str = _setting(
        "KNOWLEDGE_PATTERNS",
        "*.md,*.txt",
        parse.patterns,
        "which files there are notes (globs, by ',')",
    )
    # A whole novel (~200,000 words) is about 1.2 MB: 2 MB keeps any hand-written note and
    # skips exports and logs, which would flood the index with one file's words.
    knowledge_max_bytes: int = _setting(
        "KNOWLEDGE_MAX_BYTES",
        2_000_000,
        parse.whole(1),
        "larger files in those folders are skipped",
    )
    disabled_tools: tuple[str, ...] = _setting(
        "DISABLED_TOOLS", (), parse.tool_names, "comma-separated tool names to hide (* and ? match)"
    )
    # Seven: a week of daily backups, or the last few before risky changes; each is a full
    # copy of the profile, so more is the user's choice, not a default.
    backups: int = _setting(
        "SEELEN_BACKUPS", 7, parse.whole(1, 1000), "`seelen db backup` copies kept"
    )

    @property
    def profile_dir(self) -> Path:
        """The data dir of the active profile."""
        return Path(self.data_dir) / self.profile

    @property
    def effective_tool_model(self) -> str:
        """TOOL_MODEL, or CHAT_MODEL when it is not set."""
        return self.tool_model or self.chat_model


def setting_docs() -> list[tuple[str, Any, str]]:
    """(env key, default, description) of every setting, for `.env.example` and `--help`."""
    return [(f.metadata["env"], f.default, f.metadata["doc"]) for f in fields(Settings)]


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    dotenv_path: Path | None = None,
    *,
    flags: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> Settings:
    """Merge defaults < `.env` < environment < overrides (keyed by env name) and validate.

    A bad value's error says where it came from: the flag (`flags` maps an env name to the
    flag that set it), the `.env` file and line, or the environment variable. `warn` is told
    of each key in `.env` that is not a setting, with the closest one.
    """
    environ = os.environ if environ is None else environ
    path = Path.cwd() / ".env" if dotenv_path is None else dotenv_path
    raw: dict[str, Any] = {}
    where: dict[str, str] = {}
    if path.is_file():
        values_in_file, unread = _read_dotenv(path)
        lines = _dotenv_lines(path)
        for key, value in values_in_file.items():
            if value is not None:
                raw[key] = value
                where[key] = f"{key} (in {path}, line {lines.get(key, '?')})"
        if warn is not None:
            for number in unread:
                warn(f"{path}, line {number}: not a KEY=value line (a quote left open?); ignored")
            for line in unknown_keys(values_in_file, lines, path):
                warn(line)
    raw.update(environ)
    where.update({key: key for key in environ})
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    raw.update(given)
    where.update({key: (flags or {}).get(key, key) for key in given})

    values: dict[str, Any] = {}
    for f in fields(Settings):
        key = f.metadata["env"]
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, str):
            try:
                value = f.metadata["parse"](value)
            except ValueError as exc:
                raise ConfigError(f"{where.get(key, key)}: {exc}") from None
        values[f.name] = value
    if not values.get("data_dir"):
        values["data_dir"] = _default_data_dir()
    for name, (key, several) in _PATHS.items():
        if values.get(name):  # a value from .env is relative to its folder; others, to cwd
            in_file = where.get(key, "").startswith(f"{key} (in ")
            base = (path.parent if in_file else Path.cwd()).absolute()
            values[name] = anchored(values[name], base, several=several)
    settings = Settings(**values)
    if settings.refresh_every_conv_num >= settings.max_conv_num:
        raise ConfigError(
            f"REFRESH_EVERY_CONV_NUM: must be smaller than MAX_CONV_NUM "
            f"({settings.refresh_every_conv_num} >= {settings.max_conv_num})"
        )
    if settings.embedding_provider == "openai" and not settings.embedding_model:
        raise ConfigError("EMBEDDING_MODEL: required when EMBEDDING_PROVIDER=openai")
    return settings


# Settings that name files or folders (several, separated like PATH), made absolute once
# here, so two spellings of one folder are one folder, whichever folder a process starts in.
# (SEELEN_DATA_DIR stays as given: the owner is handed it absolute, see client/connect.py.)
_PATHS = {
    "knowledge_dirs": ("KNOWLEDGE_DIRS", True),
    "local_model_path": ("LOCAL_MODEL_PATH", False),
}


def anchored(value: str, base: Path, *, several: bool = False) -> str:
    """The path `value` (with `several`, each of its paths separated by os.pathsep) with `~`
    expanded and, when relative, joined to `base`; normalised (`./notes/` and `notes` are
    one folder), symlinks kept."""
    parts = [p.strip() for p in value.split(os.pathsep)] if several else [value.strip()]
    paths = [os.path.normpath(base / os.path.expanduser(p)) for p in parts if p]
    return os.pathsep.join(paths)


def _read_dotenv(path: Path) -> tuple[dict[str, str | None], list[int]]:
    """The values of a .env file, and the lines python-dotenv could not read (it skips them
    and logs "python-dotenv could not parse statement…", naming neither file nor program:
    the caller says it in Seelen's words instead)."""
    from dotenv import dotenv_values

    unread: list[int] = []

    def caught(record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args and isinstance(record.args[0], int):
            unread.append(record.args[0])
            return False
        return True

    logger = logging.getLogger("dotenv.main")
    logger.addFilter(caught)
    try:
        return dict(dotenv_values(path)), unread
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    finally:
        logger.removeFilter(caught)


_DOTENV_KEY = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=")


def _dotenv_lines(path: Path) -> dict[str, int]:
    """The line each key of a .env file is set on (the last one, which dotenv keeps)."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            match = _DOTENV_KEY.match(line)
            if match:
                found[match.group(1)] = number
    return found


def unknown_keys(values: Mapping[str, Any], lines: Mapping[str, int], path: Path) -> list[str]:
    """One line for each key of a .env file that is not a setting (Seelen reads nothing
    else from it), naming the closest setting. A .env that holds no setting at all belongs
    to another program in this folder: only near-misses of a setting's name are named."""
    known = [f.metadata["env"] for f in fields(Settings)]
    ours = any(key in known for key in values)
    out = []
    for key in values:
        if key in known:
            continue
        close = difflib.get_close_matches(key.upper(), known, n=1, cutoff=0.75)
        if not close and not ours:
            continue
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(
            f"{path}, line {lines.get(key, '?')}: {key} is not a Seelen setting{hint}; ignored"
        )
    return out


def existing_profiles(data_dir: str | Path) -> list[str]:
    """The profiles in `data_dir`: its folders that bear a profile's name, sorted."""
    try:
        folders = [p for p in Path(data_dir).iterdir() if p.is_dir()]
    except OSError:  # no data dir yet, or not readable: no profile to name
        return []
    names = []
    for folder in folders:
        try:
            names.append(parse.profile(folder.name))
        except ValueError:  # backups, lancedb.damaged-*, a user's own folder
            continue
    return sorted(names)


def prepare_profile_dir(settings: Settings) -> Path:
    """Create the profile's data dir if needed and prove it is writable."""
    from seelen.files import make_private

    path = settings.profile_dir
    try:
        make_private(path)  # folders 0700, files 0600, whatever the umask
        # A probe of its own: processes starting together must not remove each other's.
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"SEELEN_DATA_DIR: cannot write to {path} ({reason})") from None
    return path
