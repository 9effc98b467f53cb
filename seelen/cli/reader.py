"""Standard output whose reader may leave (`seelen … | head`).

A reader that stops reading ends the printing, never the command: what the command was
doing (an answer, a search, an export, a forget) runs to its end and the exit status is
its own. Without this, click turns the first failed write into a
silent exit status 1: an error in a script (`set -o pipefail`) where nothing went wrong.
"""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Iterable
from typing import Any, TextIO, cast


class UntilReaderLeaves:
    """`stream` for writing, until its reader has gone; after that, whatever is written goes
    nowhere (the file descriptor is pointed at /dev/null, so nothing buffered fails again
    at the interpreter's last flush). Everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write `text`; its length, whether or not anyone still reads."""
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each of `lines`."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush, unless the reader has gone."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # Any: whatever the wrapped stream holds
        return getattr(self._stream, name)


def guard_stdout(stream: TextIO) -> TextIO:
    """`stream` as standard output: wrapped when it is not a terminal (a pipe or a file),
    itself when it is (a terminal's reader does not leave, and the chat's input line uses
    the stream as it is)."""
    try:
        if stream.isatty():
            return stream
    except ValueError:  # closed
        return stream
    return cast(TextIO, UntilReaderLeaves(stream))


def narrow_output(exc: BaseException) -> str | None:
    """What to tell the user when `exc` is stored text that the encoding standard output or
    error writes in (PYTHONIOENCODING=ascii, a Latin-1 locale) cannot hold; None for any
    other error, a fault of Seelen's own among them."""
    if not isinstance(exc, UnicodeEncodeError):
        return None
    outputs = {_codec(getattr(s, "encoding", None)) for s in (sys.__stdout__, sys.__stderr__)}
    if _codec(exc.encoding) not in outputs - {"utf-8"}:
        return None
    return (
        f"the output's encoding ({exc.encoding}, from PYTHONIOENCODING or the locale) cannot "
        "write this text: use UTF-8 (PYTHONIOENCODING=utf-8, or a locale such as LANG=C.UTF-8)"
    )


def _codec(name: str | None) -> str:
    """The codec's canonical name ('ASCII' and 'us-ascii' are 'ascii')."""
    try:
        return codecs.lookup(name or "utf-8").name
    except LookupError:
        return name or ""
