"""The outside interface on the command line: `seelen export`, `seelen import` and
`memory search --json`.

All run against the memory alone (no model is started). Import writes in one transaction,
then embeds what it added with a progress bar on stderr; search reads (the profile opened
read-only, after `index_if_free`) and prints JSON on stdout, one object per query, with the
profile, index and embedding model loaded once for a whole batch.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from seelen.errors import SeelenError
from seelen.memory.transfer import ImportReport, import_export

if TYPE_CHECKING:
    from rich.console import Console

    from seelen.app import App
    from seelen.config import Settings
    from seelen.protocol import calls
    from seelen.protocol.results import Forgotten
    from seelen.service import ProfileService


# What Ctrl-C while this process embeds says: every text is stored (keyword search finds
# it), and any writer embeds the rest when it opens the profile.
STOPPED_EMBEDDING = (
    "seelen: stopped embedding; every text is stored and keyword search finds it, and the "
    "next chat, `seelen ask` or `seelen db repair` embeds the rest"
)


def read_source(source: str, stdin: IO[str] | None = None) -> str:
    """The text of FILE, or of standard input for `-`, as strict UTF-8."""
    if source == "-":
        return (stdin or sys.stdin).read()
    try:
        return Path(source).read_text("utf-8")
    except UnicodeDecodeError:
        raise SeelenError(f"import: {source} is not UTF-8 text") from None
    except OSError as exc:
        raise SeelenError(f"import: cannot read {source} ({exc.strerror or exc})") from None


def import_into(app: App, text: str, console: Console) -> ImportReport:
    """Import an export into the app's profile, then index the new texts with a progress bar."""
    report = import_export(app.store, app.files, app.clock, text, app.sessions)
    with stored_when_stopped(console):
        app.follow_language()
        index_with_progress(app, console)
    return report


@contextlib.contextmanager
def said_when_stopped(console: Console, line: str) -> Iterator[None]:
    """Ctrl-C inside says `line` (what is kept, who goes on) on `console`, then exits 130 as
    before (typer turns the KeyboardInterrupt into exit 130 without a word)."""
    try:
        yield
    except KeyboardInterrupt:
        console.print(line, markup=False)
        raise


def stored_when_stopped(console: Console) -> contextlib.AbstractContextManager[None]:
    """Around the embedding of texts already stored: Ctrl-C says that they are stored and
    who embeds the rest."""
    return said_when_stopped(console, STOPPED_EMBEDDING)


def index_with_progress(app: App, console: Console) -> int:
    """As the profile's writer, embed every pending text now, showing a bar on `console`."""
    from seelen.cli.common import progress_bar

    if app.index is None or not app.index.behind():
        return 0
    with progress_bar(console, "indexing", app.index.pending()) as progress:
        return app.index_pending(progress)


def index_if_free(settings: Settings, role: str) -> None:
    """Before a search, index the newest texts (and all of them after an embedding-model
    change) when no process holds the profile: its lock is taken for that moment only. A
    writer that holds it indexes them itself; the search meanwhile finds them by words."""
    from seelen.cli.common import run, stderr_console
    from seelen.runtime import open_if_free

    app = open_if_free(settings, role=role)
    if app is None:
        return
    try:
        if app.index is not None and app.index.needs_reindex():
            # Minutes for a large memory, so say so (on stderr: --json's stdout stays clean).
            console = stderr_console()
            console.print("Embedding the memory again for the new embedding model…")
            index_with_progress(app, console)
        else:
            app.index_pending()
    finally:
        run(app.aclose())


def search_json(
    service: ProfileService,
    query: str | None,
    *,
    limit: int | None,
    mode: str,
    batch: bool,
    stdin: IO[str] | None = None,
    out: IO[str] | None = None,
) -> int:
    """Print the ranking as JSON: for QUERY, or for each line of stdin with `batch`."""
    from seelen.protocol import to_json
    from seelen.protocol.calls import Search
    from seelen.protocol.results import SearchResult

    out = out or sys.stdout
    queries = (stdin or sys.stdin) if batch else [query or ""]
    count = 0
    for line in queries:
        # One object per input line, empty lines included, so outputs pair with inputs.
        text = line.rstrip("\r\n")
        if text.strip():
            result = service.search(Search(query=text, limit=limit, mode=mode))
        else:
            result = SearchResult(query=text, mode=mode)
        out.write(json.dumps(to_json(result), ensure_ascii=False) + "\n")
        out.flush()
        count += 1
    return count


def write_export(app: App, fmt: str, output: str | None, out: IO[str] | None = None) -> None:
    """Write the export (JSON or Markdown) to a file (atomically, 0600, in a folder that
    must exist) or to `out` (stdout), a session at a time: a large memory is never held
    whole."""
    from seelen.files import atomic_write
    from seelen.memory.transfer import export_chunks

    if output and Path(output).is_dir():
        example = Path(output) / f"seelen.{'md' if fmt == 'markdown' else 'json'}"
        raise SeelenError(f"export: {output} is a folder; name a file to write, e.g. {example}")
    folder = Path(output).parent if output else None
    if folder is not None and not folder.is_dir():  # as cp, tar or curl -o: a typo is no mkdir
        raise SeelenError(f"export: no such folder: {folder} (create it first)")
    chunks = export_chunks(app.store, app.files, app.clock, fmt)
    if output:
        atomic_write(Path(output), _then(chunks, "\n"))
        return
    stream = out or sys.stdout
    stream.writelines(_then(chunks, "\n"))
    stream.flush()


def _then(chunks: Iterator[str], last: str) -> Iterator[str]:
    yield from chunks
    yield last


def forget(settings: Settings, request: calls.Request) -> Forgotten:
    """`memory forget`: done by the process that holds the profile, so an open chat stays
    open; where no owner can run, by this process under the profile's writer lock."""
    from seelen.cli.common import memory_only
    from seelen.client.exchange import memory_call
    from seelen.protocol import events
    from seelen.protocol.results import Forgotten
    from seelen.service import ProfileService

    final = memory_call(settings, request)
    if final is None:
        with memory_only(settings, "memory forget") as app:
            final = ProfileService(app).call(request)
    if isinstance(final, events.Failed):
        raise SeelenError(final.message)
    if not isinstance(final, Forgotten):
        raise SeelenError(f"memory forget: the background Seelen answered {final.TAG}")
    return final
