"""The interactive chat: a prompt-toolkit session that reads lines and hands them on.

Slash commands live in `seelen.slash`, rendering in `seelen.render`. Lines read from a pipe
go through the same `handle()` as typed ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterable
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.text import Text

from seelen.agent import Event
from seelen.app import App
from seelen.errors import SeelenError
from seelen.render import EventPrinter, short, shown
from seelen.slash import COMMANDS, SlashCompleter


def key_bindings() -> KeyBindings:
    """Enter sends; Alt-Enter (or Esc, Enter) starts a new line."""
    kb = KeyBindings()

    @kb.add("enter")
    @kb.add("c-j")
    def _send(event: Any) -> None:
        """Send the message."""
        event.current_buffer.validate_and_handle()

    @kb.add("escape", "enter")
    def _newline(event: Any) -> None:
        """Insert a new line."""
        event.current_buffer.insert_text("\n")

    return kb


class Repl:
    """One chat: reads lines, runs slash commands, renders replies."""

    def __init__(
        self, app: App, console: Console, *, pt_input: Any = None, pt_output: Any = None
    ) -> None:
        self.app = app
        self.console = console
        self.printer = EventPrinter(console, show_usage=app.settings.debug_mode)
        self._pt_input, self._pt_output = pt_input, pt_output
        self._turns = 0
        # Held while a line is handled; questions from other terminals (served by this chat
        # through its socket) wait for it, so they never interleave with a reply.
        self.turn_lock = asyncio.Lock()
        # While /incognito is on: the exchanges so far, kept in memory only.
        self.incognito: list[Any] | None = None

    # --- entry points --------------------------------------------------------------------

    async def start(self) -> None:
        """Start the profile (if the runtime has not), then show a restored session."""
        restored = await self.app.start(lambda line: self.console.print(Text(line, style="yellow")))
        session = self.app.sessions.current
        turns = self.app.sessions.live_turns()
        self._turns = session.conv_count
        if restored and turns:
            self.console.print(
                f"[dim]Restored your session from {self.app.clock.fmt(session.start_ms)}:[/dim]"
            )
            for turn in turns[-6:]:
                if turn.role in ("user", "assistant") and turn.text:
                    who = "[bold]you[/bold]" if turn.role == "user" else "[bold]seelen[/bold]"
                    self.console.print(f"{who}: {shown(short(turn.text, 300))}")

    def start_mcp(self, *, warm: bool = False) -> None:
        """Offer the MCP servers' tools; a failure is reported once, in one line. `warm`
        starts every server in the background (while the user types) instead of on first use."""
        mcp = self.app.start_mcp(lambda line: self.console.print(f"[yellow]{shown(line)}[/yellow]"))
        if mcp is not None and warm:
            mcp.connect_all()

    async def wait_for_tools(self) -> None:
        """For piped input: servers whose tools are not cached yet get their handshake time
        before the first line (cached ones start when a tool of theirs is called)."""
        if self.app.mcp is not None:
            await self.app.mcp.wait_ready(self.app.settings.mcp_init_timeout + 1)

    async def run_interactive(self) -> None:
        """The prompt loop: until /exit, Ctrl-D, or Ctrl-C twice at an empty prompt."""
        from prompt_toolkit.patch_stdout import patch_stdout

        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._background_error)
        with patch_stdout(raw=True):  # background lines (MCP failures) print above the prompt
            await self._prompt_loop()

    def _background_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A failure in background work: one line, and the chat goes on (never 'press Enter')."""
        exc = context.get("exception")
        detail = f"{type(exc).__name__}: {exc}" if exc else context.get("message", "")
        self.console.print(f"[dim]background error: {shown(str(detail))}[/dim]")

    async def _prompt_loop(self) -> None:
        session = self._prompt_session()
        armed = False
        while True:
            try:
                line = await session.prompt_async("› ", set_exception_handler=False)
            except KeyboardInterrupt:
                typed = session.default_buffer.text
                if typed.strip():  # Ctrl-C clears the line; ↑ brings it back
                    session.history.append_string(typed)
                    self.console.print("[dim](line cleared: press ↑ to get it back)[/dim]")
                    armed = False
                    continue
                if armed:
                    return
                armed = True
                self.console.print("[dim](press Ctrl-C again or Ctrl-D to leave)[/dim]")
                continue
            except EOFError:
                return
            armed = False
            if not await self.handle(line):
                return

    async def run_lines(self, lines: Iterable[str]) -> None:
        """Handle lines from a pipe as if typed, slash commands included."""
        for line in lines:
            if not await self.handle(line.rstrip("\n")):
                return

    async def run_stream(self, stream: Any) -> None:
        """Like `run_lines` for a file (stdin), read in a thread: while the pipe is quiet,
        the event loop stays free to answer other terminals' questions."""
        while line := await asyncio.to_thread(stream.readline):
            if not await self.handle(line.rstrip("\n")):
                return

    # --- one line ------------------------------------------------------------------------

    def note_remote_answer(self, question: str) -> None:
        """A question from another terminal was answered in this session: say so."""
        self._turns = self.app.sessions.current.conv_count
        self.console.print(
            Text(f"(answered a question from another terminal: {short(question, 60)})", "dim")
        )

    async def handle(self, line: str) -> bool:
        """Run one typed line; False means leave the chat."""
        async with self.turn_lock:
            return await self._handle(line)

    async def _handle(self, line: str) -> bool:
        if not line.strip():
            return True
        if line.startswith("/") and not line.startswith("//"):
            name, _, arg = line.strip().partition(" ")
            cmd = COMMANDS.get(name.lower())
            if cmd is None:
                self.console.print(
                    f"[yellow]Unknown command {shown(name)}.[/yellow] Type /help for the list."
                )
                return True
            try:
                return await cmd.handler(self, arg.strip())
            except SeelenError as exc:
                self.console.print(f"[red]error:[/red] {shown(str(exc))}")
                return True
        text = line[1:] if line.startswith("//") else line  # "//x" sends "/x" literally
        try:
            if self.incognito is not None:  # nothing of it is stored, not even a session
                events = self.app.bot.turn(text, ephemeral=True, unsaved=self.incognito)
            else:
                events = self.app.bot.turn(text)
            await self.stream(events)
        except SeelenError as exc:  # e.g. a full disk: say so, and keep the chat open
            self.console.print(f"[red]error:[/red] {shown(str(exc))}")
        return True

    async def stream(self, events: AsyncIterator[Event]) -> None:
        """Render a turn; Ctrl-C stops the reply, keeps what was shown, and returns."""
        task = asyncio.ensure_future(self.printer.render(events))
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            self.console.print("[dim](stopped)[/dim]")
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
        self._turns = self.app.sessions.current.conv_count

    async def archive(self) -> None:
        """Archive the current session with a spinner and show what changed."""
        with self.console.status("archiving the session…") as status:
            result = await self.app.sessions.archive(
                lambda step: status.update(f"archiving: {step}…")
            )
        if await asyncio.to_thread(self.app.follow_language):
            self.console.print("Memory is being embedded again for your language(s)…")
        self._turns = 0
        note = " (resumed)" if result.resumed else ""
        self.console.print(f"[green]Session archived{note}.[/green] A new session begins.")
        for change in result.changes:
            if change.note:
                self.console.print(f"[yellow]{shown(change.note)}[/yellow]")
            if change.changed:
                self.console.print(f"[bold]{change.name}[/bold] changed:")
                for line in change.diff(12):
                    style = "green" if line.startswith("+") else "red"
                    self.console.print(Text(line, style=style))

    # --- prompt-toolkit ------------------------------------------------------------------

    def _prompt_session(self) -> PromptSession[str]:
        directory = self.app.settings.profile_dir
        try:
            history: Any = FileHistory(str(directory / "prompt_history"))
        except OSError:
            history = InMemoryHistory()
        return PromptSession(
            history=history,
            auto_suggest=AutoSuggestFromHistory(),
            completer=SlashCompleter(),
            complete_while_typing=True,
            multiline=True,
            key_bindings=key_bindings(),
            bottom_toolbar=self._toolbar,
            enable_open_in_editor=True,
            prompt_continuation="  ",
            input=self._pt_input,
            output=self._pt_output,
        )

    def _toolbar(self) -> str:
        s = self.app.settings
        sid = self.app.sessions.current.session_id[:8]
        indexing = self.app.index.status() if self.app.index is not None else ""
        return (
            f" {s.profile} · session {sid} · {self._turns} turns · "
            f"{self.app.provider.chat_model} · {indexing + ' · ' if indexing else ''}"
            "Alt-Enter: new line · /help"
        )
