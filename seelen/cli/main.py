"""The `seelen` command: typer commands that build an App and run it.

Every SeelenError becomes one line on stderr and an exit code (2 for configuration);
no traceback reaches the user.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from seelen.cli.common import (
    _ROOT_FLAGS,
    DataOpt,
    ModelOpt,
    ProfileOpt,
    new_profile_note,
    run,
    settings_from,
    stderr_console,
)
from seelen.cli.db import db_app
from seelen.cli.knowledge import knowledge_app
from seelen.cli.mcp import mcp_app
from seelen.cli.memory import register as register_memory_commands
from seelen.cli.preflight import check_start
from seelen.cli.server import server_app
from seelen.cli.usage import usage_error
from seelen.config import Settings, existing_profiles
from seelen.errors import SeelenError

if TYPE_CHECKING:
    from seelen.app import App
    from seelen.cli.answer import AnswerPrinter

T = TypeVar("T")
# What Ctrl-C during an answer of the background process says, once the question is stored.
ANSWERED_ON = (
    "seelen: stopped showing the answer; the background process finishes it and keeps it "
    "in the current session (see `seelen sessions list`)"
)

app = typer.Typer(
    help="Seelen: a terminal companion with long-term memory.\n\n"
    "Run without a command to chat. Settings come from flags, then the environment, "
    "then .env in the current folder (see .env.example).",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=True,  # `seelen --install-completion` for bash, zsh, fish, PowerShell
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's, too
)


async def _with_app(
    settings: Settings,
    body: Callable[[App], Coroutine[Any, Any, T]],
    *,
    role: str | None = None,
    quiet: bool = False,
    ephemeral: bool = False,
) -> T:
    """Open the profile (as its writer when `role` is given), run `body(app)`, close it."""
    from seelen.runtime import open_observer, open_writer

    err = stderr_console()

    def line(message: str) -> None:
        if not quiet:
            err.print(message, style="dim", markup=False)

    if role is None or ephemeral:
        app = await open_observer(settings, on_line=line, ephemeral=ephemeral)
    else:
        # A one-shot ask indexes after its answer (oneshot.py): embedding now would compete
        # with the answer for the same cores, right when the user waits. Likewise it finishes
        # an archive an earlier process began only once the question is saved and answered.
        later = role == "ask"
        app = await open_writer(
            settings, role=role, on_line=line, start_indexer=not later, finish_archives=not later
        )
    try:
        result = await body(app)
        if role == "ask" and not ephemeral:
            await app.finish_archives(lambda step: line(f"{step}…"))
        return result
    finally:
        await app.aclose()


def _version(asked: bool) -> None:
    """`--version`: the version, with the digest of the installed code the owner compares."""
    if asked:
        from seelen.client.place import code_version

        print(f"seelen {code_version()}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    data_dir: DataOpt = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    _ROOT_FLAGS.update(profile=profile, model=model, data_dir=data_dir)
    if ctx.invoked_subcommand is None:
        chat(profile=profile, model=model, data_dir=data_dir)


@app.command()
def chat(profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None) -> None:
    """Chat interactively. With piped input, each line is handled as if typed."""
    from rich.console import Console

    from seelen.chat.repl import Repl

    settings = settings_from(profile, model, data_dir)
    check_start(settings)
    console = Console(highlight=False)
    # In a pipe, a notice is one line however long (Rich broke it at 80 columns and left a
    # space at each break); lists and tables keep their width.
    console.soft_wrap = not console.is_terminal
    note = new_profile_note(settings)  # a new one, or a misspelt name?
    if note is not None:
        console.print(note, style="yellow", markup=False)
    if sys.stdin.isatty():  # the prompt first; the profile opens behind it
        from seelen.models.nearby import NearbyServers, offers_nearby

        nearby = NearbyServers(settings.profile_dir) if offers_nearby(settings) else None
        if nearby is not None:
            nearby.start()  # in a thread, while the prompt draws and the profile opens
        run(Repl(None, console, settings=settings, nearby=nearby).run_terminal())
        return

    async def body(application: App) -> None:
        from seelen.owner.host import serve_chat

        repl = Repl(application, console, errors=stderr_console())
        await repl.start()
        repl.start_mcp()  # a pipe starts a server only when one of its tools is called
        async with serve_chat(repl.service, repl.note_remote_answer):
            await repl.wait_for_tools()
            await repl.run_stream(sys.stdin)

    run(_with_app(settings, body, role="chat"))


@app.command()
def ask(
    question: Annotated[
        str | None,
        typer.Argument(help="the question; read from stdin if absent", metavar="QUESTION"),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="print one JSON object, a failure too: reply, session_id, usage, tool_calls, "
            "error (null, or the line said on stderr) and saved (whether the question is kept)",
        ),
    ] = False,
    ephemeral: Annotated[
        bool, typer.Option("--ephemeral", help="keep nothing of this exchange")
    ] = False,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Answer one question and exit. The exchange joins the current session.

    The question goes to the profile's warm background process, started if needed
    (SEELEN_OWNER=false answers in this process instead).

    \b
    Examples:
      seelen ask "what did I say about my sister's move?"
      seelen ask --json --ephemeral "which day is it?"
    """
    from seelen.cli.answer import AnswerPrinter

    printer = AnswerPrinter(as_json=as_json, ephemeral=ephemeral)
    try:
        text = (
            question if question is not None else ("" if sys.stdin.isatty() else sys.stdin.read())
        )
        if not text.strip():
            raise typer.BadParameter("give a question as an argument or on standard input")
        settings = settings_from(profile, model, data_dir)
        check_start(settings)
        note = new_profile_note(settings)
        if note is not None:  # on stderr: the answer alone goes to stdout (or its JSON)
            stderr_console().print(note, style="yellow", markup=False, soft_wrap=True)
        printer.begin()
        code = _answer(settings, text.strip(), printer, as_json=as_json, ephemeral=ephemeral)
    except (SeelenError, typer.BadParameter, OSError) as exc:  # main() says it on stderr
        printer.fail_json(_os_error(exc) if isinstance(exc, OSError) else str(exc))
        raise
    raise typer.Exit(code)


