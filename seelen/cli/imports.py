"""`seelen import`: Seelen's own export, or another assistant's history (ChatGPT, Claude, llm).

The file is read and recognised before the profile is opened, so a file that is not an
export changes nothing. Another assistant's conversations are then written in batches (a
progress bar on stderr): keyword search finds them as soon as this returns. Their vectors
follow, in this command with a second bar, or with `--background` in the warm background
process while the user goes on (`seelen db stats` counts what is left).
"""

from __future__ import annotations

from typing import Any

from seelen.errors import SeelenError
from seelen.memory.imports.conversation import HistoryError
from seelen.memory.imports.source import Export, read_export


def read(source: str | None, fmt: str | None) -> Export:
    """Read and recognise the file (llm's logs.db where llm keeps it, for `--from llm`)."""
    if source is None and fmt != "llm":
        raise SeelenError("import: give a FILE (or - for standard input)")
    try:
        return read_export(source or "", fmt)
    except HistoryError as exc:
        raise HistoryError(f"import: {exc}") from None


def import_history(app: Any, export: Export, console: Any, *, embed: bool = True) -> str:
    """Write the export's conversations into the app's profile, then (unless `embed` is
    False) embed them with a progress bar; returns the line saying what was added."""
    from seelen.chat.render import progress_bar
    from seelen.memory.imports.writer import write_history

    with progress_bar(console) as bar:
        task = bar.add_task("importing", total=sum(len(c.messages) for c in export.conversations))
        report = write_history(
            app.store,
            export.conversations,
            app.clock,
            lambda done, total: bar.update(task, completed=done, total=total),
        )
    line = report.describe()
    if not report.turns:
        return line
    console.print(line + " Keyword search finds them now.", markup=False)
    app.follow_language()
    if embed and app.index is not None and app.index.behind():
        from seelen.cli.data import index_with_progress

        index_with_progress(app.index, console)
        return "Every imported text is embedded: search by meaning finds them too."
    return "Their vectors are made in the background; `seelen db stats` says how far it is."
