"""How stored text is shown in a terminal: as data, never as markup or terminal commands.

A pasted text can hold `[bold]`-like brackets (Rich markup) and ESC/OSC sequences (which a
terminal would obey: change the title, move the cursor, hide text). Everything a user or a
model wrote goes through `visible` before it is shown, and into a `rich.text.Text` (never a
markup string), so neither can take effect.
"""

from __future__ import annotations

import re

from rich.text import Text

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


def data(text: str, style: str = "") -> Text:
    """Stored text as a Rich `Text`: no markup is parsed, no control character survives."""
    return Text(visible(text), style=style)


def line(*parts: str | tuple[str, str]) -> Text:
    """A line assembled from plain parts and (text, style) pairs, all shown as data."""
    out = Text()
    for part in parts:
        text, style = part if isinstance(part, tuple) else (part, "")
        out.append(visible(text), style=style or None)
    return out


def shown(text: str) -> str:
    """Stored text for a Rich markup string: control characters made visible, brackets
    escaped (for the places that still assemble markup strings)."""
    from rich.markup import escape

    return escape(visible(text))
