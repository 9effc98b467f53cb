"""Hiding secrets: API keys and bearer tokens never reach a log, an error line or an export."""

from __future__ import annotations

import re

_SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+)")


def redact(text: str, *secrets: str) -> str:
    """`text` with the given secrets and anything shaped like an API key replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:  # shorter values would blank out ordinary words
            text = text.replace(secret, "[redacted]")
    return _SECRET.sub("[redacted]", text)
