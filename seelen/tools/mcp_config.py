"""The MCP server list (`mcp_servers.json`): loading, validation, `${VAR}` expansion.

Config: `{"mcpServers": {name: entry}}`. A stdio entry has `command`, `args`, `env`, `cwd`;
a remote entry has `url`, `headers`, `auth` (a bearer token) and `transport` ("http" =
streamable HTTP, the default, or "sse"; a URL ending in /sse means "sse"). `"disabled": true`
skips an entry; keys starting with "_" are comments. `${VAR}` and `${VAR:-default}` are
expanded from the environment in every string; a missing variable fails that server only.
The command "python" (or "python3") means Seelen's own interpreter (`sys.executable`), so
servers installed next to Seelen run whether or not its venv is active.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from seelen.errors import ConfigError

STDIO_FIELDS = ("command", "args", "env", "cwd", "transport", "disabled")
REMOTE_FIELDS = ("url", "headers", "auth", "transport", "disabled")
PYTHON_ALIASES = ("python", "python3")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class StdioServer:
    """A server Seelen starts as a child process and talks to over stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class RemoteServer:
    """A server reached over streamable HTTP ("http") or SSE."""

    url: str
    transport: Literal["http", "sse"] = "http"
    headers: dict[str, str] = field(default_factory=dict)
    auth: str = ""


def load_config(source: Mapping[str, Any] | str | Path) -> tuple[dict[str, Any], Path | None]:
    """The raw server entries of a config dict or file, and the folder relative paths use.

    A missing file means no servers; unreadable or invalid JSON raises `ConfigError`.
    """
    where = "MCP config"
    base: Path | None = None
    if isinstance(source, Mapping):
        data: Any = source
    else:
        path = Path(source)
        where, base = str(path), path.resolve().parent
        if not path.exists():
            return {}, base
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            msg = f"{path}, line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
            raise ConfigError(msg) from None
    shape = 'expected {"mcpServers": {"<name>": {...}}}'
    if not isinstance(data, Mapping) or not isinstance(data.get("mcpServers", {}), Mapping):
        raise ConfigError(f"{where}: {shape}")
    extra = [k for k in data if k != "mcpServers" and not str(k).startswith("_")]
    if extra:
        raise ConfigError(f"{where}: unknown key {extra[0]!r}; {shape}")
    servers = data.get("mcpServers", {})
    return {k: v for k, v in servers.items() if not str(k).startswith("_")}, base


def expand_vars(text: str, environ: Mapping[str, str], where: str) -> str:
    """Expand `${VAR}` and `${VAR:-default}` (default when unset or empty), as a shell would."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value:
            return value
        if default is not None:
            return default
        if value is None:
            raise ConfigError(f"environment variable {name} is not set (used in {where})")
        return value

    return _VAR.sub(substitute, text)


def is_disabled(raw: Any) -> bool:
    """Whether an entry says `"disabled": true` (a non-boolean value raises `ConfigError`)."""
    if not isinstance(raw, Mapping) or "disabled" not in raw:
        return False
    if not isinstance(raw["disabled"], bool):
        raise ConfigError("field 'disabled' must be true or false")
    return raw["disabled"]


def parse_server(
    raw: Any, environ: Mapping[str, str], base: Path | None = None
) -> StdioServer | RemoteServer:
    """Validate one entry and expand its variables; any problem raises a one-line `ConfigError`."""
    if not isinstance(raw, Mapping):
        raise ConfigError("expected an object with 'command' or 'url'")
    keys = [k for k in raw if not str(k).startswith("_")]
    if "command" in keys and "url" in keys:
        raise ConfigError("has both 'command' and 'url'; a server is one or the other")
    if "command" not in keys and "url" not in keys:
        raise ConfigError("needs 'command' (a program to start) or 'url' (a remote server)")
    allowed = STDIO_FIELDS if "command" in keys else REMOTE_FIELDS
    unknown = [k for k in keys if k not in allowed]
    if unknown:
        raise ConfigError(f"unknown field {unknown[0]!r} (allowed: {', '.join(allowed)})")
    if "command" in keys:
        return _parse_stdio(raw, environ, base)
    return _parse_remote(raw, environ)


def _parse_stdio(raw: Mapping[str, Any], environ: Mapping[str, str], base: Path | None):
    command = expand_vars(_string(raw, "command"), environ, "command")
    if not command:
        raise ConfigError("field 'command' is empty")
    if raw.get("transport", "stdio") != "stdio":
        raise ConfigError("field 'transport' of a 'command' server can only be \"stdio\"")
    args = tuple(expand_vars(a, environ, f"args[{i}]") for i, a in enumerate(_strings(raw)))
    env = {k: expand_vars(v, environ, f"env.{k}") for k, v in _mapping(raw, "env").items()}
    cwd = expand_vars(_string(raw, "cwd"), environ, "cwd") if "cwd" in raw else None
    if cwd is not None and base is not None:
        cwd = str(base / cwd)  # relative to the config file, not to wherever Seelen was started
    if cwd is not None and not Path(cwd).is_dir():
        raise ConfigError(f"cwd {cwd!r} is not a directory")
    if command in PYTHON_ALIASES:
        command = sys.executable
    return StdioServer(command, args, env, cwd)


def _parse_remote(raw: Mapping[str, Any], environ: Mapping[str, str]) -> RemoteServer:
    url = expand_vars(_string(raw, "url"), environ, "url")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"field 'url' must start with http:// or https://, got {url!r}")
    default = "sse" if url.rstrip("/").endswith("/sse") else "http"
    transport = raw.get("transport", default)
    if transport not in ("http", "streamable-http", "sse"):
        raise ConfigError(f'field \'transport\' must be "http" or "sse", got {transport!r}')
    headers = {
        k: expand_vars(v, environ, f"headers.{k}") for k, v in _mapping(raw, "headers").items()
    }
    auth = expand_vars(_string(raw, "auth"), environ, "auth") if "auth" in raw else ""
    kind: Literal["http", "sse"] = "sse" if transport == "sse" else "http"
    return RemoteServer(url, kind, headers, auth)


def _string(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise ConfigError(f"field {key!r} must be a string")
    return value


def _strings(raw: Mapping[str, Any]) -> list[str]:
    value = raw.get("args", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("field 'args' must be a list of strings")
    return value


def _mapping(raw: Mapping[str, Any], key: str) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"field {key!r} must be an object of strings")
    return dict(value)
