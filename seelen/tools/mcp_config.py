"""The MCP server list (`mcp_servers.json`): loading, validation, `${VAR}` expansion.

The file is written the way other MCP clients write theirs:
- Claude Desktop / Claude Code / Cursor: `{"mcpServers": {name: entry}}`;
- VS Code: `{"servers": {name: entry}}` (its `inputs` list is ignored; `${input:…}` is not
  supported: use `${VAR}`).
A stdio entry has `command`, `args`, `env`, `cwd` and VS Code's `envFile` (a .env file
whose variables the server gets; `env` wins over it); a remote entry has `url` (or Windsurf's
`serverUrl`), `headers` and a bearer token as `auth` or `bearerToken`. `type` or
`transport` says which: "stdio", "http" (streamable HTTP, the default for a URL) or "sse" (the
default for a URL ending in /sse). `"disabled": true` skips an entry; keys starting with "_"
are comments. `${VAR}` and `${VAR:-default}` are expanded from the environment in every
string; a missing variable fails that server only. The command "python" (or "python3")
means Seelen's own interpreter (`sys.executable`), so servers installed next to Seelen run
whether or not its venv is active.

Why not fastmcp's own model (`fastmcp.mcp_config`): importing it loads the whole fastmcp
package (0.17 s of CPU on top of what an `ask` has loaded by then, half a second or more on
a busy machine) at every start with a config, on the event loop, while a server whose tools
are cached never needs fastmcp at all. And it reads less than this file does: it keeps
unknown fields (a typo passes), ignores `type` on URL entries (an "sse" server would be
spoken to over HTTP), takes `env` values of any type, reads an entry with both `command` and
`url` as stdio, and knows none of `servers`, `envFile`, `serverUrl`, `bearerToken`,
`disabled`, `_` comments or `${VAR}`. tests/test_mcp.py checks that Seelen reads the
canonical format as that model does.
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
from seelen.logs import mask_url

STDIO_FIELDS = ("command", "args", "env", "envFile", "cwd", "type", "transport", "disabled")
REMOTE_FIELDS = ("url", "headers", "auth", "bearerToken", "type", "transport", "disabled")
PYTHON_ALIASES = ("python", "python3")
DEFAULT_FILE = "mcp_servers.json"
SERVER_KEYS = ("mcpServers", "servers")  # Claude Desktop and most clients; VS Code
IGNORED_KEYS = ("inputs",)  # VS Code's prompts for secrets: Seelen reads ${VAR} instead
# The names clients use for the kinds of transport, mapped to Seelen's three.
TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}
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


def find_config(setting: str) -> Path | None:
    """The MCP config file to read: `MCP_SERVERS_FILE` if set (it must exist), else
    ./mcp_servers.json when there is one, else None (no servers)."""
    if not setting:
        default = Path(DEFAULT_FILE)
        return default if default.is_file() else None
    path = Path(setting).expanduser()
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ConfigError(f"MCP_SERVERS_FILE: {path} {what}")
    return path


def load_config(source: Mapping[str, Any] | str | Path) -> tuple[dict[str, Any], Path | None]:
    """The raw server entries of a config dict or file, and the folder relative paths use.

    A missing, unreadable or invalid file raises a one-line `ConfigError`.
    """
    where, base = "MCP config", None
    if isinstance(source, Mapping):
        data: object = source
    else:
        path = Path(source)
        where, base = str(path), path.resolve().parent
        data = _read_json(path)
    shape = 'expected {"mcpServers": {"<name>": {...}}} (or VS Code\'s "servers")'
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: {shape}")
    present = [k for k in SERVER_KEYS if k in data]
    if len(present) > 1:
        raise ConfigError(f"{where}: has both 'mcpServers' and 'servers'; keep one")
    servers = data.get(present[0], {}) if present else {}
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{where}: {shape}")
    known = (*SERVER_KEYS, *IGNORED_KEYS)
    extra = [k for k in data if k not in known and not str(k).startswith("_")]
    if extra:
        raise ConfigError(f"{where}: unknown key {extra[0]!r}; {shape}")
    return {k: v for k, v in servers.items() if not str(k).startswith("_")}, base


def _read_json(path: Path) -> object:
    """The parsed file; every way it can be unreadable is one line naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
        raise ConfigError(msg) from None
    except json.JSONDecodeError as exc:
        msg = f"{path}, line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        raise ConfigError(msg) from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply to be a server list") from None


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


def is_disabled(raw: object) -> bool:
    """Whether an entry says `"disabled": true` (a non-boolean value raises `ConfigError`)."""
    if not isinstance(raw, Mapping) or "disabled" not in raw:
        return False
    if not isinstance(raw["disabled"], bool):
        raise ConfigError("field 'disabled' must be true or false")
    return raw["disabled"]


