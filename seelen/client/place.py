"""Where a profile's owner listens, who holds the profile, and which code and settings a
client has: what a client and its owner must agree on before they talk.

Standard library only: a client must start in a few milliseconds.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seelen.config import Settings

SOCKET_NAME = "owner.sock"
SPAWN_LOCK = "owner.spawn.lock"
# The profile's writer lock, written by `seelen.runtime.ProfileLock`: {"pid": …, "role": …}
# while held, emptied on release. Clients read it to say whom they wait for.
LOCK_FILE = "owner.lock"
# AF_UNIX paths are limited to 108 bytes on Linux (including the final NUL).
MAX_SOCKET_PATH = 107
# What an owner exits with when another process holds the profile (`python -m seelen.owner`).
EXIT_PROFILE_BUSY = 3
# Set (to "1") in the environment of an owner started for memory calls only (`seelen mcp`,
# `seelen import`): it builds no chat model (no local llama.cpp server) and refuses `Ask`,
# so the first `ask` replaces it with a full owner.
MEMORY_ONLY_ENV = "SEELEN_OWNER_MEMORY_ONLY"

_HOLDERS = {
    "chat": "the Seelen chat in another terminal",
    "owner": "Seelen's background process",
}


def socket_path(settings: Settings) -> Path:
    """Where the owner of this profile listens."""
    return settings.profile_dir / SOCKET_NAME


def usable(path: Path) -> bool:
    """False when the path is too long for a Unix socket (then everything runs in-process)."""
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def lock_held(directory: Path) -> bool:
    """Whether a live process holds the profile's writer lock now.

    Asks the kernel (a shared `flock` that fails while a writer holds the lock), not the pid
    in the file: a holder killed by SIGTERM, a pid reused after a reboot, or a profile copied
    while its owner ran all leave a pid behind that nobody holds the lock with.
    """
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False  # no lock file: nobody has opened the profile as its writer yet
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock at once
    return False


@dataclass(frozen=True)
class Holder:
    """Who holds the profile's writer lock, as it wrote itself into `owner.lock`."""

    pid: int | None = None
    role: str = ""

    @classmethod
    def read(cls, directory: Path) -> Holder:
        """What the holder wrote (nobody named when the file is empty or unreadable)."""
        try:
            info = json.loads((directory / LOCK_FILE).read_text("utf-8") or "{}")
        except (OSError, ValueError):
            return cls()
        if not isinstance(info, dict):
            return cls()
        pid = info.get("pid")
        return cls(pid if isinstance(pid, int) else None, str(info.get("role", "")))

    def line(self) -> str:
        """In words: "the Seelen chat in another terminal (pid 12)"."""
        role = self.role
        who = _HOLDERS.get(role, f"another `seelen {role}`" if role else "another Seelen")
        return f"{who} (pid {self.pid})" if self.pid is not None else who

    def still_there(self, seconds: float) -> str:
        """What a command says when the profile stayed held for as long as it waits."""
        return (
            f"{self.line()} is still using this profile after {seconds:g} s "
            "(SEELEN_WAIT_SECONDS): try again when it is done"
        )


def code_version() -> str:
    """Seelen's version plus a digest of its installed source files.

    An upgrade (or an edited checkout) changes it, so a warm owner never answers with old code.
    Stat-ing ~60 files costs well under a millisecond.
    """
    import seelen

    root = Path(__file__).resolve().parent.parent  # this package's own files, wherever run from
    digest = hashlib.sha256(seelen.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"{seelen.__version__}+{digest.hexdigest()[:12]}"


def fingerprint(settings: Settings) -> str:
    """A digest of every setting: an owner answers questions only for clients that would
    behave like it."""
    values = {f.name: str(getattr(settings, f.name)) for f in fields(settings)}
    # The owner is given the data dir absolute (connect.py): `--data-dir ./x` is the same.
    values["data_dir"] = str(Path(settings.data_dir).absolute())
    # The MCP list is a file relative to the working folder: name the file, and its version.
    mcp = Path(settings.mcp_servers_file).absolute()
    values["mcp_file"] = f"{mcp}:{mcp.stat().st_mtime_ns if mcp.is_file() else 0}"
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
