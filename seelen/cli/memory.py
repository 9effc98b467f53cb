"""`seelen memory|sessions|persona|profile|export`: seeing and steering memory.

Readers open the profile without its writer lock and write nothing. Forget, import and the
persona and profile edits go through the process that holds the profile (an open chat
stays open); reindex needs the profile to itself: it says at once when a chat has it open.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from seelen.cli.common import (
    DataOpt,
    ProfileOpt,
    existing_settings,
    memory_only,
    new_profile_note,
    run,
    settings_from,
    stderr_console,
)
from seelen.cli.files import file_commands
from seelen.counts import counted

if TYPE_CHECKING:
    from rich.console import Console

    from seelen.app import App
    from seelen.config import Settings

T = TypeVar("T")
memory_app = typer.Typer(no_args_is_help=True, help="Search, forget and re-index long-term memory.")
sessions_app = typer.Typer(no_args_is_help=True, help="List and read past sessions.")
persona_app = typer.Typer(
    no_args_is_help=True, help="The assistant's persona (persona_memory.txt)."
)
profile_app = typer.Typer(
    no_args_is_help=True,
    help="What Seelen knows about you (user_profile.txt). Not --profile: that picks a memory.",
)


def _memory_command(
    profile: str | None,
    data_dir: str | None,
    body: Callable[[App, Console], T],
    *,
    write: str | None = None,
) -> T:
    """Run `body(app, console)` against the memory alone: no model is started.

    `write` names the command when it changes memory: it then waits for the profile's
    writer lock; readers take no lock and write nothing.
    """
    from rich.console import Console

    settings = existing_settings(profile, data_dir)  # a writer too: a typo starts nothing
    with memory_only(settings, write) as app:
        return body(app, Console(highlight=False))


@memory_app.command("search")
def memory_search(
    query: Annotated[str | None, typer.Argument(help="what to look for", metavar="QUERY")] = None,
    limit: Annotated[int | None, typer.Option(help="how many turns", min=1, metavar="N")] = None,
    mode: Annotated[str, typer.Option(help="hybrid, bm25 or vector")] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    batch: Annotated[
        bool, typer.Option("--batch", help="with --json: one query per stdin line")
    ] = False,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Ranked past summaries and turns for QUERY, with score, date and session.

    --json prints the ranking chat uses (with `in_prompt`); --batch reads one query per
    line from stdin and prints one JSON object per line, loading everything once.

    \b
    Example:
      seelen memory search "sister Lisbon" --limit 5
    """
    from rich.console import Console

    if mode not in ("hybrid", "bm25", "vector"):
        raise typer.BadParameter("use hybrid, bm25 or vector", param_hint="--mode")
    if batch and not as_json:
        raise typer.BadParameter("--batch needs --json", param_hint="--batch")
    if (query is None) != batch or (query is not None and not query.strip()):
        raise typer.BadParameter("give a QUERY, or --batch --json with queries on stdin")

    from seelen.cli.data import index_if_free

    settings = settings_from(profile, None, data_dir)
    index_if_free(settings, "memory search")

    def body(application: App, console: Console) -> None:
        from seelen.runtime import unindexed_note
        from seelen.service import ProfileService

        if note := unindexed_note(application):
            stderr_console().print(note, style="dim", markup=False)
        service = ProfileService(application)
        if as_json:
            from seelen.cli.data import search_json

            search_json(service, query, limit=limit, mode=mode, batch=batch)
            return
        from seelen.chat.listings import render_hits
        from seelen.protocol.calls import Search

        shown = 10 if limit is None else limit
        render_hits(
            console, service.search(Search(query=query or "", limit=shown, mode=mode)), shown
        )

    with memory_only(settings) as application:
        body(application, Console(highlight=False))


@memory_app.command("forget")
def memory_forget(
    text_id: Annotated[
        str | None,
        typer.Argument(help="id (or prefix) of a turn or summary", metavar="TEXT_ID"),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="forget a whole session")] = None,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Delete a memory from SQLite and the vector index for good.

    A turn's words also leave the summaries that quote it word for word. What was learnt
    from it in other words stays: a summary (forget it too: its id is in `seelen memory
    search`) and user_profile.txt (`seelen profile edit`). Backups (`seelen db list`) keep
    everything until newer ones replace them. It asks nothing: check the id first.

    It goes through the process that holds the profile, so an open chat can stay open.
    """
    if (text_id is None) == (session is None):
        raise typer.BadParameter("give a TEXT_ID or --session ID (one of them)")
    from seelen.cli.data import forget
    from seelen.protocol import calls

    request: calls.Request = (
        calls.ForgetSession(session_id=session)
        if session is not None
        else calls.Forget(text_id=text_id or "")
    )
    settings = existing_settings(profile, data_dir)  # the owner it starts would make one
    final = forget(settings, request)
    what = f"session {final.text_id}" if session is not None else final.text_id
    print(f"Forgot {what} ({counted(final.forgotten, 'text')}).")


@memory_app.command("reindex")
def memory_reindex(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Embed every stored text again (after changing EMBEDDING_MODEL, or to repair).

    It needs the profile to itself: close an open chat first (it says so if one is open).
    """
    from seelen.cli.common import progress_bar
    from seelen.runtime import reindex_all

    def body(application: App, console: Console) -> None:
        assert application.index is not None  # a writer has its indexer
        with progress_bar(console, "re-indexing", application.index.pending()) as progress:
            n = reindex_all(application, progress)
        console.print(f"Re-indexed {counted(n, 'text')}.")

    _memory_command(profile, data_dir, body, write="memory reindex")


