"""The `seelen` command: typer commands that build an App and run it.

Every SeelenError becomes one line on stderr and an exit code (2 for configuration);
no traceback reaches the user.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import typer

from seelen.config import Settings, load_settings
from seelen.errors import SeelenError

app = typer.Typer(
    help="Seelen: a terminal companion with long-term memory.\n\n"
    "Run without a command to chat. Settings come from flags, then the environment, "
    "then .env in the current folder (see .env.example).",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)

ProfileOpt = Annotated[str | None, typer.Option("--profile", "-p", help="memory profile to use")]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="chat model (CHAT_MODEL)")]
DataOpt = Annotated[str | None, typer.Option("--data-dir", help="data dir (SEELEN_DATA_DIR)")]


# Flags given before the command (`seelen -p work ask …`), set by the root callback.
_ROOT_FLAGS: dict[str, str | None] = {}


def settings_from(
    profile: str | None = None, model: str | None = None, data_dir: str | None = None
) -> Settings:
    """Settings with command-line flags (after or before the command) on top of the
    environment and .env."""
    return load_settings(
        {
            "SEELEN_PROFILE": profile or _ROOT_FLAGS.get("profile"),
            "CHAT_MODEL": model or _ROOT_FLAGS.get("model"),
            "SEELEN_DATA_DIR": data_dir or _ROOT_FLAGS.get("data_dir"),
        }
    )


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coro)


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


async def _with_app(
    settings: Settings, body: Callable[[Any], Coroutine[Any, Any, Any]], *, quiet: bool = False
) -> Any:
    from seelen.app import build_app

    err = stderr_console()
    progress = (lambda _m: None) if quiet else (lambda m: err.print(f"[dim]{m}[/dim]"))
    application = await asyncio.to_thread(build_app, settings, progress=progress)
    try:
        return await body(application)
    finally:
        await application.aclose()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context, profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None
) -> None:
    _ROOT_FLAGS.update(profile=profile, model=model, data_dir=data_dir)
    if ctx.invoked_subcommand is None:
        chat(profile=profile, model=model, data_dir=data_dir)


@app.command()
def chat(profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None) -> None:
    """Chat interactively. With piped input, each line is handled as if typed."""
    from rich.console import Console

    from seelen.repl import Repl

    settings = settings_from(profile, model, data_dir)
    console = Console(highlight=False)

    async def body(application: Any) -> None:
        repl = Repl(application, console)
        await repl.start()
        repl.start_mcp()
        if sys.stdin.isatty():
            console.print("[dim]Seelen is listening. /help for commands, Ctrl-D to leave.[/dim]")
            await repl.run_interactive()
        else:
            await repl.wait_for_tools()
            await repl.run_lines(sys.stdin)

    run(_with_app(settings, body))


@app.command()
def ask(
    question: Annotated[
        str | None, typer.Argument(help="the question; read from stdin if absent")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    ephemeral: Annotated[bool, typer.Option(help="do not keep this exchange")] = False,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Answer one question and exit. The exchange joins the current session."""
    from seelen.oneshot import answer_once

    text = question if question is not None else ("" if sys.stdin.isatty() else sys.stdin.read())
    if not text.strip():
        raise SeelenError("ask: give a question as an argument or on standard input")
    settings = settings_from(profile, model, data_dir)
    code = run(
        _with_app(
            settings,
            lambda a: answer_once(a, text.strip(), as_json=as_json, ephemeral=ephemeral),
            quiet=as_json,
        )
    )
    raise typer.Exit(code)


@app.command()
def save(profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None) -> None:
    """Archive the current session into long-term memory and start a new one."""
    from rich.console import Console

    from seelen.repl import Repl

    settings = settings_from(profile, model, data_dir)

    async def body(application: Any) -> None:
        from seelen.manage import prepare

        console = Console(highlight=False)
        await prepare(application, console)
        await Repl(application, console).archive()

    run(_with_app(settings, body))


