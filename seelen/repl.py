"""The interactive chat: a prompt-toolkit session, slash commands, rich rendering of events.

Slash commands register themselves with `@command(...)`, and `/help` is generated from the
registry. Lines read from a pipe go through the same `handle()` as typed ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import Completer, Completion, WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.text import Text

from seelen.agent import (
    Done,
    Event,
    Failed,
    Notice,
    Recalled,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnUsage,
    outcome_preview,
)
from seelen.app import App
from seelen.errors import SeelenError
from seelen.manage import index_now, prepare, render_hits, render_why

Handler = Callable[["Repl", str], Awaitable[bool]]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    aliases: tuple[str, ...]
    help: str
    handler: Handler
    arg: str = ""


COMMANDS: dict[str, SlashCommand] = {}


def command(name: str, *aliases: str, help: str, arg: str = "") -> Callable[[Handler], Handler]:
    """Register a slash command; the handler returns False to leave the chat."""

    def register(handler: Handler) -> Handler:
        cmd = SlashCommand(name, aliases, help, handler, arg)
        for key in (name, *aliases):
            COMMANDS[key] = cmd
        return handler

    return register


def unique_commands() -> list[SlashCommand]:
    """Each command once, in registration order."""
    return list(dict.fromkeys(COMMANDS.values()))


class EventPrinter:
    """Renders the agent's events: Markdown live in a terminal, plain text in a pipe."""

    def __init__(self, console: Console, *, show_usage: bool = False) -> None:
        self.console = console
        self.show_usage = show_usage

    async def render(self, events: AsyncIterator[Event]) -> None:
        """Consume one turn's events; a cancelled turn keeps what was printed."""
        text = ""
        live = self._live()
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    text += event.text
                    if live is not None:
                        live.update(Markdown(text))
                    else:
                        self.console.file.write(event.text)
                        self.console.file.flush()
                    continue
                if text and not isinstance(event, (TurnUsage, Done)):
                    text = self._flush(text, live)
                    live = self._live()
                self._other(event)
        finally:
            self._flush(text, live)

    def _live(self) -> Live | None:
        if not self.console.is_terminal:
            return None
        live = Live(console=self.console, refresh_per_second=12, vertical_overflow="visible")
        live.start()
        return live

    def _flush(self, text: str, live: Live | None) -> str:
        if live is not None:
            live.stop()
        elif text and not text.endswith("\n"):
            self.console.file.write("\n")
        return ""

    def _other(self, event: Event) -> None:
        out = self.console
        if isinstance(event, Recalled):
            r = event.result
            if r.summaries or r.turns:
                out.print(
                    f"[dim]recalled {len(r.summaries)} past sessions and "
                    f"{len(r.turns)} past messages (/why)[/dim]"
                )
        elif isinstance(event, ToolStarted):
            out.print(
                f"[cyan]⚙ {escape(event.name)}[/cyan]"
                f"[dim]({escape(outcome_preview(event.arguments, 60))})[/dim]"
            )
        elif isinstance(event, ToolFinished):
            o = event.outcome
            mark = "[green]✓[/green]" if o.ok else "[red]✗[/red]"
            out.print(
                f"  {mark} [dim]{escape(o.name)} {o.seconds:.2f}s: "
                f"{escape(outcome_preview(o.content, 100))}[/dim]"
            )
        elif isinstance(event, Notice):
            out.print(f"[yellow]{escape(event.message)}[/yellow]")
        elif isinstance(event, Failed):
            out.print(f"[red]error:[/red] {escape(event.message)}")
            out.print("[dim]Your message is saved. Type /retry to try again.[/dim]")
        elif isinstance(event, TurnUsage) and self.show_usage:
            out.print(
                f"[dim]{event.prompt_tokens}+{event.completion_tokens} tokens, "
                f"{event.tool_calls} tool calls, {event.seconds:.1f}s[/dim]"
            )


