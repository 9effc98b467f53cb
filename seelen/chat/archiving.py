"""`/save` in the chat: the session archived, behind the prompt or to its end, and what the
archive changed in the persona and profile, said when it is done."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from seelen.errors import SeelenError

if TYPE_CHECKING:
    from seelen.app import App
    from seelen.memory.sessions import ArchiveResult
    from seelen.store import Session


class ChatArchives:
    """The chat's archives, one after another, each outside the turn lock: the old session
    is no longer the one that turns write to."""

    def __init__(self, console: Console, app: Callable[[], App]) -> None:
        self.console = console
        self._app = app  # the opened profile, asked for when an archive starts
        self.task: asyncio.Task[None] | None = None  # the archive running behind the prompt

    @property
    def running(self) -> bool:
        """Whether an archive runs behind the prompt now (no I/O)."""
        return self.task is not None and not self.task.done()

    async def behind(self) -> None:
        """At the prompt: the new session opens at once, the old one is archived behind it
        (said when done)."""
        old = await self._app().sessions.begin_archive()
        self.console.print(
            "[green]A new session begins.[/green] "
            "[dim]The last one is archived in the background; go on.[/dim]"
        )
        self.task = asyncio.create_task(self._archive_behind(old, self.task))

    async def _archive_behind(self, session: Session, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # its own failure was said already
        try:
            result = await self._app().sessions.finish_archive(session)
        except SeelenError as exc:
            reason = f"The last session is not archived yet ({exc}); the next start does it."
            self.console.print(Text(reason, style="yellow"))
            return
        await self._show(result, "The last session is archived")

    async def finish(self) -> None:
        """Leaving while an archive runs: wait for it. Ctrl-C leaves at once; the archive's
        steps are recorded, and the next start finishes it."""
        if not self.running:
            return
        self.console.print(
            "[dim]Finishing the archive of the last session… "
            "(Ctrl-C leaves now; the next start finishes it)[/dim]"
        )
        assert self.task is not None
        await self.task

    async def now(self) -> None:
        """Archive the current session to its end, with a spinner, and show what changed."""
        with self.console.status("archiving the session…") as status:
            result = await self._app().sessions.archive(
                lambda step: status.update(f"archiving: {step}…")
            )
        await self._show(result, "Session archived", " A new session begins.")

    async def _show(self, result: ArchiveResult, headline: str, then: str = "") -> None:
        """Say that an archive is done, and what it changed in the persona and profile."""
        from seelen.chat.render import shown

        if await asyncio.to_thread(self._app().follow_language):
            self.console.print("Memory is being embedded again for your language(s)…")
        note = " (resumed)" if result.resumed else ""
        self.console.print(f"[green]{headline}{note}.[/green]{then}")
        noted: set[str] = set()
        for change in result.changes:
            if change.note and change.note not in noted:  # a note on both files: once
                noted.add(change.note)
                self.console.print(f"[yellow]{shown(change.note)}[/yellow]")
            if change.changed:
                self.console.print(f"[bold]{change.name}[/bold] changed:")
                for line in change.diff(12):
                    style = "green" if line.startswith("+") else "red"
                    self.console.print(Text(line, style=style))
