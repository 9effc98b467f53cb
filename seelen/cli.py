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


def settings_from(
    profile: str | None = None,
    model: str | None = None,
    data_dir: str | None = None,
    **extra: str | None,
) -> Settings:
    """Settings with command-line flags on top of environment and .env."""
    return load_settings(
        {"SEELEN_PROFILE": profile, "CHAT_MODEL": model, "SEELEN_DATA_DIR": data_dir, **extra}
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
        if sys.stdin.isatty():
            console.print("[dim]Seelen is listening. /help for commands, Ctrl-D to leave.[/dim]")
            await repl.run_interactive()
        else:
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
        repl = Repl(application, Console(highlight=False))
        await application.open_session()
        await repl.archive()

    run(_with_app(settings, body))


def main() -> None:
    """Console-script entry point: one clear line per error, never a traceback."""
    import click

    try:
        code = app(standalone_mode=False)
    except SeelenError as exc:
        print(f"seelen: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("", file=sys.stderr)
        sys.exit(130)
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
