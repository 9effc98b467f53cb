"""`seelen import`: Seelen's own export, or another assistant's history (ChatGPT, Claude, llm).

The file is read and recognised before the profile is opened, so a file that is not an
export changes nothing. Another assistant's conversations are then written in batches (a
progress bar on stderr): keyword search finds them as soon as this returns. Their vectors
follow, in this command with a second bar, or with `--background` in the warm background
process while the user goes on (`seelen db stats` counts what is left).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    console.print(line + " Keyword search finds them now.", markup=False)
    app.follow_language()
    if embed and app.index is not None and app.index.behind():
        from seelen.cli.data import index_with_progress

        index_with_progress(app, console)
        return "Every imported text is embedded: search by meaning finds them too."
    return "Their vectors are made in the background; `seelen db stats` says how far it is."


async def import_summarized(settings: Settings, export: Export, *, ask: bool) -> None:
    """`--summarize`: import, then have the tool model summarise the imported sessions,
    after saying what that costs (and, when `ask`, asking whether to go on)."""
    import asyncio

    from seelen.cli.common import stderr_console
    from seelen.runtime import Runtime

    console = stderr_console()
    runtime = await Runtime.open(
        settings,
        role="import",
        on_line=lambda m: console.print(m, style="dim", markup=False),
        start_indexer=False,
        finish_archives=False,
    )
    try:
        app = runtime.app
        line = await asyncio.to_thread(import_history, app, export, console)
        console.print(line, markup=False)
        await _summarize(app, export, console, ask=ask)
    finally:
        await runtime.aclose()


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
    line = f"Summarised {total - refused} conversations with the tool model"
    if refused:
        line += f"; its answer for {refused} was refused, so they keep their opening"
    console.print(line + ".", markup=False)