# Sessions a `sessions list` shows: two lines each (the summary below), a screenful or two.
SESSIONS_SHOWN = 30


@sessions_app.command("list")
def sessions_list(
    limit: Annotated[
        int, typer.Option(help="how many, newest first", min=1, metavar="N")
    ] = SESSIONS_SHOWN,
    offset: Annotated[
        int, typer.Option(help="skip the N newest (the next page: --offset 30)", min=0, metavar="N")
    ] = 0,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """The newest sessions with their status and summary; when older ones follow, a line on
    stderr says how to see them."""
    from seelen.chat.listings import render_sessions

    if _memory_command(profile, data_dir, lambda a, c: render_sessions(c, a, limit, offset)):
        stderr_console().print(
            f"older sessions follow: seelen sessions list --offset {offset + limit}"
            + (f" --limit {limit}" if limit != SESSIONS_SHOWN else ""),
            style="dim",
            markup=False,
        )


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[
        str, typer.Argument(help="session id or a unique prefix", metavar="SESSION_ID")
    ],
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Every turn of one session, with times and text ids."""
    from seelen.chat.listings import render_session
    from seelen.runtime import resolve_session

    _memory_command(
        profile, data_dir, lambda a, c: render_session(c, a, resolve_session(a, session_id))
    )


file_commands(persona_app, "persona_memory.txt", "the persona")
file_commands(profile_app, "user_profile.txt", "the profile")


def export(
    fmt: Annotated[str, typer.Option("--format", "-f", help="json or markdown")] = "json",
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="file to write (0600; its folder must exist)"),
    ] = None,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Everything Seelen remembers: persona, profile, sessions, summaries and turns.

    \b
    Example:
      seelen export -f markdown -o memory.md
    """
    from seelen.cli.data import write_export

    if fmt not in ("json", "markdown"):
        raise typer.BadParameter("use json or markdown", param_hint="--format")

    def body(application: App, console: Console) -> None:
        write_export(application, fmt, output)
        if output:
            stderr_console().print(f"Exported to {output}.", markup=False)

    _memory_command(profile, data_dir, body)


def import_(
    source: Annotated[
        str | None,
        typer.Argument(
            help="the export: a `seelen export` file, ChatGPT's or Claude's .zip or "
            "conversations.json, llm's logs.db; - reads standard input",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="seelen, chatgpt, claude or llm (default: recognised by its content; "
            "llm without FILE reads llm's own logs.db)",
            metavar="FORMAT",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="return only once every text has its vector too (a progress bar); by "
            "default the background process embeds them while you go on",
        ),
    ] = False,
    background: Annotated[
        bool, typer.Option("--background", hidden=True, help="the default now")
    ] = False,
    summarize: Annotated[
        bool,
        typer.Option(
            "--summarize",
            help="have the tool model summarise each imported conversation (says what it "
            "costs first); without it, a summary is made of the title and first lines",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="with --summarize: do not ask")] = False,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Add an export to memory: Seelen's own, or your history from ChatGPT, Claude or llm.

    It goes through the process that holds the profile, so an open chat can stay open, and
    returns once keyword search finds everything; the background process embeds the rest
    (--wait waits for that too). No model is called unless --summarize asks for it.
    Importing the same file again adds nothing; a newer export of the same history adds
    only what is new.

    \b
    Examples:
      seelen import ~/Downloads/chatgpt-export.zip
      seelen export -o backup.json && seelen --profile new import backup.json
    """
    from seelen.cli.imports import read, readable_path, through_owner
    from seelen.memory.imports.source import FORMATS

    if fmt is not None and fmt not in FORMATS:
        raise typer.BadParameter(f"use {', '.join(FORMATS)}", param_hint="--from")
    settings = settings_from(profile, None, data_dir)
    note = new_profile_note(settings)  # `--profile new import` starts one; a typo too
    if note is not None:
        stderr_console().print(note, style="yellow", markup=False, soft_wrap=True)
    fresh = not settings.profile_dir.is_dir()
    with readable_path(settings, source, fmt) as path:
        if fresh:  # recognised here first: a file that is not an export starts no profile
            read(path, fmt)  # (the owner, started for it, would have made one)
        if summarize or not through_owner(settings, path, fmt, wait=wait):
            _import_here(settings, path, fmt, summarize=summarize, ask=not yes)


def _import_here(
    settings: Settings, path: str, fmt: str | None, *, summarize: bool, ask: bool
) -> None:
    """`seelen import` in this process, as the profile's writer: --summarize (it needs the
    tool model), or no owner can run here."""
    from seelen.cli.imports import import_history, import_summarized, read

    export = read(path, fmt)
    if summarize and export.kind not in ("seelen", "empty"):
        from seelen.cli.common import refuse_beside_chat

        refuse_beside_chat(settings, "close it, then run `seelen import --summarize` again")
        run(import_summarized(settings, export, ask=ask and sys.stdin.isatty()))
        return

    def body(application: App, console: Console) -> None:
        if export.kind == "seelen":
            from seelen.cli.data import import_into

            line = import_into(application, export.text, stderr_console()).describe()
        elif export.kind == "empty":
            line = "Nothing to import: the export holds no conversations."
        else:
            line = import_history(application, export, stderr_console())
        stderr_console().print(line, markup=False)

    with memory_only(settings, "import") as application:
        body(application, stderr_console())


def register(app: typer.Typer) -> None:
    """Add these commands to the `seelen` command."""
    app.add_typer(memory_app, name="memory")
    app.add_typer(sessions_app, name="sessions")
    app.add_typer(persona_app, name="persona")
    app.add_typer(profile_app, name="profile")
    app.command("export")(export)
    app.command("import")(import_)
