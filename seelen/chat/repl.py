"""The interactive chat: a prompt-toolkit session that reads lines and hands them on.

Slash commands live in `seelen.chat.slash`, rendering in `seelen.chat.render`. Lines read
from a pipe go through the same `handle()` as typed ones.

In a terminal the prompt comes first (`run_terminal`): the profile opens behind it, its
start-up lines print above the prompt, and a line sent meanwhile waits for it (in the
prompt's history at once, stored the moment the profile is open). This module imports only
prompt-toolkit and rich; the runtime and the renderer load after the first draw.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
from collections.abc import AsyncIterator, Callable, Iterable
from typing import IO, TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from rich.console import Console
from rich.text import Text

from seelen.chat.archiving import ChatArchives
from seelen.chat.input import above_prompt, keys_unechoed, prompt_session, read_lines
from seelen.chat.outcomes import COMMAND, LOST, UNANSWERED, LineTally, stopped_line
from seelen.chat.slash import COMMANDS, unknown
from seelen.chat.visible import visible
from seelen.chat.welcome import WELCOME, model_hints
from seelen.config import Settings
from seelen.counts import counted
from seelen.errors import SeelenError

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from seelen.app import App
    from seelen.chat.render import EventPrinter
    from seelen.models.nearby import NearbyServers
    from seelen.protocol.events import Event
    from seelen.service import ProfileService


def _shown(text: str) -> str:
    """`render.shown`, loaded on first use (the renderer imports the agent)."""
    from seelen.chat.render import shown

    return shown(text)


def _short(text: str, limit: int) -> str:
    """`context.one_line`, loaded on first use."""
    from seelen.memory.context import one_line

    return one_line(text, limit)


class Repl:
    """One chat: reads lines, runs slash commands, renders replies.

    Given no `app`, the chat opens the profile itself behind its prompt (`run_terminal`).
    """

    def __init__(
        self,
        app: App | None,
        console: Console,
        *,
        settings: Settings | None = None,
        pt_input: Input | None = None,
        pt_output: Output | None = None,
        errors: Console | None = None,
        nearby: NearbyServers | None = None,
    ) -> None:
        self._app: App | None = None
        self._service: ProfileService | None = None
        self._nearby = nearby  # servers on this machine to tell of, once (`tell_nearby`)
        if settings is None:
            assert app is not None, "a Repl needs an app or settings"
            settings = app.settings
        self.settings = settings
        self.console = console
        # Where a line's failure is said: stderr for piped input, whose stdout is the replies.
        self.errors = errors or console
        self._outcome = ""  # how the line being handled failed, if it did (`outcomes`)
        self.printer: EventPrinter | None = None
        self._pt_input, self._pt_output = pt_input, pt_output
        self._turns = 0
        self._session: PromptSession[str] | None = None
        self._opening: asyncio.Task[None] | None = None
        self._locked = False  # the opening holds the profile's lock: let it finish
        # Held while a line is handled; questions from other terminals (served by this chat
        # through its socket) wait for it, so they never interleave with a reply.
        self.turn_lock = asyncio.Lock()
        # While /incognito is on: the exchanges so far, kept in memory only.
        self.incognito: list[Any] | None = None
        # At a prompt, /save archives behind it (`save`), one archive after another.
        self._interactive = False
        self.archiving = ChatArchives(console, lambda: self.app)
        if app is not None:
            self._attach(app)

    @property
    def app(self) -> App:
        """The opened profile. Lines wait for it (`handle`), so commands always have it."""
        assert self._app is not None, "the profile is still opening"
        return self._app

    @property
    def service(self) -> ProfileService:
        """The opened profile's interface (its turns take this chat's `turn_lock`)."""
        assert self._service is not None, "the profile is still opening"
        return self._service

    def _attach(self, app: App) -> None:
        from seelen.chat.render import EventPrinter
        from seelen.service import ProfileService

        self._app = app
        self._service = ProfileService(app, turn_lock=self.turn_lock)
        self.printer = EventPrinter(self.console, show_usage=app.settings.debug_mode)

    # --- entry points --------------------------------------------------------------------

    async def start(self) -> None:
        """Start the profile (if the runtime has not), then show a restored session."""
        self.show_start(await self.app.start(self._say))

    def _say(self, line: str) -> None:
        """A start-up line (restoring, waiting for the lock, re-indexing)."""
        self.console.print(Text(line, style="yellow"))

    def show_start(self, restored: bool) -> None:
        """Show the end of a restored session, so the chat picks up where it was."""
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
                    self.console.print(f"{who}: {_shown(_short(turn.text, 300))}")

    async def tell_nearby(self) -> None:
        """On the bundled model for want of settings: how to chat with a better one."""
        for line in await model_hints(self._nearby):
            self.console.print(line)

    def start_mcp(self, *, warm: bool = False) -> None:
        """Offer the MCP servers' tools; a failure is reported once, in one line. `warm`
        starts every server in the background (while the user types) instead of on first use."""
        mcp = self.app.start_mcp(lambda line: self.console.print(Text(line, style="yellow")))
        if mcp is not None and warm:
            mcp.connect_all()

    async def wait_for_tools(self) -> None:
        """For piped input: servers whose tools are not cached yet get their handshake time
        before the first line (cached ones start when a tool of theirs is called)."""
        if self.app.mcp is not None:
            await self.app.mcp.wait_handshakes()

    async def run_terminal(self) -> None:
        """The chat in a terminal: the prompt at once, the profile opening behind it (its
        start-up lines print above the prompt); closes the profile at the end."""
        self.console.print(WELCOME)
        async with contextlib.AsyncExitStack() as stack:
            try:
                await self.run_interactive(on_shown=lambda: self._open_behind(stack))
            finally:
                await self._end_opening()

    def _open_behind(self, stack: contextlib.AsyncExitStack) -> None:
        """Start opening the profile (after the prompt's first draw)."""
        if self._opening is None:
            self._opening = asyncio.create_task(self._open(stack))
            self._opening.add_done_callback(self._opened)

    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        # The runtime (numpy, SQLite, the agent) and the renderer (markdown, the listings):
        # ~0.3 s of imports, made in a thread while the prompt is already shown and takes keys.
        runtime_module, _ = await asyncio.to_thread(
            lambda: [importlib.import_module(m) for m in ("seelen.runtime", "seelen.chat.listings")]
        )
        app: App = await runtime_module.open_writer(
            self.settings, role="chat", on_line=self._say, on_locked=self._lock_taken
        )
        stack.push_async_callback(app.aclose)
        self._attach(app)
        if app.recall is not None:  # a line sent at once does not wait for vectors
            app.recall.wait_for_warm = False
        from seelen.owner.host import serve_chat

        await stack.enter_async_context(
            serve_chat(self.service, self.note_remote_answer, on_draining=self._say_draining)
        )
        app.closing = self._say_closing
        self.show_start(bool(app.restored))
        await self.tell_nearby()
        self.start_mcp(warm=True)  # a terminal: servers start while the user types
        app.bot.keep_prompt_warm()  # and a local model reads the prompt's beginning
        if self._session is not None:
            self._session.app.invalidate()  # the toolbar now has the session

    def _say_closing(self, line: str) -> None:
        """A step of closing that may take a while, said before it starts."""
        self.console.print(Text(line, style="dim"))

    def _say_draining(self, questions: int) -> None:
        """Leaving while questions from other terminals are taken: say so before the wait."""
        many = f"{counted(questions, 'question')} from other terminals"
        asked = many if questions > 1 else "a question from another terminal"
        self._say_closing(f"finishing the answer to {asked}…")

    def _lock_taken(self) -> None:
        self._locked = True

    def _opened(self, task: asyncio.Task[None]) -> None:
        """A profile that cannot open ends the chat at once, with its one-line error."""
        error = None if task.cancelled() else task.exception()
        if error is None or self._session is None:
            return
        if self._session.app.is_running:
            self._session.app.exit(exception=error)

    async def _end_opening(self) -> None:
        """Leaving while the profile opens: stop waiting for another process's lock, but let
        an opening that holds the lock finish (it may be finishing an archive)."""
        if self._opening is None:
            return
        if not self._opening.done() and not self._locked:
            self._opening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._opening

    async def _wait_until_open(self, line: str) -> bool:
        """A line sent while the profile opens waits for it; False: leave without waiting."""
        if self._app is not None or self._opening is None:
            return True
        if COMMANDS.get(line.strip().lower()) is COMMANDS["/exit"]:
            return False  # /exit (or an alias) needs nothing from the profile
        if not self._opening.done():
            self.console.print(Text("(opening your memory: the answer follows)", "dim"))
        await asyncio.shield(self._opening)
        return True

    async def run_interactive(self, on_shown: Callable[[], None] | None = None) -> None:
        """The prompt loop: until /exit, Ctrl-D, or Ctrl-C twice at an empty prompt.
        `on_shown` runs once, right after the prompt's first draw."""
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._background_error)
        self._interactive = True
        with above_prompt():  # background lines (MCP failures) print above the prompt
            try:
                await self._prompt_loop(on_shown)
            finally:
                await self.archiving.finish()

    def _background_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A failure in background work: one line, and the chat goes on (never 'press Enter')."""
        exc = context.get("exception")
        detail = f"{type(exc).__name__}: {exc}" if exc else context.get("message", "")
        self.console.print(f"[dim]background error: {_shown(str(detail))}[/dim]")

    async def _prompt_loop(self, on_shown: Callable[[], None] | None = None) -> None:
        self._session = self._prompt_session()
        await read_lines(self._session, self.handle, self.console.print, on_shown)

    async def run_lines(self, lines: Iterable[str]) -> None:
        """Handle lines from a pipe as if typed, slash commands included."""
        for line in lines:
            if not await self.handle(line.rstrip("\n")):
                return

    async def run_stream(self, stream: IO[str]) -> None:
        """Like `run_lines` for a file (stdin), read in a thread: while the pipe is quiet,
        the event loop stays free to answer other terminals' questions. Lines that failed
        (a full disk) are named at the end in one SeelenError, each as it fared: its message
        kept without its reply, not kept, or a command that failed."""
        tally = LineTally()
        while line := await asyncio.to_thread(stream.readline):
            going_on = await self.handle(line.rstrip("\n"))
            tally.note(self._outcome)
            if not going_on:
                break
        if failed := tally.sentence():
            raise SeelenError(failed)

    # --- one line ------------------------------------------------------------------------

    def note_remote_answer(self, question: str) -> None:
        """A question from another terminal was answered in this session: say so."""
        self._turns = self.app.sessions.current.conv_count
        said = f"(answered a question from another terminal: {_short(question, 60)})"
        self.console.print(Text(said, "dim"))

    async def handle(self, line: str) -> bool:
        """Run one typed line; False means leave the chat."""
        self._outcome = ""
        if not await self._wait_until_open(line):
            return False
        async with self.turn_lock:
            return await self._handle(line)

    def _error(self, exc: SeelenError, outcome: str) -> None:
        """A line failed (`outcome`, see `outcomes`): one line on the error console; the chat
        goes on."""
        self._outcome = outcome
        kept = "; your message is kept: /retry answers it" if outcome == UNANSWERED else ""
        self.errors.print(f"[red]error:[/red] {_shown(str(exc))}{kept}", soft_wrap=True)

    async def _handle(self, line: str) -> bool:
        if not line.strip():
            return True
        if line.startswith("/") and not line.startswith("//"):
            name, _, arg = line.strip().partition(" ")
            cmd = COMMANDS.get(name.lower())
            # Not run: an unknown name, or words after a command taking none ("/reset it")
            refusal = unknown(name) if cmd is None else cmd.refusal(arg)
            if cmd is None or refusal:
                self.console.print(Text(visible(refusal), "yellow"))
                return True
            try:
                return await cmd.handler(self, arg.strip())
            except SeelenError as exc:
                self._error(exc, COMMAND)
                return True
        text = line[1:] if line.startswith("//") else line  # "//x" sends "/x" literally
        said = self.app.sessions.current.conv_count  # one more once the message is stored
        try:
            if self.incognito is not None:  # nothing of it is stored, not even a session
                events = self.service.ask(text, ephemeral=True, unsaved=self.incognito)
            else:
                events = self.service.ask(text)
            await self.stream(events)
        except SeelenError as exc:  # e.g. a full disk: say so, and keep the chat open
            stored = self.incognito is None and self.app.sessions.current.conv_count > said
            self._error(exc, UNANSWERED if stored else LOST)
        return True

    async def stream(self, events: AsyncIterator[Event]) -> None:
        """Render a turn; Ctrl-C stops the reply, keeps what was shown, and returns."""
        assert self.printer is not None, "a turn streams once the profile is open"
        task = asyncio.ensure_future(self.printer.render(events))
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            with keys_unechoed():
                await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            newest = next(reversed(self.app.sessions.live_turns()), None)
            said = stopped_line(newest, incognito=self.incognito is not None)
            self.console.print(Text(said, "dim"))
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
        self._turns = self.app.sessions.current.conv_count

    async def save(self) -> None:
        """`/save`. At the prompt the new session opens at once and the old one is archived
        behind it (said when done); elsewhere (a pipe, `seelen save`) the archive runs to its
        end first."""
        if self._interactive:
            await self.archiving.behind()
        else:
            await self.archiving.now()
        self._turns = 0

    async def archive(self) -> None:
        """Archive the current session with a spinner and show what changed."""
        await self.archiving.now()
        self._turns = 0

    # --- prompt-toolkit ------------------------------------------------------------------

    def _prompt_session(self) -> PromptSession[str]:
        hidden = lambda: self.incognito is not None  # noqa: E731 (incognito: not on disk)
        return prompt_session(self.settings, self._toolbar, self._pt_input, self._pt_output, hidden)

    def _toolbar(self) -> list[tuple[str, int]]:
        """The bottom line's parts and their ranks (`input.fitted` drops the highest first)."""
        s, hint = self.settings, [("Alt-Enter: new line", 4), ("/help", 1)]
        if self._app is None:
            return [(f" {s.profile}", 0), ("opening your memory…", 0), *hint]
        indexing = self.app.index.status() if self.app.index is not None else ""
        if self.archiving.running:
            indexing = f"archiving the last session…{' · ' + indexing if indexing else ''}"
        sid, model = self.app.sessions.current.session_id[:8], self.app.provider.chat_model
        parts = (f" {s.profile}", f"session {sid}", counted(self._turns, "turn"), model, indexing)
        return [*zip(parts, (0, 3, 2, 3, 1), strict=True), *hint]
