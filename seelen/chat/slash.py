"""Slash commands of the chat: each registers itself with `@command(...)`, and `/help` is
generated from the registry (in the spirit of litecli's special commands)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, WordCompleter
from prompt_toolkit.document import Document
from rich.text import Text

from seelen.counts import counted

# The renderer and the runtime are imported by the handlers that use them: the prompt
# (which needs the command names) shows before they are loaded (see repl.py).
if TYPE_CHECKING:
    from seelen.chat.repl import Repl

Handler = Callable[["Repl", str], Awaitable[bool]]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    aliases: tuple[str, ...]
    help: str
    handler: Handler
    arg: str = ""

    def refusal(self, arg: str) -> str:
        """Why the command is not run with `arg` ("" when it is): words after a command that
        takes none would be dropped unread."""
        if arg.strip() and not self.arg:
            return f"{self.name} takes nothing after it: nothing done (// sends a line as text)"
        return ""


COMMANDS: dict[str, SlashCommand] = {}
# The widest names ("/knowledge, /k QUERY", 20) and a 2-space gap leave a description 28
# columns at 50: four or five words a line. Narrower, /help puts each under its names.
HELP_STACKED_UNDER = 50


def command(name: str, *aliases: str, help: str, arg: str = "") -> Callable[[Handler], Handler]:
    """Register a slash command; the handler returns False to leave the chat."""

    def register(handler: Handler) -> Handler:
        cmd = SlashCommand(name, aliases, help, handler, arg)
        for key in (name, *aliases):
            COMMANDS[key] = cmd
        return handler

    return register


# What a newcomer types from other chat programs, and the command here that does it.
_ELSEWHERE = {"/forget": "/reset", "/clear": "/reset", "/new": "/save", "/search": "/memory"}


def unknown(name: str) -> str:
    """What to say of a command that does not exist: the one meant when the name is close to
    one (a typo, or another program's name for it), else where the list is. The line stays
    in the input history (↑), so nothing typed is lost."""
    import difflib

    meant = _ELSEWHERE.get(name.lower()) or next(
        iter(difflib.get_close_matches(name.lower(), COMMANDS, n=1, cutoff=0.6)), None
    )
    if meant is None:
        return f"Unknown command {name}: /help lists them (↑ brings your line back)."
    return f"Unknown command {name}: did you mean {meant}? (↑ brings your line back)"


def unique_commands() -> list[SlashCommand]:
    """Each command once, in registration order."""
    return list(dict.fromkeys(COMMANDS.values()))


class SlashCompleter(Completer):
    """Completes slash commands at the start of the line only."""

    def __init__(self) -> None:
        self._words = WordCompleter(sorted(COMMANDS), sentence=True)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        if document.text_before_cursor.startswith("/") and " " not in document.text_before_cursor:
            yield from self._words.get_completions(document, complete_event)


# --- slash commands ----------------------------------------------------------------------


@command("/help", "/h", help="show this list")
async def _help(repl: Repl, arg: str) -> bool:
    from rich.table import Table

    from seelen.chat.render import print_unpadded

    # A grid: each description in one column, wrapped within it; in a terminal too narrow
    # for that column, each description goes under its command's names.
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    stacked = repl.console.width < HELP_STACKED_UNDER
    for cmd in unique_commands():
        names = Text.assemble((", ".join((cmd.name, *cmd.aliases)), "bold"))
        if cmd.arg:
            names.append(f" {cmd.arg}")
        if stacked:
            print_unpadded(repl.console, names, indent=2)
            print_unpadded(repl.console, Text(cmd.help), indent=4)
        else:
            grid.add_row(names, cmd.help)
    if not stacked:
        print_unpadded(repl.console, grid, indent=2)
    keys = (
        "Alt-Enter (or Esc, Enter) inserts a new line; start a message with // to send a literal /."
    )
    print_unpadded(repl.console, Text(keys, "dim"), indent=2)  # indented whole
    return True


# No one-letter alias: /reset deletes for good, and "/r" is what a hand types for /retry.
@command("/reset", help="forget the current session's turns for good and start it afresh")
async def _reset(repl: Repl, arg: str) -> bool:
    ids = await asyncio.to_thread(repl.app.sessions.reset)
    await asyncio.to_thread(repl.app.forget, ids)  # their vectors go too
    repl._turns = 0
    repl.console.print(f"[yellow]Session cleared ({counted(len(ids), 'turn')} forgotten).[/yellow]")
    return True


@command("/save", "/s", help="archive this session into long-term memory and start a new one")
async def _save(repl: Repl, arg: str) -> bool:
    if not repl.app.sessions.current.conv_count:  # "archived" would be said of nothing
        repl.console.print("[dim]Nothing to save yet: this session has no messages.[/dim]")
        return True
    await repl.save()
    return True


@command("/saveandexit", "/sq", help="archive this session, then leave")
async def _save_and_exit(repl: Repl, arg: str) -> bool:
    await repl.save()  # leaving waits for the archive
    return False


@command("/exit", "/quit", "/q", help="leave; the session stays open for next time")
async def _exit(repl: Repl, arg: str) -> bool:
    return False


@command("/retry", help="answer your last message again (after an error)")
async def _retry(repl: Repl, arg: str) -> bool:
    await repl.stream(repl.service.retry())
    return True


@command("/memory", "/m", help="search your long-term memory", arg="QUERY")
async def _memory(repl: Repl, arg: str) -> bool:
    from seelen.chat.listings import render_hits

    if not arg:
        repl.console.print("[yellow]Usage: /memory QUERY[/yellow]")
        return True
    from seelen.protocol.calls import Search

    await asyncio.to_thread(repl.app.index_pending)  # the newest turns are found too
    result = await asyncio.to_thread(repl.service.search, Search(query=arg, limit=10))
    render_hits(repl.console, result, 10)
    return True


@command("/why", help="what was recalled for the last reply, and why")
async def _why(repl: Repl, arg: str) -> bool:
    from seelen.chat.listings import render_why

    render_why(repl.console, repl.app, repl.service.last_recall)
    return True


@command("/tools", "/t", help="list the tools the model can call, and each MCP server's state")
async def _tools(repl: Repl, arg: str) -> bool:
    from seelen.chat.render import print_unpadded, shown
    from seelen.chat.visible import visible
    from seelen.memory.context import one_line

    app = repl.app
    if app.tools_note:
        repl.console.print(f"[yellow]{shown(app.tools_note)}[/yellow]")
    if app.tools is not None:
        for spec in app.tools.tools():
            first = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
            line = Text.assemble(
                (visible(spec.name), "bold"), (f" ({visible(spec.source)}) ", "dim")
            ).append(visible(one_line(first, 80)))
            print_unpadded(repl.console, line, indent=2)  # wrapped lines too
    if app.mcp is None:
        state = (
            "off (ENABLE_MCP=false)"
            if not app.settings.enable_mcp
            else "none: no mcp_servers.json in this folder (MCP_SERVERS_FILE names one)"
        )
        repl.console.print(f"[dim]MCP servers: {shown(state)}[/dim]")
    else:
        for status in app.mcp.status():
            repl.console.print(f"  [dim]MCP[/dim] {shown(status.line())}")
    return True


@command("/files", help="the notes the last reply used (file › heading)")
async def _files(repl: Repl, arg: str) -> bool:
    from seelen.chat.visible import visible

    passages = repl.app.bot.last_passages
    if not passages:
        repl.console.print("[dim]The last reply used no notes.[/dim]")
    for passage in passages:
        repl.console.print(Text.assemble(("  ", ""), (visible(passage.label()), "bold")))
    return True


@command("/knowledge", "/k", help="search your knowledge folders by hand", arg="QUERY")
async def _knowledge(repl: Repl, arg: str) -> bool:
    from seelen.chat.listings import render_passages

    knowledge = repl.app.knowledge
    if not arg:  # what it does first: "No knowledge folder" alone taught nothing
        repl.console.print(
            "[yellow]Usage: /knowledge QUERY: search the notes of your knowledge folders by "
            "hand[/yellow]"
        )
    if knowledge is None:  # a chat opens the folders once, as it starts
        repl.console.print(
            "[yellow]No folder yet: add one with `seelen knowledge add PATH` and reopen the "
            "chat.[/yellow]"
        )
    if knowledge is None or not arg:
        return True
    if knowledge.problem:
        repl.console.print(Text(knowledge.problem, style="yellow"))
    found = await asyncio.to_thread(knowledge.search, arg, repl.app.bot.context_tokens // 4)
    if not found:
        repl.console.print("[dim]No note matches.[/dim]")
    render_passages(repl.console, found)
    return True


@command("/incognito", "/i", help="talk without keeping anything; /incognito again to stop")
async def _incognito(repl: Repl, arg: str) -> bool:
    if repl.incognito is None:
        repl.incognito = []
        repl.console.print(
            Text(
                "Incognito: nothing you say now is saved or remembered. /incognito to stop.",
                "yellow",
            )
        )
    else:
        n = len([t for t in repl.incognito if t.role == "user"])
        repl.incognito = None
        repl.console.print(Text(f"Incognito off: {counted(n, 'message')} forgotten.", "yellow"))
    return True
