"""How `seelen ask` prints an answer: streamed plain text, Markdown, or one JSON object.

Works on wire messages (`seelen.owner.wire`), whether they come from the warm owner or from an
answer computed in this process, so both paths print exactly the same thing.
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

from seelen.chat.visible import visible


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

    def on_message(self, message: dict[str, Any]) -> None:
        """One message before the final one: a piece of the reply, a notice, a tool's progress."""
        kind = message.get("type")
        if kind == "progress":  # replaces the status line; never printed in a pipe
            self._status(str(message.get("text", "")))
            return
        if kind == "tool":  # a tool finished: the model is at work again
            if self._thinking:
                self._status("thinking…")
            return
        self._done_thinking()
        if kind == "delta" and self.stream:
            sys.stdout.write(visible(str(message.get("text", ""))))
            sys.stdout.flush()
            self.streamed = True
        elif kind == "notice":
            print(f"seelen: {visible(str(message.get('message', '')))}", file=sys.stderr)
        elif kind == "used" and not self.as_json:  # which notes the answer drew on
            print(visible(str(message.get("text", ""))), file=sys.stderr)

    def finish(self, final: dict[str, Any]) -> int:
        """Print the end of the answer (or the failure); returns the exit code."""
        self._done_thinking()
        if final.get("type") != "done":
            print(f"seelen: {visible(str(final.get('message', 'no answer')))}", file=sys.stderr)
            if not self.ephemeral:
                print(
                    "seelen: your question is saved; `seelen chat` and /retry answer it",
                    file=sys.stderr,
                )
            return 1
        reply = str(final.get("text", ""))
        if self.as_json:
            payload = {
                "reply": reply,
                "session_id": None if self.ephemeral else final.get("session_id"),
                "usage": final.get("usage"),
                "tool_calls": final.get("tool_calls", []),
            }
            print(json.dumps(payload, ensure_ascii=False))
        elif self.stream:
            if self.streamed and not reply.endswith("\n"):
                sys.stdout.write("\n")
            elif not self.streamed:
                shown = visible(reply)
                sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
        else:
            from rich.console import Console
            from rich.markdown import Markdown

            Console().print(Markdown(visible(reply)))
        sys.stdout.flush()
        return 0