def _answer(
    settings: Settings, text: str, printer: AnswerPrinter, *, as_json: bool, ephemeral: bool
) -> int:
    """Answer through the warm owner, or in this process when none can; the exit code."""
    from seelen.client.exchange import ask as ask_owner

    def waiting(line: str) -> None:  # another process holds the profile without serving it
        if not as_json:
            stderr_console().print(line, style="dim", markup=False)

    try:
        final = ask_owner(
            settings, text, ephemeral=ephemeral, on_event=printer.on_event, on_wait=waiting
        )
    except KeyboardInterrupt:  # the owner answers a question it stored to the end: say so
        if printer.saved:
            stderr_console().print(ANSWERED_ON, markup=False)
        raise typer.Exit(130) from None
    if final is not None:
        return printer.finish(final)
    from seelen.cli.oneshot import answer_once  # no owner could answer: answer in this process

    try:
        return run(
            _with_app(
                settings,
                lambda a: answer_once(a, text, printer, ephemeral=ephemeral),
                role="ask",
                quiet=as_json,
                ephemeral=ephemeral,
            )
        )
    except KeyboardInterrupt:  # typer would end with 130 and not a word: say what is kept
        printer.stopped()
        raise typer.Exit(130) from None


@app.command()
def save(profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None) -> None:
    """Archive the current session into long-term memory and start a new one.

    While a chat is open, type /save in it instead: this command says so and stops.
    """
    from rich.console import Console

    from seelen.chat.repl import Repl
    from seelen.cli.common import refuse_beside_chat

    settings = settings_from(profile, model, data_dir)
    check_start(settings, mcp=False)
    refuse_beside_chat(settings, "type /save in it (it archives its own session)")

    async def body(application: App) -> None:
        await Repl(application, Console(highlight=False)).archive()

    run(_with_app(settings, body, role="save"))


