"""The chat's input line: prompt-toolkit with history, suggestions, slash completion and keys.

Only prompt-toolkit is imported here, so the prompt can be drawn before the runtime loads.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.utils import is_dumb_terminal

if TYPE_CHECKING:
    from prompt_toolkit.application import Application
    from prompt_toolkit.input import Input
    from prompt_toolkit.key_binding import KeyPressEvent
    from prompt_toolkit.output import Output

from seelen.chat.slash import SlashCompleter
from seelen.config import Settings


def key_bindings() -> KeyBindings:
    """Enter sends; Alt-Enter (or Esc, Enter) starts a new line."""
    kb = KeyBindings()

    @kb.add("enter")
    @kb.add("c-j")
    def _send(event: KeyPressEvent) -> None:
        """Send the message."""
        event.current_buffer.validate_and_handle()

    @kb.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        """Insert a new line."""
        event.current_buffer.insert_text("\n")

    return kb


class ChatHistory(FileHistory):
    """The prompt's history file. While `private()` holds (incognito), lines are kept for ↑
    in this chat only: nothing of them is written to the file."""

    def __init__(self, filename: str, private: Callable[[], bool]) -> None:
        super().__init__(filename)
        self.private = private

    def store_string(self, string: str) -> None:
        """Append `string` to the file, unless the chat is private now."""
        if not self.private():
            super().store_string(string)


def fitted(parts: Sequence[tuple[str, int]], width: int) -> str:
    """The parts (text, rank) joined by " · " in their order, the highest ranks left out
    until the line fits `width` columns: a narrow window cut a part in the middle."""
    from prompt_toolkit.utils import get_cwidth

    kept = [(text, rank) for text, rank in parts if text]
    while len(kept) > 1 and get_cwidth(" · ".join(t for t, _ in kept)) > width:
        kept.remove(max(reversed(kept), key=lambda part: part[1]))  # the rightmost of them
    return " · ".join(t for t, _ in kept)


def prompt_session(
    settings: Settings,
    toolbar: Callable[[], Sequence[tuple[str, int]]],
    pt_input: Input | None = None,
    pt_output: Output | None = None,
    private: Callable[[], bool] = lambda: False,
) -> PromptSession[str]:
    """The chat's PromptSession, its history kept in the profile folder (created private);
    lines typed while `private()` holds stay out of it."""
    from seelen.files import PRIVATE_UMASK, private_dir

    directory = settings.profile_dir
    try:
        # The prompt may come before the profile is opened: its folder, private already.
        os.umask(PRIVATE_UMASK)
        private_dir(directory)
        history: History = ChatHistory(str(directory / "prompt_history"), private)
    except OSError:
        history = InMemoryHistory()
    return PromptSession(
        history=history,
        auto_suggest=AutoSuggestFromHistory(),
        completer=SlashCompleter(),
        complete_while_typing=True,
        multiline=True,
        key_bindings=key_bindings(),
        bottom_toolbar=lambda: fitted(toolbar(), get_app().output.get_size().columns),
        enable_open_in_editor=True,
        prompt_continuation="  ",
        input=pt_input,
        output=pt_output,
    )


@contextlib.contextmanager
def keys_unechoed() -> Iterator[None]:
    """While a reply renders in a terminal, keys are not echoed.

    Between prompts the terminal is in its cooked mode, which echoes what is typed (Ctrl-C
    as `^C`) into the reply's live region; its repaint then starts a line too low, and the
    reply showed twice. Typed-ahead keys stay queued for the next prompt.
    """
    import termios

    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (AttributeError, OSError, ValueError, termios.error):  # not a terminal
        saved = None
    if saved is None:
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


# A line of just one of these leaves, as /exit does, at the prompt (not in a pipe, where
# lines are data): what a newcomer types, and what `llm chat` and Python 3.13 leave on.
LEAVE_WORDS = ("exit", "quit")


def above_prompt() -> contextlib.AbstractContextManager[object]:
    """Standard output for the prompt loop: lines printed in the background (MCP failures)
    show above the prompt. With TERM=dumb there is no drawn prompt to keep below them, and
    prompt-toolkit's patched output was written only once the next prompt mark showed, so
    every reply read "› ok"; there, output goes straight to the terminal."""
    if is_dumb_terminal():
        return contextlib.nullcontext()
    from prompt_toolkit.patch_stdout import patch_stdout

    return patch_stdout(raw=True)


async def read_lines(
    session: PromptSession[str],
    handle: Callable[[str], Awaitable[bool]],
    say: Callable[[str], None],
    on_shown: Callable[[], None] | None = None,
) -> None:
    """Read lines at the prompt and `handle` each until it returns False, "exit" or "quit"
    alone, Ctrl-D, or Ctrl-C twice at an empty prompt (Ctrl-C on a typed line clears it; ↑
    brings it back). `say` prints a hint (Rich markup); `on_shown` runs once, right after
    the first draw."""
    if on_shown is not None and is_dumb_terminal():
        # TERM=dumb: prompt-toolkit reads the line with a plain prompt of its own, which
        # never draws this session's app, so there is no first draw to wait for.
        on_shown()
    elif on_shown is not None:
        shown = on_shown

        def first_draw(_: Application[str]) -> None:
            session.app.after_render -= first_draw
            shown()

        session.app.after_render += first_draw
    armed = False
    while True:
        try:
            line = await session.prompt_async("› ", set_exception_handler=False)
        except KeyboardInterrupt:
            typed = session.default_buffer.text
            if typed.strip():
                session.history.append_string(typed)
                say("[dim](line cleared: press ↑ to get it back)[/dim]")
                armed = False
                continue
            if armed:
                return
            armed = True
            say("[dim](press Ctrl-C again or Ctrl-D to leave)[/dim]")
            continue
        except EOFError:
            return
        armed = False
        if line.strip().lower() in LEAVE_WORDS or not await handle(line):
            return
