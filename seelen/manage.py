"""Seeing and steering memory: search, sessions, forget, edit, export, re-index.

Shared by the `seelen` subcommands and the REPL's slash commands; renders with rich.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from seelen.app import App
from seelen.errors import SeelenError
from seelen.memory import transfer
from seelen.memory.recall import RecallResult
from seelen.store import Session

T = TypeVar("T")


async def prepare(app: App, console: Console, *, index_now: bool = True) -> bool:
    """Open the session (finishing a half-done archive) and start indexing; True if restored.

    `index_now=False` (one-shot `ask`) leaves indexing until after the answer, so the first
    request is not slowed by loading LanceDB and the embedding model.
    """
    restored = await app.open_session(
        progress=lambda step: console.print(f"[yellow]{escape(step)}…[/yellow]")
    )
    if app.recall is not None:
        app.recall.warm(app.sessions.current.session_id)
    await asyncio.to_thread(reindex_if_needed, app, console, start=index_now)
    return restored


def reindex_if_needed(app: App, console: Console, *, start: bool = True) -> None:
    """After an embedding-model change, re-embed everything with a progress bar."""
    if app.index is None:
        return
    if app.store.has_history() and app.index.needs_reindex():
        console.print("[yellow]The embedding model changed: re-indexing your memory.[/yellow]")
        reindex_all(app, console)
    if start:
        app.index.start()


def reindex_all(app: App, console: Console) -> int:
    """`seelen memory reindex`: drop every vector and embed all texts again."""
    assert app.index is not None
    app.index.reset_for_new_model()
    with _progress(console) as bar:
        task = bar.add_task("re-indexing", total=app.index.pending())
        return app.index.index_all(
            lambda done, total: bar.update(task, completed=done, total=total)
        )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def index_now(app: App) -> None:
    """Index what is pending before a search, so the newest turns are found too."""
    if app.index is not None and app.index.pending():
        app.index.index_all()


# --- search and /why ---------------------------------------------------------------------


def render_hits(console: Console, app: App, result: RecallResult) -> None:
    """A ranked table of recalled summaries and turns with score, date and session."""
    if not result.summaries and not result.turns:
        console.print("[dim]Nothing found.[/dim]")
        return
    table = Table(show_lines=False, expand=True)
    for col, style in (
        ("#", "dim"),
        ("score", ""),
        ("when", ""),
        ("session", "dim"),
        ("id", "dim"),
        ("text", ""),
    ):
        table.add_column(
            col,
            style=style or None,
            overflow="fold",
            ratio=6 if col == "text" else None,
            no_wrap=col != "text",
        )
    for rank, item in enumerate([*result.summaries, *result.turns], start=1):
        when = app.clock.fmt(item.start_ms)
        label = "summary" if item.kind == "summary" else item.role
        table.add_row(
            str(rank),
            f"{item.score:.4f}",
            when,
            item.session_id[:8],
            item.text_id[:12],
            f"[bold]{label}[/bold]: {escape(_short(item.text))}",
        )
    console.print(table)
    console.print(
        f"[dim]{len(result.summaries)} summaries, {len(result.turns)} turns, "
        f"{result.seconds * 1000:.0f} ms ({result.mode})[/dim]"
    )


def render_why(console: Console, app: App, result: RecallResult | None) -> None:
    """What was recalled for the last reply, and which rankers put it there."""
    if result is None:
        console.print("[dim]Nothing was recalled yet in this chat.[/dim]")
        return
    console.print(
        f"Recall for: [italic]{escape(_short(result.query, 120))}[/italic] "
        f"({result.seconds * 1000:.0f} ms)"
    )
    if not result.summaries and not result.turns:
        console.print("[dim]No past memory matched.[/dim]")
    for item in [*result.summaries, *result.turns]:
        ranks = ", ".join(f"{name} #{rank}" for name, rank in sorted(item.sources.items()))
        console.print(
            f"- [bold]{item.kind}[/bold] {app.clock.fmt(item.start_ms)} "
            f"(session {item.session_id[:8]}), score {item.score:.4f} from {ranks}:"
        )
        console.print(f"  [dim]{escape(_short(item.text, 200))}[/dim]")
    if app.index is not None and app.index.error:
        console.print(f"[red]indexing problem:[/red] {escape(app.index.error)}")


def _short(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _unique(prefix: str, find: Callable[[str], list[T]], missing: str, kind: str) -> T:
    """The one match of an id prefix (at least 4 characters), or a clear error."""
    if len(prefix.strip()) < 4:
        raise SeelenError(f"give at least 4 characters of the id, not {prefix!r}")
    matches = find(prefix.strip())
    if not matches:
        raise SeelenError(missing)
    if len(matches) > 1:
        raise SeelenError(f"{prefix!r} matches {len(matches)} {kind}; give more of the id")
    return matches[0]


# --- sessions ----------------------------------------------------------------------------


def resolve_session(app: App, prefix: str) -> Session:
    """A session by its id or a unique prefix of it (at least 4 characters)."""
    missing = f"no session starts with {prefix!r} (see `seelen sessions list`)"
    return _unique(prefix, app.store.find_sessions, missing, "sessions")


def render_sessions(console: Console, app: App, limit: int) -> None:
    """A table of the newest sessions."""
    table = Table(expand=True)
    for col in ("session", "started", "ended", "status", "turns"):
        table.add_column(col, no_wrap=True)
    table.add_column("summary", ratio=1, min_width=24, overflow="ellipsis", no_wrap=True)
    for s in app.store.list_sessions(limit):
        summary = app.store.session_summary(s.session_id)
        table.add_row(
            s.session_id[:12],
            app.clock.fmt(s.start_ms),
            app.clock.fmt(s.end_ms) if s.end_ms else "",
            s.status,
            str(s.conv_count),
            escape(_short(summary.text if summary else s.rolling_summary, 70)),
        )
    console.print(table)


def render_session(console: Console, app: App, session: Session) -> None:
    """One session: its summary and every turn with its time."""
    console.print(
        f"[bold]Session {session.session_id}[/bold] ({session.status}), "
        f"started {app.clock.fmt(session.start_ms)}"
    )
    summary = app.store.session_summary(session.session_id)
    if summary or session.rolling_summary:
        console.print(
            f"[italic]{escape(summary.text if summary else session.rolling_summary)}[/italic]\n"
        )
    for turn in app.store.turns(session.session_id):
        if turn.role == "tool":
            console.print(
                f"[dim]{app.clock.fmt(turn.ts_ms, seconds=True)} tool "
                f"{escape(turn.meta.get('name', ''))}: {escape(_short(turn.text))}[/dim]"
            )
            continue
        console.print(
            f"[dim]{app.clock.fmt(turn.ts_ms, seconds=True)} {turn.text_id[:12]}[/dim] "
            f"[bold]{turn.role}[/bold]: {escape(turn.text)}"
        )


# --- forget ------------------------------------------------------------------------------


def forget_text(app: App, text_id: str) -> int:
    """Delete one turn or summary (by id or unique prefix) from SQLite and LanceDB."""
    missing = f"no memory has the id {text_id!r} (see `seelen memory search`)"
    ids = [_unique(text_id, app.store.find_text_ids, missing, "memories")]
    n = app.store.delete_texts(ids)
    app.forget(ids)
    return n


def forget_session(app: App, prefix: str) -> int:
    """Delete a whole session from SQLite and LanceDB."""
    session = resolve_session(app, prefix)
    ids = app.store.delete_session(session.session_id)
    app.forget(ids)
    return len(ids)


# --- persona and profile -----------------------------------------------------------------


def edit_file(app: App, name: str, console: Console) -> bool:
    """Open a memory file in $EDITOR on a copy; save it (with history) if it changed."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    before = app.files.read(name)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(before, "utf-8")
        try:
            subprocess.run([*shlex.split(editor), str(path)], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SeelenError(f"the editor {editor!r} failed: {exc}") from None
        after = path.read_text("utf-8")
    change = app.files.write(name, after)
    console.print(
        f"{name}: {'saved (previous version kept in history/)' if change.changed else 'unchanged'}"
    )
    return change.changed


# --- export ------------------------------------------------------------------------------


def export_data(app: App) -> dict[str, Any]:
    """Everything Seelen remembers, as one JSON-ready object (see seelen/memory/transfer.py)."""
    return transfer.export_data(app.store, app.files, app.clock)


def write_export(app: App, fmt: str, output: str | None) -> str | None:
    """Write the export to a file (atomically) or return it for stdout."""
    from seelen.atomic import atomic_write

    text = transfer.render_export(app.store, app.files, app.clock, fmt)
    if output:
        atomic_write(Path(output), text + "\n")
        return None
    return text
