"""How `seelen ask` prints an answer: streamed plain text, Markdown, or one JSON object.

Works on the turn's events (`seelen.protocol.events`), whether they come from the warm owner
or from an answer computed in this process, so both paths print exactly the same thing.
"""

from __future__ import annotations

import json
import shutil
import sys

from seelen.chat.visible import visible
from seelen.protocol import codec, events, to_json


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
        self.usage: events.TurnUsage | None = None
        self.tools: list[events.ToolFinished] = []
        self.printed = False  # the one JSON object is out
        self.saved = False  # the question is stored (not for an ephemeral one)
        self.worded = False  # some of the reply came (a stopped one keeps it)

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

    def on_event(self, event: codec.Frame) -> None:
        """One event before the last: a piece of the reply, a notice, a tool's progress."""
        if isinstance(event, events.ToolProgressed):  # replaces the status line; never in a pipe
            self._status(event.line())
            return
        if isinstance(event, events.ToolFinished):  # a tool finished: the model is at work again
            self.tools.append(event)
            if self._thinking:
                self._status("thinking…")
            return
        if isinstance(event, events.TurnUsage):
            self.usage = event
            return
        if isinstance(event, events.Saved):
            self.saved = not self.ephemeral
            return
        if not isinstance(event, (events.TextDelta, events.Notice, events.KnowledgeUsed)):
            return  # Recalled, ToolStarted: nothing to print
        self._done_thinking()
        self.worded = self.worded or isinstance(event, events.TextDelta)
        if isinstance(event, events.TextDelta) and self.stream:
            self._write(visible(event.text))
            self.streamed = True
        elif isinstance(event, events.Notice):
            print(f"seelen: {visible(event.message)}", file=sys.stderr)
        elif isinstance(event, events.KnowledgeUsed) and not self.as_json:  # the notes used
            print(visible(event.line()), file=sys.stderr)

    def finish(self, final: events.Done | events.Failed) -> int:
        """Print the end of the answer (or the failure); returns the exit code."""
        self._done_thinking()
        if isinstance(final, events.Failed):
            print(f"seelen: {visible(final.message)}", file=sys.stderr)
            saved = final.saved and not self.ephemeral
            if saved:
                print(
                    "seelen: your question is saved; `seelen chat` and /retry answer it",
                    file=sys.stderr,
                )
            self.fail_json(final.message, saved=saved)
            return 1
        reply = final.text
        if self.as_json:
            session = None if self.ephemeral else final.session_id
            self._print_json(reply, session_id=session, error=None, saved=self.saved)
        elif self.stream:
            if self.streamed and not reply.endswith("\n"):
                self._write("\n")
            elif not self.streamed:
                shown = visible(reply)
                self._write(shown if shown.endswith("\n") else shown + "\n")
        else:
            from rich.console import Console
            from rich.markdown import Markdown

            Console().print(Markdown(visible(reply)))
        return 0

    def stopped(self) -> None:
        """Ctrl-C stopped an answer of this process: say in one line on stderr (and with
        --json, in the one object) whether the question was kept for /retry."""
        self._done_thinking()
        if self.saved:
            kept = " (with the answer so far)" if self.worded else ""
            line = f"stopped; your question is saved{kept}: `seelen chat` and /retry answer it"
        elif self.ephemeral:
            line = "stopped; nothing of this exchange is kept (--ephemeral)"
        else:
            line = "stopped before your question was saved: ask it again"
        if self.stream and self.streamed:
            self._write("\n")  # the words so far end their line
        print(f"seelen: {line}", file=sys.stderr)
        self.fail_json(line, saved=self.saved)

    def fail_json(self, message: str, *, saved: bool = False) -> None:
        """With --json, the failure as the one JSON object on stdout (`reply` null, `error`
        the sentence said on stderr, `saved` whether the question was kept to answer later),
        so a caller that parses stdout always finds an object."""
        if self.as_json and not self.printed:
            self._print_json(None, session_id=None, error=message, saved=saved)

    def _print_json(
        self, reply: str | None, *, session_id: str | None, error: str | None, saved: bool
    ) -> None:
        """The one JSON object, of one shape whether the answer came or failed: reply,
        session_id, usage, tool_calls, error, saved (the question, and its answer if one
        came, are stored: `seelen chat` shows them)."""
        payload = {
            "reply": reply,
            "session_id": session_id,
            "usage": None if self.usage is None or reply is None else to_json(self.usage),
            "tool_calls": [{"name": t.name, "ok": t.ok} for t in self.tools],
            "error": error,
            "saved": saved,
        }
        self._write(json.dumps(payload, ensure_ascii=False) + "\n")
        self.printed = True

    def _write(self, text: str) -> None:
        """Print on stdout. A reader that stops reading (`| head`) ends the printing, never
        the answer: `cli.reader.guard_stdout` has stdout take it, so the turn runs on and is
        stored whole, and the exit status stays the answer's."""
        sys.stdout.write(text)
        sys.stdout.flush()
