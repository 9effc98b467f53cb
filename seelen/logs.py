"""Log files under `<profile>/logs/`: Python's `logging`, rotated, private, secrets redacted.

Every handler made here is a `RotatingFileHandler` whose files are created 0600 in a 0700
folder, with a `RedactFilter` that hides API keys, bearer tokens and tokens in URLs before
anything is formatted. Loggers for one profile's files are made standalone (not registered
in `logging`'s global tree), so two profiles or two tests never share a handler.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.files import private_dir

if TYPE_CHECKING:
    from io import TextIOWrapper

# 5 MB × 3 backups: a debugging session's prompts (10–30 kB each) fit, and a forgotten
# DEBUG_MODE cannot fill the disk (at most 20 MB per file kind).
MAX_BYTES = 5_000_000
BACKUPS = 3
MASK = "[redacted]"

_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{8,}")
# key=value in URLs and forms, for the parameter names that carry credentials.
_URL_PARAM = re.compile(
    r"(?i)(?<![A-Za-z0-9_\-])((?:access_token|api[_-]?key|apikey|auth|client_secret|key|"
    r"password|secret|sig|signature|token)=)[^&#\s\"'<>]+"
)
_USERINFO = re.compile(r"(?i)\b(https?://)[^/\s@:\"'<>]+(?::[^/\s@\"'<>]*)?@")
# A path segment that looks generated (20+ characters, letters and digits mixed), as in
# "https://host/mcp/<token>/sse": hosted MCP servers put per-user keys there.
_PATH_TOKEN = re.compile(r"(?<=/)(?=[A-Za-z_\-]*\d)(?=\d*[A-Za-z])[A-Za-z0-9_\-]{20,}(?=[/?#]|$)")


def redact(text: str, *secrets: str) -> str:
    """`text` with the given secrets, API keys, bearer tokens and URL credentials masked."""
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        if len(secret) >= 4:  # shorter "secrets" (e.g. "not-needed" is fine) would mask words
            text = text.replace(secret, MASK)
    text = _KEY.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _URL_PARAM.sub(lambda m: m.group(1) + MASK, text)
    return _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def mask_url(url: str) -> str:
    """A URL safe to show: credentials in the user part, the query or a token-like path
    segment are masked ("https://host/mcp?token=[redacted]")."""
    head, sep, tail = url.partition("?")
    scheme, slashes, rest = head.partition("://")
    if slashes:
        host, slash, path = rest.partition("/")
        head = f"{scheme}://{host}{slash}{_PATH_TOKEN.sub(MASK, path)}"
    return redact(head + sep + tail)


class RedactFilter(logging.Filter):
    """Masks secrets in a record's message and traceback before any handler formats it."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drops it."""
        record.msg = redact(record.getMessage(), *self.secrets)
        record.args = None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(text, *self.secrets)
        return True


class PrivateFileHandler(RotatingFileHandler):
    """A rotating file handler whose files are created 0600, whatever the umask."""

    def _open(self) -> TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)  # a file left by an older version may be wider
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def file_handler(
    path: Path, secrets: Iterable[str] = (), fmt: str = "%(message)s"
) -> logging.Handler:
    """A private, rotating, redacting handler for `path` (its folder is made 0700)."""
    private_dir(path.parent)
    handler = PrivateFileHandler(
        path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True
    )
    handler.addFilter(RedactFilter(secrets))
    handler.setFormatter(logging.Formatter(fmt))
    return handler


def file_logger(
    name: str, path: Path, secrets: Iterable[str] = (), fmt: str = "%(message)s"
) -> logging.Logger:
    """A standalone logger writing only to `path`; `close_logger` releases its file."""
    logger = logging.Logger(name, logging.DEBUG)  # not in the global tree: nothing propagates
    logger.addHandler(file_handler(path, secrets, fmt))
    return logger


def close_logger(logger: logging.Logger) -> None:
    """Close and detach every handler of a logger made by `file_logger`."""
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


# A base64 data URL (an image from a tool), as it appears in a prompt's JSON.
_DATA_URL = re.compile(r"data:([\w.+/-]+);base64,([A-Za-z0-9+/]*=*)")


def base64_size(data: str) -> int:
    """How many bytes base64 `data` decodes to (padding is not data)."""
    return len(data) * 3 // 4 - data[-2:].count("=")


def _image_size(match: re.Match[str]) -> str:
    return f"data:{match.group(1)};base64,[{base64_size(match.group(2)):,} bytes]"


class PromptLog:
    """DEBUG_MODE: every prompt sent to the model, one JSON line each, in logs/prompts.jsonl."""

    def __init__(self, directory: Path, *secrets: str) -> None:
        self._logger = file_logger("seelen.memory.prompts", directory / "prompts.jsonl", secrets)

    def __call__(self, messages: list[dict[str, Any]]) -> None:
        """Append one prompt (redacted; images from tools by type and size only)."""
        text = json.dumps({"messages": messages}, ensure_ascii=False)
        self._logger.info(_DATA_URL.sub(_image_size, text))

    def close(self) -> None:
        """Release the file."""
        close_logger(self._logger)


# Loggers whose records go to logs/seelen.log in DEBUG_MODE, at these levels: Seelen's own
# in full; openai's at INFO (one line per retry, not every request body).
DEBUG_LOGGERS = {"seelen": logging.DEBUG, "openai": logging.INFO}


def attach_debug_log(directory: Path, *secrets: str) -> Callable[[], None]:
    """DEBUG_MODE: send Seelen's and the openai client's log records to logs/seelen.log.

    Returns a function that detaches and closes the handler again.
    """
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handler = file_handler(directory / "seelen.log", secrets, fmt)
    previous = {}
    for name, level in DEBUG_LOGGERS.items():
        logger = logging.getLogger(name)
        previous[name] = logger.level
        logger.setLevel(level)
        logger.addHandler(handler)

    def detach() -> None:
        for name, level in previous.items():
            logging.getLogger(name).removeHandler(handler)
            logging.getLogger(name).setLevel(level)
        handler.close()

    return detach
