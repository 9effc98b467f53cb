"""The owner's wire protocol: where a profile's socket lives, who may talk to it, and how.

One request per connection, as one JSON line; the owner answers with JSON lines, the last
of which has `"end": true`. This module is shared by the owner and its thin clients, so it
imports only the standard library: a client must start in a few milliseconds.

Requests:  {"op": "ask", "text": …, "ephemeral": bool, "version": …, "fingerprint": …}
           {"op": "status"} · {"op": "stop"}
Answers:   {"type": "refused", "reason": …, "end": true}   (another version or settings)
           {"type": "notice" | "delta" | "used" | "progress" | "tool" | "failed" | "done", …}
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seelen.config import Settings

SOCKET_NAME = "owner.sock"
SPAWN_LOCK = "owner.spawn.lock"
# AF_UNIX paths are limited to 108 bytes on Linux (including the final NUL).
MAX_SOCKET_PATH = 107
# A JSON line longer than this is refused: a question, with its reply, fits many times over.
MAX_LINE = 64 * 1024 * 1024


def socket_path(settings: Settings) -> Path:
    """Where the owner of this profile listens."""
    return settings.profile_dir / SOCKET_NAME


def usable(path: Path) -> bool:
    """False when the path is too long for a Unix socket (then everything runs in-process)."""
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def code_version() -> str:
    """Seelen's version plus a digest of its installed source files.

    An upgrade (or an edited checkout) changes it, so a warm owner never answers with old code.
    Stat-ing ~60 files costs well under a millisecond.
    """
    import seelen

    root = Path(seelen.__file__).parent
    digest = hashlib.sha256(seelen.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"{seelen.__version__}+{digest.hexdigest()[:12]}"


def fingerprint(settings: Settings) -> str:
    """A digest of every setting: an owner serves only clients that would behave like it."""
    values = {f.name: str(getattr(settings, f.name)) for f in fields(settings)}
    # The MCP list is a file relative to the working folder: name the file, and its version.
    mcp = Path(settings.mcp_servers_file).absolute()
    values["mcp_file"] = f"{mcp}:{mcp.stat().st_mtime_ns if mcp.is_file() else 0}"
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def encode(message: dict[str, Any]) -> bytes:
    """One message as one JSON line."""
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One JSON line as a message; ValueError if it is not one."""
    message = json.loads(line.decode("utf-8"))
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message