register_memory_commands(app)
app.add_typer(knowledge_app, name="knowledge")

app.add_typer(server_app, name="server")
app.add_typer(db_app, name="db")
app.add_typer(mcp_app, name="mcp")


@app.command("profiles")
def profiles(data_dir: DataOpt = None) -> None:
    """List the memories (profiles) in the data dir: --profile NAME picks one, a new name
    starts one."""
    settings = settings_from(None, None, data_dir)
    names = existing_profiles(settings.data_dir)
    if not names:
        print(f"no profile yet in {settings.data_dir}; the first chat starts {settings.profile!r}")
    for name in names:
        print(f"{name}{'  (in use)' if name == settings.profile else ''}")


@app.command()
def doctor(profile: ProfileOpt = None, model: ModelOpt = None, data_dir: DataOpt = None) -> None:
    """Show the provider, models, embeddings and data dir in use, and check each one."""
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    from seelen.chat.visible import visible
    from seelen.cli.doctor import Check, facts, run_checks, without_memory
    from seelen.errors import StoreError

    settings = settings_from(profile, model, data_dir)
    check_start(settings)
    console = Console(highlight=False)

    def show(found: list[tuple[str, str]], checks: list[Check]) -> bool:
        for key, value in found:
            console.print(f"[bold]{key:<12}[/bold] {escape(value)}", soft_wrap=True)
        for check in checks:
            mark = "[green]✓[/green]" if check.ok else "[red]✗[/red]"
            if check.pending:  # work under way (indexing) is no failure
                mark = "[yellow]…[/yellow]"
            line = Text.from_markup(mark).append(f" {check.name}: {visible(check.detail)}")
            console.print(line, soft_wrap=True)  # one line a check, in a pipe too
        return all(c.ok or c.pending for c in checks)

    async def body(application: App) -> bool:
        return show(facts(application), await run_checks(application))

    try:
        healthy = run(_with_app(settings, body))
    except StoreError as exc:  # a damaged memory is one finding among the others
        line = stderr_console().print
        healthy = show(*run(without_memory(settings, exc, lambda m: line(m, style="dim"))))
    if not healthy:
        raise typer.Exit(1)


def refuse_undecodable_arguments(args: list[str]) -> None:
    """Bytes that are not UTF-8 cannot be stored as the user meant them: say so up front."""
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise SeelenError(
                f"argument {number} is not valid UTF-8 text; check the terminal's encoding, "
                "or pipe the text on standard input"
            ) from None


def _os_error(exc: OSError) -> str:
    """A failure of the disk (full, read-only, gone) in words."""
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot use{where}: {exc.strerror or exc}"


def main() -> None:
    """Console-script entry point: one clear line per error, never a traceback."""
    from seelen.heap import limit_arenas

    limit_arenas()  # before any thread starts
    # Piped bytes that are not valid UTF-8 become U+FFFD instead of ending the program.
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="replace")
    from seelen.cli.reader import guard_stdout

    sys.stdout = guard_stdout(sys.stdout)  # `seelen … | head` is no error

    try:
        refuse_undecodable_arguments(sys.argv[1:])
        # Usage lines name the command as a user types it, however Python was started
        # (`python -m seelen`, a test runner's own `__main__`).
        code = app(standalone_mode=False, prog_name="seelen")
    except SeelenError as exc:
        print(f"seelen: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: one line, with the usage
        usage_error(exc)
    except OSError as exc:  # the disk: full, read-only, gone
        print(f"seelen: {_os_error(exc)}", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # the last line of defence: one line, details on request
        import os

        from seelen.cli.reader import narrow_output

        if (line := narrow_output(exc)) is not None:
            print(f"seelen: {line}", file=sys.stderr)
            sys.exit(1)
        if os.environ.get("DEBUG_MODE", "").lower() in {"1", "true", "yes", "on"}:
            raise
        print(
            f"seelen: internal error: {type(exc).__name__}: {exc} "
            "(DEBUG_MODE=true shows the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
