"""Text for a terminal with its control characters made visible, so that stored or received
text (a reply, a recalled turn, a tool's result) can never move the cursor, recolour or
retitle the terminal. Standard library only: `seelen ask` uses it before anything loads."""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and the C1 controls (U+0080-U+009F).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode control picture: ESC shows as ␛
    return "␡" if code == 0x7F else f"\\x{code:02x}"


def visible(text: str) -> str:
    """`text` with control characters replaced by visible stand-ins (␛ for ESC)."""
    return _CONTROL.sub(_picture, text)