memory_app = typer.Typer(help="Search, forget and re-index long-term memory.")
sessions_app = typer.Typer(help="List and read past sessions.")
persona_app = typer.Typer(help="The assistant's persona (persona_memory.txt).")
profile_app = typer.Typer(help="What Seelen knows about you (user_profile.txt).")
app.add_typer(memory_app, name="memory")
app.add_typer(sessions_app, name="sessions")
app.add_typer(persona_app, name="persona")
app.add_typer(profile_app, name="profile")


def _memory_command(
    profile: str | None, data_dir: str | None, body: Callable[[Any, Any], Any]
) -> Any:
    """Run `body(app, console)` against the memory alone: no model is started."""
    from rich.console import Console

    from seelen.app import build_app

    settings = settings_from(profile, None, data_dir)
    application = build_app(settings, with_model=False)
    try:
        return body(application, Console(highlight=False))
    finally:
        run(application.aclose())


@memory_app.command("search")
def memory_search(
    query: Annotated[str | None, typer.Argument(help="what to look for")] = None,
    limit: Annotated[int | None, typer.Option(help="how many turns")] = None,
    mode: Annotated[str, typer.Option(help="hybrid, bm25 or vector")] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    batch: Annotated[
        bool, typer.Option("--batch", help="with --json: one query per stdin line")
    ] = False,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Ranked past summaries and turns for QUERY, with score, date and session."""
    from seelen.manage import index_now, render_hits

    if mode not in ("hybrid", "bm25", "vector"):
        raise typer.BadParameter("use hybrid, bm25 or vector", param_hint="--mode")
    if batch and not as_json:
        raise typer.BadParameter("--batch needs --json", param_hint="--batch")
    if (query is None) != batch:
        raise typer.BadParameter("give a QUERY, or --batch --json with queries on stdin")
    if as_json:
        from seelen.datacli import search_json

        _memory_command(
            profile,
            data_dir,
            lambda a, c: search_json(a, query, limit=limit, mode=mode, batch=batch),
        )
        return

    def body(application: Any, console: Any) -> None:
        index_now(application)
        result = application.recall.search(query or "", None, mode, conv_num=limit or 10)
        render_hits(console, application, result)

    _memory_command(profile, data_dir, body)


@memory_app.command("forget")
def memory_forget(
    text_id: Annotated[
        str | None, typer.Argument(help="id (or prefix) of a turn or summary")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="forget a whole session")] = None,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Delete a memory from SQLite and the vector index for good."""
    from seelen.manage import forget_session, forget_text

    if (text_id is None) == (session is None):
        raise typer.BadParameter("give a TEXT_ID or --session ID (one of them)")

    def body(application: Any, console: Any) -> None:
        if session is not None:
            n = forget_session(application, session)
            console.print(f"Forgot session {session} ({n} texts).")
        else:
            forget_text(application, text_id or "")
            console.print(f"Forgot {text_id}.")

    _memory_command(profile, data_dir, body)


@memory_app.command("reindex")
def memory_reindex(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Embed every stored text again (after changing EMBEDDING_MODEL, or to repair)."""
    from seelen.manage import reindex_all

    def body(application: Any, console: Any) -> None:
        n = reindex_all(application, console)
        console.print(f"Re-indexed {n} texts.")

    _memory_command(profile, data_dir, body)


@sessions_app.command("list")
def sessions_list(
    limit: Annotated[int, typer.Option(help="how many, newest first")] = 30,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """The newest sessions with their status and summary."""
    from seelen.manage import render_sessions

    _memory_command(profile, data_dir, lambda a, c: render_sessions(c, a, limit))


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="session id or a unique prefix")],
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Every turn of one session, with times and text ids."""
    from seelen.manage import render_session, resolve_session

    _memory_command(
        profile, data_dir, lambda a, c: render_session(c, a, resolve_session(a, session_id))
    )


def _file_commands(sub: typer.Typer, filename: str, label: str) -> None:
    @sub.command("show")
    def show(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """Print the file."""
        _memory_command(
            profile,
            data_dir,
            lambda a, c: print(a.files.read(filename).rstrip() or f"({label} is empty)"),
        )

    @sub.command("edit")
    def edit(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """Open it in $EDITOR; the previous version is kept in history/."""
        from seelen.manage import edit_file

        _memory_command(profile, data_dir, lambda a, c: edit_file(a, filename, c))

    @sub.command("history")
    def history(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """List earlier versions, newest first (numbers for `restore`)."""

        def body(a: Any, c: Any) -> None:
            versions = list(reversed(a.files.versions(filename)))
            if not versions:
                print(f"no earlier versions of {label}")
            for number, path in enumerate(versions, start=1):
                saved = a.clock.fmt(int(path.stem.split(".")[-1]), seconds=True)
                first = path.read_text("utf-8").strip().splitlines()[:1]
                print(f"{number:>3}  {saved}  {(first[0] if first else '')[:70]}")

        _memory_command(profile, data_dir, body)

    @sub.command("restore")
    def restore(
        number: Annotated[int, typer.Argument(help="version from `history`; 1 = newest")] = 1,
        profile: ProfileOpt = None,
        data_dir: DataOpt = None,
    ) -> None:
        """Bring back an earlier version (the current one is kept in history too)."""

        def body(a: Any, c: Any) -> None:
            versions = list(reversed(a.files.versions(filename)))
            if not 1 <= number <= len(versions):
                raise SeelenError(f"{label} has {len(versions)} earlier versions; see history")
            a.files.write(filename, versions[number - 1].read_text("utf-8"))
            print(f"restored {label} from version {number}")

        _memory_command(profile, data_dir, body)

    @sub.command("path")
    def path(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """Print where the file lives."""
        _memory_command(profile, data_dir, lambda a, c: print(a.files.path(filename)))


_file_commands(persona_app, "persona_memory.txt", "the persona")
_file_commands(profile_app, "user_profile.txt", "the profile")


@app.command("export")
def export(
    fmt: Annotated[str, typer.Option("--format", "-f", help="json or markdown")] = "json",
    output: Annotated[str | None, typer.Option("--output", "-o", help="file to write")] = None,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Everything Seelen remembers: persona, profile, sessions, summaries and turns."""
    from seelen.manage import write_export

    if fmt not in ("json", "markdown"):
        raise typer.BadParameter("use json or markdown", param_hint="--format")

    def body(application: Any, console: Any) -> None:
        text = write_export(application, fmt, output)
        if text is not None:
            sys.stdout.write(text + "\n")
        else:
            stderr_console().print(f"Exported to {output}.")

    _memory_command(profile, data_dir, body)


@app.command("import")
def import_(
    source: Annotated[str, typer.Argument(help="a file from `seelen export`, or - for stdin")],
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Add a `seelen export --format json` file to memory (no model is called)."""
    from seelen.datacli import describe, import_into, read_source

    text = read_source(source)
    _memory_command(
        profile,
        data_dir,
        lambda a, c: stderr_console().print(describe(import_into(a, text, stderr_console()))),
    )


@app.command()
def doctor(profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None) -> None:
    """Show the provider, models, embeddings and data dir in use, and check each one."""
    from rich.console import Console
    from rich.markup import escape

    from seelen.doctor import facts, run_checks

    settings = settings_from(profile, model, data_dir)
    console = Console(highlight=False)

    async def body(application: Any) -> bool:
        for key, value in facts(application):
            console.print(f"[bold]{key:<12}[/bold] {escape(value)}", soft_wrap=True)
        checks = await run_checks(application)
        for check in checks:
            mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
            console.print(f"{mark} {check.name}: {check.detail}")
        return all(c.ok for c in checks)

    if not run(_with_app(settings, body)):
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point: one clear line per error, never a traceback."""
    # Piped bytes that are not valid UTF-8 become U+FFFD instead of ending the program.
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="replace")

    try:
        code = app(standalone_mode=False)
    except SeelenError as exc:
        print(f"seelen: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: typer's own click prints them
        show = getattr(exc, "show", None)
        if show is None:
            raise
        show()
        sys.exit(getattr(exc, "exit_code", 2))
    except Exception as exc:  # the last line of defence: one line, details on request
        import os

        if os.environ.get("DEBUG_MODE", "").lower() in {"1", "true", "yes", "on"}:
            raise
        print(
            f"seelen: internal error: {type(exc).__name__}: {exc} "
            "(DEBUG_MODE=true shows the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
