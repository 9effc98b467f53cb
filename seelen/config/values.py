"""How each setting's text (from a flag, the environment or `.env`) becomes its value: one
parser per kind, each raising ValueError with the words `load_settings` puts after the key."""

from __future__ import annotations

from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

TOOL_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-*?")
PROFILE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def whole(minimum: int, maximum: int = 10**9) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"expected a whole number, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise ValueError(f"must be between {minimum} and {maximum}, got {value}")
        return value

    return parse


def budget(raw: str) -> int:
    """A prompt budget: 0 (the provider's default) or at least 512 tokens."""
    value = whole(0)(raw)
    if 0 < value < 512:
        raise ValueError(f"must be 0 (the default) or at least 512, got {value}")
    return value


def number(minimum: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def text(raw: str) -> str:
    return raw.strip()


def web_address(raw: str) -> str:
    """An http(s) address with a host, or empty (unset); anything else is refused here, as
    one line, instead of failing at the first question as "cannot reach the model at …"."""
    from urllib.parse import urlsplit

    value = raw.strip()
    if not value:
        return value
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// address, got {raw!r}")
    return value


def one_of(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}, got {raw!r}")
        return value

    return parse


def temperature(raw: str) -> float | None:
    if not raw.strip():
        return None  # the endpoint's own default
    value = number(0.0)(raw)
    if value > 2:
        raise ValueError(f"must be between 0 and 2, got {value}")
    return value


def tool_names(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    bad = [n for n in names if not set(n) <= TOOL_NAME_CHARS]
    if bad:
        raise ValueError(f"tool names are letters, digits, '_', '-' (or * ?), got {bad[0]!r}")
    return names


def timezone(raw: str) -> str:
    value = raw.strip()
    if not value:
        return ""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {value!r} (try e.g. Europe/Berlin or UTC)") from None
    return value


def profile(raw: str) -> str:
    value = raw.strip()
    # It names a folder and is typed after `--profile`: a name like "-" or "--" reads as a
    # flag, and dots at an end (".", "x..") hide the folder or are dropped by some systems.
    if (
        not value
        or not set(value) <= PROFILE_CHARS
        or not (value[0].isalnum() and value[-1].isalnum())
        or ".." in value
        or len(value) > 64
    ):
        raise ValueError(
            "a profile name is up to 64 letters, digits, '-', '_' or '.', starting and ending "
            f"with a letter or digit, got {raw!r}"
        )
    return value


def patterns(raw: str) -> str:
    if not any(p.strip() for p in raw.split(",")):
        raise ValueError("give at least one pattern, e.g. *.md,*.txt")
    return raw.strip()
