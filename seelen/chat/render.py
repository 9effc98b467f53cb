"""How stored text is shown in a terminal: as data, never as markup or terminal commands.

A pasted text can hold `[bold]`-like brackets (Rich markup) and ESC/OSC sequences (which a
terminal would obey: change the title, move the cursor, hide text). Everything a user or a
model wrote goes through `visible` before it is shown, and into a `rich.text.Text` (never a
markup string), so neither can take effect. Here: those helpers and a turn's events as they
stream; memory's tables and lists are in `seelen.chat.listings`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from rich.console import Console, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.padding import Padding
from rich.spinner import Spinner
from rich.text import Text

from seelen.chat.visible import visible
from seelen.counts import counted
from seelen.memory.context import one_line
from seelen.protocol.events import (
    Done,
    Event,
    Failed,
    KnowledgeUsed,
    Notice,
    Recalled,
    TextDelta,
    ToolFinished,
    ToolProgressed,
    ToolStarted,
    TurnUsage,
)


def outcome_preview(text: str, limit: int = 80) -> str:
    """A one-line preview of a tool's arguments or result."""
    line = " ".join(text.split())
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict):
            line = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        pass
    return one_line(line, limit)


def shown(text: str) -> str:
    """Stored text for a Rich markup string: control characters made visible, brackets
    escaped (for the places that still assemble markup strings)."""
    from rich.markup import escape

    return escape(visible(text))


def print_unpadded(console: Console, renderable: RenderableType, indent: int = 0) -> None:
    """Print a table or a block, `indent` columns in (its wrapped lines too); in a pipe or a
    file, each line without the spaces that pad it to the width (a terminal shows them as
    nothing; a pipe would keep them)."""
    if indent:
        renderable = Padding(renderable, (0, 0, 0, indent))
    if console.is_terminal:
        console.print(renderable)
        return
    for line in console.render_lines(renderable, pad=False, new_lines=False):
        text = Text()
        for segment in line:
            if not segment.control:
                text.append(segment.text, segment.style)
        text.rstrip()
        console.print(text)


# --- a turn's events, as they stream ---------------------------------------------------


def _working(label: str) -> Spinner:
    """The live region while no words show: "thinking…", or a running tool's progress."""
    return Spinner("dots", Text(label, style="dim"), style="dim")


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
                        live.update(Markdown(visible(text)))
                    else:
                        self.console.file.write(visible(event.text))
                        self.console.file.flush()
                    continue
                if isinstance(event, ToolProgressed):  # a terminal shows it in the live region
                    if live is not None:
                        live.update(_working(visible(event.line())), refresh=True)
                    continue
                if text and not isinstance(event, (TurnUsage, Done)):
                    text = self._flush(text, live)
                    live = self._live()
                elif live is not None and isinstance(event, ToolFinished):
                    live.update(_working("thinking…"))  # the tool's progress line goes
                self._other(event)
        finally:
            self._flush(text, live)

    def _live(self) -> Live | None:
        """In a terminal: a live region that says Seelen is thinking until words arrive."""
        if not self.console.is_terminal:
            return None
        live = Live(
            _working("thinking…"),
            console=self.console,
            refresh_per_second=12,
            vertical_overflow="visible",
        )
        live.start()
        return live

    def _flush(self, text: str, live: Live | None) -> str:
        if live is not None:
            if not text:  # no words came (a tool call, an error): the spinner just goes
                live.update(Text(""))
            live.stop()
        elif text and not text.endswith("\n"):
            self.console.file.write("\n")
        return ""

    def _other(self, event: Event) -> None:
        out = self.console
        if isinstance(event, Recalled):
            if event.sessions or event.messages:
                out.print(
                    f"[dim]recalled {counted(event.sessions, 'past session')} and "
                    f"{counted(event.messages, 'past message')} (/why)[/dim]"
                )
        elif isinstance(event, ToolStarted):
            out.print(
                f"[cyan]⚙ {shown(event.name)}[/cyan]"
                f"[dim]({shown(outcome_preview(event.arguments, 60))})[/dim]"
            )
        elif isinstance(event, ToolFinished):
            mark = "[green]✓[/green]" if event.ok else "[red]✗[/red]"
            out.print(
                f"  {mark} [dim]{shown(event.name)} {event.seconds:.2f}s: "
                f"{shown(outcome_preview(event.content, 100))}[/dim]"
            )
        elif isinstance(event, KnowledgeUsed):
            out.print(Text(visible(event.line()), style="dim"))
        elif isinstance(event, Notice):
            out.print(f"[yellow]{shown(event.message)}[/yellow]")
        elif isinstance(event, Failed):
            out.print(f"[red]error:[/red] {shown(event.message)}")
            out.print("[dim]Your message is saved. Type /retry to try again.[/dim]")
        elif isinstance(event, TurnUsage) and self.show_usage:
            out.print(
                f"[dim]{event.prompt_tokens}+{event.completion_tokens} tokens, "
                f"{counted(event.tool_calls, 'tool call')}, {event.seconds:.1f}s[/dim]"
            )
