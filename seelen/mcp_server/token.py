"""The bearer token of `seelen mcp --http`: kept in the profile (0600), shown only by
`seelen mcp token`, replaced by `seelen mcp token --rotate`."""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from seelen.files import atomic_write, private_dir

TOKEN_FILE = "mcp_token"


class TokenFile:
    """The profile's token, read again whenever the file changes (a rotation takes effect
    at once, without restarting the server)."""

    def __init__(self, profile_dir: Path) -> None:
        self.path = profile_dir / TOKEN_FILE
        self._seen: tuple[int, int] | None = None
        self._token = b""

    def get(self, *, create: bool = True) -> str:
        """The token; a new one is made when there is none yet (and `create`)."""
        if not self.path.exists() and create:
            self.rotate()
        return self.path.read_text("ascii").strip()

    def rotate(self) -> str:
        """Replace the token with a new random one (256 bits); returns it."""
        private_dir(self.path.parent)  # the data dir it may create, too: 0700
        token = secrets.token_urlsafe(32)
        atomic_write(self.path, token + "\n")  # born 0600 (mkstemp)
        return token

    def accepts(self, given: bytes) -> bool:
        """Whether `given` is the current token (compared in constant time)."""
        try:
            stat = self.path.stat()
        except OSError:
            return False  # no token, no entry
        if self._seen != (stat.st_ino, stat.st_mtime_ns):
            self._seen = (stat.st_ino, stat.st_mtime_ns)
            self._token = self.path.read_bytes().strip()
        return bool(self._token) and hmac.compare_digest(given, self._token)