class SlashCompleter(Completer):
    """Completes slash commands at the start of the line only."""

    def __init__(self) -> None:
        self._words = WordCompleter(sorted(COMMANDS), sentence=True)

    def get_completions(self, document: Document, complete_event: Any) -> Iterable[Completion]:
        if document.text_before_cursor.startswith("/") and " " not in document.text_before_cursor:
            yield from self._words.get_completions(document, complete_event)


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

    # --- entry points --------------------------------------------------------------------

    async def start(self) -> None:
        """Finish a half-done archive, then show the restored session if there is one."""
        restored = await prepare(self.app, self.console)
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
                    self.console.print(f"{who}: {escape(_short(turn.text, 300))}")

    def start_mcp(self) -> None:
        """Connect MCP servers in the background; a failure is reported once, in one line."""
        self.app.start_mcp(lambda line: self.console.print(f"[yellow]{escape(line)}[/yellow]"))

    async def wait_for_tools(self) -> None:
        """For piped input: give MCP servers their handshake time before the first line."""
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
        self.console.print(f"[dim]background error: {escape(str(detail))}[/dim]")

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

    # --- one line ------------------------------------------------------------------------

    async def handle(self, line: str) -> bool:
        """Run one typed line; False means leave the chat."""
        if not line.strip():
            return True
        if line.startswith("/") and not line.startswith("//"):
            name, _, arg = line.strip().partition(" ")
            cmd = COMMANDS.get(name.lower())
            if cmd is None:
                self.console.print(
                    f"[yellow]Unknown command {escape(name)}.[/yellow] Type /help for the list."
                )
                return True
            try:
                return await cmd.handler(self, arg.strip())
            except SeelenError as exc:
                self.console.print(f"[red]error:[/red] {escape(str(exc))}")
                return True
        text = line[1:] if line.startswith("//") else line  # "//x" sends "/x" literally
        try:
            await self.stream(self.app.bot.turn(text))
        except SeelenError as exc:  # e.g. a full disk: say so, and keep the chat open
            self.console.print(f"[red]error:[/red] {escape(str(exc))}")
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
        self._turns = 0
        note = " (resumed)" if result.resumed else ""
        self.console.print(f"[green]Session archived{note}.[/green] A new session begins.")
        for change in result.changes:
            if change.note:
                self.console.print(f"[yellow]{escape(change.note)}[/yellow]")
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
        return (
            f" {s.profile} · session {sid} · {self._turns} turns · "
            f"{self.app.provider.chat_model} · Alt-Enter: new line · /help"
        )


def _short(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


# --- slash commands ----------------------------------------------------------------------


@command("/help", "/h", help="show this list")
async def _help(repl: Repl, arg: str) -> bool:
    for cmd in unique_commands():
        names = ", ".join((cmd.name, *cmd.aliases))
        usage = f" {cmd.arg}" if cmd.arg else ""
        repl.console.print(f"  [bold]{escape(names)}[/bold]{escape(usage)}  {escape(cmd.help)}")
    repl.console.print(
        "  [dim]Alt-Enter (or Esc, Enter) inserts a new line; "
        "start a message with // to send a literal /.[/dim]"
    )
    return True


@command("/reset", "/r", help="forget the current session's turns and start it afresh")
async def _reset(repl: Repl, arg: str) -> bool:
    ids = await asyncio.to_thread(repl.app.sessions.reset)
    await asyncio.to_thread(repl.app.forget, ids)  # their vectors go too
    repl._turns = 0
    repl.console.print(f"[yellow]Session cleared ({len(ids)} turns forgotten).[/yellow]")
    return True


@command("/save", "/s", help="archive this session into long-term memory and start a new one")
async def _save(repl: Repl, arg: str) -> bool:
    await repl.archive()
    return True


@command("/saveandexit", "/sq", help="archive this session, then leave")
async def _save_and_exit(repl: Repl, arg: str) -> bool:
    await repl.archive()
    return False


@command("/exit", "/quit", "/q", help="leave; the session stays open for next time")
async def _exit(repl: Repl, arg: str) -> bool:
    return False


@command("/retry", help="answer your last message again (after an error)")
async def _retry(repl: Repl, arg: str) -> bool:
    await repl.stream(repl.app.bot.retry())
    return True


@command("/memory", "/m", help="search your long-term memory", arg="QUERY")
async def _memory(repl: Repl, arg: str) -> bool:
    if not arg:
        repl.console.print("[yellow]Usage: /memory QUERY[/yellow]")
        return True
    recall = repl.app.recall
    if recall is None:
        repl.console.print("[yellow]Recall is not available.[/yellow]")
        return True
    await asyncio.to_thread(index_now, repl.app)
    result = await asyncio.to_thread(recall.search, arg, None, conv_num=10)
    render_hits(repl.console, repl.app, result)
    return True


@command("/why", help="what was recalled for the last reply, and why")
async def _why(repl: Repl, arg: str) -> bool:
    render_why(repl.console, repl.app, repl.app.bot.last_recall)
    return True


@command("/tools", "/t", help="list the tools the model can call, and each MCP server's state")
async def _tools(repl: Repl, arg: str) -> bool:
    app = repl.app
    if app.tools_note:
        repl.console.print(f"[yellow]{escape(app.tools_note)}[/yellow]")
    if app.tools is not None:
        for spec in app.tools.tools():
            first = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
            repl.console.print(
                f"  [bold]{escape(spec.name)}[/bold] [dim]({escape(spec.source)})"
                f"[/dim] {escape(_short(first, 80))}"
            )
    if app.mcp is None:
        state = (
            "off (ENABLE_MCP=false)"
            if not app.settings.enable_mcp
            else (f"no {app.settings.mcp_servers_file} here")
        )
        repl.console.print(f"[dim]MCP servers: {escape(state)}[/dim]")
    else:
        for status in app.mcp.status():
            repl.console.print(f"  [dim]MCP[/dim] {escape(status.line())}")
    return True
