"""What became of each line of piped input, told in one sentence at the end.

A line's message was kept with its reply (nothing to say), kept without its reply (the
question is stored, the reply could not be: `/retry` answers it), or not kept at all; a
slash command either ran or failed. `Repl.run_stream` notes each line; a full disk that
loses only a reply is not counted as losing the question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seelen.counts import counted, number_ranges

if TYPE_CHECKING:
    from seelen.store import Turn

UNANSWERED = "unanswered"  # the message is stored; its reply is not
LOST = "lost"  # nothing of the message is stored
COMMAND = "command"  # a slash command failed

# How each kind of failed line is counted, in the order the sentence names them.
_SAID = (
    (UNANSWERED, "message", "kept without its reply", "kept without their replies"),
    (LOST, "message", "not kept", "not kept"),
    (COMMAND, "command", "failed", "failed"),
)


class LineTally:
    """Counts input lines and remembers, by number, those that failed and how."""

    def __init__(self) -> None:
        self.total = 0
        self.failed: dict[str, list[int]] = {kind: [] for kind, *_ in _SAID}

    def note(self, outcome: str) -> None:
        """One more line; `outcome` is '' when it went well, else UNANSWERED, LOST or COMMAND."""
        self.total += 1
        if outcome:
            self.failed[outcome].append(self.total)

    def sentence(self) -> str:
        """'' when every line went well; else which lines fared how, for one error line:
        "of 4 input lines: 1 message kept without its reply (line 1), …"."""
        parts = []
        for kind, noun, one, many in _SAID:
            numbers = self.failed[kind]
            if numbers:
                what = one if len(numbers) == 1 else many
                where = "line" if len(numbers) == 1 else "lines"
                parts.append(
                    f"{counted(len(numbers), noun)} {what} ({where} {number_ranges(numbers)})"
                )
        if not parts:
            return ""
        return f"of {counted(self.total, 'input line')}: {', '.join(parts)}; each error is above"


def stopped_line(newest: Turn | None, *, incognito: bool) -> str:
    """What Ctrl-C during a reply says, from the session's newest turn (`newest`, after the
    stop): whether the message is kept, with the reply so far, and what /retry does."""
    if incognito:
        return "(stopped; nothing of it is kept: incognito)"
    if newest is not None and newest.role == "user":
        return "(stopped; your message is kept: /retry answers it)"
    if newest is not None and newest.meta.get("interrupted"):
        return "(stopped; your message and the reply so far are kept: /retry answers again)"
    return "(stopped before your message was kept: send it again)"
