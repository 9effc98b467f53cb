"""`seelen import`: Seelen's own export, or another assistant's history (ChatGPT, Claude, llm).

The file goes to the process that holds the profile (an open chat, the warm owner, or an
owner started for it), which reads and recognises it before writing anything, so a file
that is not an export changes nothing, and an open chat never has to close for it. Its
conversations are written in batches (a progress bar on stderr): keyword search finds them as
soon as this returns. Their vectors follow in that process while the user goes on (`seelen
db stats` counts what is left), or with `--wait` before this returns, with a second bar.
Where no owner can run (SEELEN_OWNER=false), all of it happens in this process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from seelen.counts import counted
from seelen.errors import SeelenError
from seelen.memory.imports.conversation import HistoryError
from seelen.memory.imports.source import Export, read_export

if TYPE_CHECKING:
    from rich.console import Console

    from seelen.app import App
    from seelen.config import Settings


def read(source: str | None, fmt: str | None) -> Export:
    """Read and recognise the file (llm's logs.db where llm keeps it, for `--from llm`)."""
    if source is None and fmt != "llm":
        raise SeelenError("import: give a FILE (or - for standard input)")
    try:
        return read_export(source or "", fmt)
    except HistoryError as exc:
        raise HistoryError(f"import: {exc}") from None


# What Ctrl-C during an import through the owner says: the owner goes on with a request it
# took (one transaction: all of it or nothing), and an import is never written twice.
STOPPED_WAITING = (
    "seelen: stopped waiting; the background process finishes an import it had begun "
    "(`seelen db stats` shows it; importing the file again adds only what is missing)"
)
# What Ctrl-C during `--wait`'s embedding bar says: the import is done, the owner embeds on.
STOPPED_WAITING_FOR_VECTORS = (
    "seelen: stopped waiting; every text is imported and keyword search finds it; the "
    "background process goes on embedding them (`seelen db stats` says how far it is)"
)
# How often `--wait` asks the owner how many texts still wait for their vectors.
WAIT_POLL_SECONDS = 0.5


def through_owner(settings: Settings, path: str, fmt: str | None, *, wait: bool) -> bool:
    """Import the file at `path` through the process that holds the profile; False when no
    owner can run here (the caller imports in this process). Raises SeelenError with the
    owner's one line when the file is not an export."""
    from seelen.cli.common import bar_on_first_use, stderr_console
    from seelen.cli.data import said_when_stopped
    from seelen.client.exchange import import_file
    from seelen.protocol.events import Failed

    console = stderr_console()
    try:
        with bar_on_first_use(console, "importing") as progress:
            final = import_file(
                settings,
                path,
                fmt,
                on_progress=lambda p: progress(p.done, p.total),
                on_wait=lambda line: console.print(line, style="dim", markup=False),
            )
    except KeyboardInterrupt:  # the owner does not stop: say so, or the user thinks it did
        console.print(STOPPED_WAITING, markup=False)
        raise typer.Exit(130) from None
    if final is None:
        return False
    if isinstance(final, Failed):
        raise SeelenError(final.message)
    if not final.turns:
        console.print(final.line, markup=False)
        return True
    console.print(final.line + " Keyword search finds them now.", markup=False)
    if wait:
        with said_when_stopped(console, STOPPED_WAITING_FOR_VECTORS):
            _wait_for_vectors(settings, console, final.unindexed)
        console.print("Every imported text is embedded: search by meaning finds them too.")
    else:
        console.print(
            "Their vectors are made in the background; `seelen db stats` says how far it is.",
            markup=False,
        )
    return True


@contextlib.contextmanager
def readable_path(settings: Settings, source: str | None, fmt: str | None) -> Iterator[str]:
    """FILE as an absolute path the owner can read: standard input spooled to a private
    file (removed afterwards), llm's own logs.db without FILE."""
    if source is None and fmt != "llm":
        import typer

        raise typer.BadParameter("give a FILE (or - for standard input)", param_hint="FILE")
    if source is None:
        from seelen.memory.imports.llm_logs import default_path

        yield str(default_path())
        return
    if source != "-":
        yield str(Path(source).absolute())
        return
    from seelen.files import private_dir

    # In the profile folder (private), or the system's while there is none: a profile
    # starts only with an export that is read well.
    folder = private_dir(settings.profile_dir) if settings.profile_dir.is_dir() else None
    fd, name = tempfile.mkstemp(prefix="import-", suffix=".stdin", dir=folder)  # born 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as spool:
            for chunk in iter(lambda: sys.stdin.read(1 << 20), ""):
                spool.write(chunk)
        yield name
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _wait_for_vectors(settings: Settings, console: Console, total: int) -> None:
    """`--wait`: a bar until the owner has embedded every text (asked twice a second)."""
    from seelen.cli.common import progress_bar
    from seelen.client.exchange import call
    from seelen.protocol.calls import GetIndexState
    from seelen.protocol.results import IndexState

    with progress_bar(console, "embedding", total) as progress:
        while True:
            state = call(settings, GetIndexState())
            if not isinstance(state, IndexState):
                raise SeelenError(f"import: {getattr(state, 'message', state.TAG)}")
            if state.error:
                raise SeelenError(f"import: embedding stopped ({state.error})")
            progress(max(total - state.unindexed, 0), max(total, state.unindexed))
            if not state.unindexed:
                return
            time.sleep(WAIT_POLL_SECONDS)


def import_history(app: App, export: Export, console: Console, *, embed: bool = True) -> str:
    """Write the export's conversations into the app's profile, then (unless `embed` is
    False) embed them with a progress bar; returns the line saying what was added."""
    from seelen.cli.common import progress_bar
    from seelen.memory.imports.writer import write_history

    with progress_bar(console, "importing", export.conversations.messages) as progress:
        report = write_history(app.store, export.conversations, app.clock, progress)
    line = report.describe()
    if not report.turns:
        return line
    from seelen.cli.data import index_with_progress, stored_when_stopped

    with stored_when_stopped(console):
        console.print(line + " Keyword search finds them now.", markup=False)
        app.follow_language()
        if embed and app.index is not None and app.index.behind():
            index_with_progress(app, console)
            return "Every imported text is embedded: search by meaning finds them too."
    return "Their vectors are made in the background; `seelen db stats` says how far it is."


async def import_summarized(settings: Settings, export: Export, *, ask: bool) -> None:
    """`--summarize`: import, then have the tool model summarise the imported sessions,
    after saying what that costs (and, when `ask`, asking whether to go on)."""
    import asyncio

    from seelen.cli.common import stderr_console
    from seelen.runtime import open_writer

    console = stderr_console()
    app = await open_writer(
        settings,
        role="import",
        on_line=lambda m: console.print(m, style="dim", markup=False),
        start_indexer=False,
        finish_archives=False,
    )
    try:
        line = await asyncio.to_thread(import_history, app, export, console)
        console.print(line, markup=False)
        await _summarize(app, export, console, ask=ask)
    finally:
        await app.aclose()


async def _summarize(app: App, export: Export, console: Console, *, ask: bool) -> None:
    import asyncio

    import typer

    from seelen.cli.common import progress_bar
    from seelen.memory.imports.summaries import estimate, summarize_all

    cost = await asyncio.to_thread(estimate, app.sessions, export.conversations)
    if not cost.session_ids:
        console.print("Every imported conversation has the tool model's summary already.")
        return
    console.print(cost.describe(app.provider.tool_model), markup=False)
    if ask and not typer.confirm("Go on?", default=True, err=True):
        return
    total = len(cost.session_ids)
    with progress_bar(console, "summarising", total) as progress:
        refused = await summarize_all(app.sessions, cost.session_ids, lambda n: progress(n, total))
    if app.index is not None and app.index.behind():
        from seelen.cli.data import index_with_progress

        await asyncio.to_thread(index_with_progress, app, console)
    line = f"Summarised {counted(total - refused, 'conversation')} with the tool model"
    if refused:
        them = "it keeps its" if refused == 1 else "they keep their"
        line += (
            f"; its answer for {counted(refused, 'conversation')} was refused, so {them} opening"
        )
    console.print(line + ".", markup=False)