def parse_server(
    raw: object, environ: Mapping[str, str], base: Path | None = None
) -> StdioServer | RemoteServer:
    """Validate one entry and expand its variables; any problem raises a one-line `ConfigError`."""
    if not isinstance(raw, Mapping):
        raise ConfigError("expected an object with 'command' or 'url'")
    raw = {("url" if k == "serverUrl" else k): v for k, v in raw.items()}
    keys = [k for k in raw if not str(k).startswith("_")]
    if "command" in keys and "url" in keys:
        raise ConfigError("has both 'command' and 'url'; a server is one or the other")
    if "command" not in keys and "url" not in keys:
        raise ConfigError("needs 'command' (a program to start) or 'url' (a remote server)")
    allowed = STDIO_FIELDS if "command" in keys else REMOTE_FIELDS
    unknown = [k for k in keys if k not in allowed]
    if unknown:
        raise ConfigError(f"unknown field {unknown[0]!r} (allowed: {', '.join(allowed)})")
    kind = _transport(raw)
    if "command" in keys:
        if kind not in (None, "stdio"):
            raise ConfigError(f"a 'command' server has type \"stdio\", not {kind!r}")
        return _parse_stdio(raw, environ, base)
    if kind == "stdio":
        raise ConfigError('a \'url\' server has type "http" or "sse", not "stdio"')
    return _parse_remote(raw, environ, kind)


def _transport(raw: Mapping[str, Any]) -> str | None:
    """The entry's transport from `type` or `transport` (they must agree), or None."""
    given = {raw[k] for k in ("type", "transport") if k in raw}
    if len(given) > 1:
        raise ConfigError("'type' and 'transport' disagree; give one of them")
    if not given:
        return None
    value = given.pop()
    if value not in TRANSPORTS:
        choices = ", ".join(f'"{k}"' for k in ("stdio", "http", "sse"))
        raise ConfigError(f"field 'type' must be one of {choices}, got {value!r}")
    return TRANSPORTS[value]


def _parse_stdio(
    raw: Mapping[str, Any], environ: Mapping[str, str], base: Path | None
) -> StdioServer:
    command = expand_vars(_string(raw, "command"), environ, "command")
    if not command:
        raise ConfigError("field 'command' is empty")
    args = tuple(expand_vars(a, environ, f"args[{i}]") for i, a in enumerate(_strings(raw)))
    env = {k: expand_vars(v, environ, f"env.{k}") for k, v in _mapping(raw, "env").items()}
    if "envFile" in raw:
        env = {**_env_file(expand_vars(_string(raw, "envFile"), environ, "envFile"), base), **env}
    cwd = expand_vars(_string(raw, "cwd"), environ, "cwd") if "cwd" in raw else None
    if cwd is not None and base is not None:
        cwd = str(base / cwd)  # relative to the config file, not to wherever Seelen was started
    if cwd is not None and not Path(cwd).is_dir():
        raise ConfigError(f"cwd {cwd!r} is not a directory")
    if command in PYTHON_ALIASES:
        command = sys.executable
    return StdioServer(command, args, env, cwd)


def _parse_remote(
    raw: Mapping[str, Any], environ: Mapping[str, str], kind: str | None
) -> RemoteServer:
    url = expand_vars(_string(raw, "url"), environ, "url")
    if not url.startswith(("http://", "https://")):
        shown = mask_url(url)
        raise ConfigError(f"field 'url' must start with http:// or https://, got {shown!r}")
    if kind is None:
        kind = "sse" if url.rstrip("/").endswith("/sse") else "http"
    headers = {
        k: expand_vars(v, environ, f"headers.{k}") for k, v in _mapping(raw, "headers").items()
    }
    if "auth" in raw and "bearerToken" in raw:
        raise ConfigError("give the token once: 'auth' or 'bearerToken'")
    key = "bearerToken" if "bearerToken" in raw else "auth"
    auth = expand_vars(_string(raw, key), environ, key) if key in raw else ""
    return RemoteServer(url, "sse" if kind == "sse" else "http", headers, auth)


def _env_file(name: str, base: Path | None) -> dict[str, str]:
    """The variables of VS Code's `envFile` (relative to the config file), as `.env` reads."""
    from dotenv import dotenv_values

    path = Path(name).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.is_file():
        raise ConfigError(f"envFile {str(path)!r} is not a file")
    try:
        values = dotenv_values(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"envFile {str(path)!r} cannot be read: {exc}") from None
    return {k: v for k, v in values.items() if v is not None}


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
