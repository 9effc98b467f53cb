"""How `seelen ask` prints an answer: streamed plain text, Markdown, or one JSON object.

Works on the typed wire messages (`seelen.owner.wire`), whether they come from the warm owner
or from an answer computed in this process, so both paths print exactly the same thing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator

from seelen.chat.visible import visible
from seelen.owner import wire


class AnswerPrinter:
    """Prints one answer the way the caller asked for it; `finish` gives the exit code."""

    def __init__(self, *, as_json: bool, ephemeral: bool) -> None:
        self.as_json = as_json
        self.ephemeral = ephemeral
        # In a pipe the words are streamed as they come; a terminal gets Markdown at the end.
        self.stream = not as_json and not sys.stdout.isatty()
        self.streamed = False
        # In a terminal, stderr shows one status line ("thinking…", a tool's progress) until
        # the first word (or the end).
        self._terminal = not as_json and sys.stderr.isatty()
        self._thinking = False
        self.reader_gone = False  # stdout's reader stopped reading (`seelen ask … | head`)

    def begin(self) -> None:
        """Show that the question is on its way (on stderr, in a terminal only)."""
        self._status("thinking…")

    def _status(self, text: str) -> None:
        if not self._terminal:
            return
        width = max(shutil.get_terminal_size().columns - 1, 10)  # a wrapped line stays behind
        line = "".join(c if c.isprintable() else "?" for c in text)[:width]
        sys.stderr.write(f"\r\x1b[K{line}")
        sys.stderr.flush()
        self._thinking = True

    def _done_thinking(self) -> None:
        if self._thinking:
            sys.stderr.write("\r\x1b[K")  # erase the line: the answer takes its place
            sys.stderr.flush()
            self._thinking = False

    def on_message(self, message: wire.Answer) -> None:
        """One message before the final one: a piece of the reply, a notice, a tool's progress."""
        if isinstance(message, wire.Progress):  # replaces the status line; never in a pipe
            self._status(message.text)
            return
        if isinstance(message, wire.ToolRan):  # a tool finished: the model is at work again
            if self._thinking:
                self._status("thinking…")
            return
        if isinstance(message, wire.Saved):
            return
        self._done_thinking()
        if isinstance(message, wire.Delta) and self.stream:
            self._write(visible(message.text))
            self.streamed = True
        elif isinstance(message, wire.Notice):
            print(f"seelen: {visible(message.message)}", file=sys.stderr)
        elif isinstance(message, wire.Used) and not self.as_json:  # the notes it drew on
            print(visible(message.text), file=sys.stderr)

    def finish(self, final: wire.Done | wire.Failed) -> int:
        """Print the end of the answer (or the failure); returns the exit code."""
        self._done_thinking()
        if isinstance(final, wire.Failed):
            print(f"seelen: {visible(final.message)}", file=sys.stderr)
            if final.saved and not self.ephemeral:
                print(
                    "seelen: your question is saved; `seelen chat` and /retry answer it",
                    file=sys.stderr,
                )
            return 1
        reply = final.text
        if self.as_json:
            payload = {
                "reply": reply,
                "session_id": None if self.ephemeral else final.session_id,
                "usage": final.usage,
                "tool_calls": final.tool_calls,
            }
            self._write(json.dumps(payload, ensure_ascii=False) + "\n")
        elif self.stream:
            if self.streamed and not reply.endswith("\n"):
                self._write("\n")
            elif not self.streamed:
                shown = visible(reply)
                self._write(shown if shown.endswith("\n") else shown + "\n")
        else:
            from rich.console import Console
            from rich.markdown import Markdown

            with self._reader_may_leave():
                Console().print(Markdown(visible(reply)))
        return 0

    def _write(self, text: str) -> None:
        """Print on stdout, until its reader stops reading."""
        if self.reader_gone:
            return
        with self._reader_may_leave():
            sys.stdout.write(text)
            sys.stdout.flush()

    @contextlib.contextmanager
    def _reader_may_leave(self) -> Iterator[None]:
        """A reader that stopped reading (`| head`) ends the printing, never the answer: the
        turn runs on and is stored whole, and the exit status stays the answer's."""
        try:
            yield
        except BrokenPipeError:
            self.reader_gone = True
            # Whatever is still buffered for stdout goes nowhere, rather than failing again
            # at the interpreter's last flush.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
