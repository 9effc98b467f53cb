"""What every `seelen` command shares: the common flags and how they become Settings."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from seelen.config import Settings, existing_profiles, load_settings

if TYPE_CHECKING:
    from rich.console import Console

    from seelen.app import App

T = TypeVar("T")
Progress = Callable[[int, int], None]  # (done, total) of a long pass

# A new user meets `--profile` beside `seelen profiles` and `seelen profile` (the file about
# them): the help says which is which.
ProfileOpt = Annotated[
    str | None,
    typer.Option("--profile", "-p", help="which memory to use (`seelen profiles` lists them)"),
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="chat model (CHAT_MODEL)")]
DataOpt = Annotated[str | None, typer.Option("--data-dir", help="data dir (SEELEN_DATA_DIR)")]


# Flags given before the command (`seelen -p work ask …`), set by the root callback.
_ROOT_FLAGS: dict[str, str | None] = {}


def settings_from(
    profile: str | None = None, model: str | None = None, data_dir: str | None = None
) -> Settings:
    """Settings with command-line flags (after or before the command) on top of the
    environment and .env. A flag given empty (`--data-dir "$UNSET"`) is refused: read as
    absent, it would open the default data dir, the user's real memory."""
    typed = {"profile": profile, "model": model, "data_dir": data_dir}
    for name, value in typed.items():
        if (value if value is not None else _ROOT_FLAGS.get(name)) == "":
            flag = "--" + name.replace("_", "-")
            raise typer.BadParameter("it is empty: give a value or leave it out", param_hint=flag)
    given = {
        "SEELEN_PROFILE": profile or _ROOT_FLAGS.get("profile"),
        "CHAT_MODEL": model or _ROOT_FLAGS.get("model"),
        "SEELEN_DATA_DIR": data_dir or _ROOT_FLAGS.get("data_dir"),
    }
    return load_settings(
        given,
        flags=_FLAG_NAMES,
        warn=lambda line: stderr_console().print(f"seelen: {line}", markup=False, soft_wrap=True),
    )


def existing_settings(profile: str | None, data_dir: str | None) -> Settings:
    """The settings of a profile that exists: a misspelt name, beside profiles that do, is
    named (`runtime.must_exist`), never started nor shown as an empty memory."""
    from seelen.runtime import must_exist

    settings = settings_from(profile, None, data_dir)
    must_exist(settings)
    return settings


def new_profile_note(settings: Settings) -> str | None:
    """The line a command that starts a profile (chat, ask, import) says first when the
    profile is new beside others: a misspelt `--profile` would otherwise go unnoticed, its
    words kept in a profile the user never meant to start. None when nothing is to say."""
    others = existing_profiles(settings.data_dir)
    if not others or settings.profile in others:
        return None
    return (
        f"{settings.profile!r} is a new profile: nothing is remembered in it yet "
        f"(the others: {', '.join(others)})"
    )


# The flag that sets each setting, for errors about a value typed there.
_FLAG_NAMES = {
    "SEELEN_PROFILE": "--profile",
    "CHAT_MODEL": "--model",
    "SEELEN_DATA_DIR": "--data-dir",
}


def unlabelled(name: str, detail: str) -> str:
    """A check's detail without the label it starts with when the check's name already ends
    with it ("turns: 4 vectors" under "vectors of turns"; "time: ready" under "MCP server
    time"): the line would say it twice."""
    head, colon, rest = detail.partition(": ")
    return rest if colon and (name == head or name.endswith(" " + head)) else detail


def labelled(name: str, detail: str) -> str:
    """`name: detail`, the label said once (see `unlabelled`)."""
    return f"{name}: {unlabelled(name, detail)}"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop (asyncio is imported here: an `ask` that its
    owner answers never needs it)."""
    import asyncio

    return asyncio.run(coro)


def stderr_console() -> Console:
    """A console on stderr, so stdout stays clean for what a command prints. Its lines are
    never broken by Rich (the terminal wraps them; a log or a pipe keeps one line each)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress_bar(console: Console, description: str, total: int) -> Iterator[Progress]:
    """A bar on `console` for long work (indexing, re-indexing); yields the `(done, total)`
    callback that moves it."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Bar(*columns, TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@contextlib.contextmanager
def bar_on_first_use(console: Console, description: str) -> Iterator[Progress]:
    """`progress_bar`, drawn only once the work reports its first step (work that ends
    before it, or fails first, shows no bar at all)."""
    with contextlib.ExitStack() as stack:
        moves: list[Progress] = []

        def move(done: int, total: int) -> None:
            if not moves:
                moves.append(stack.enter_context(progress_bar(console, description, total)))
            moves[0](done, total)

        yield move


@contextlib.contextmanager
def memory_only(settings: Settings, writer: str | None = None) -> Iterator[App]:
    """The profile's memory (store, files, index) without a chat model, as an `App`.

    `writer` names a command that changes memory: it first waits for the profile's writer
    lock, saying so on stderr (an open chat, which may stay for hours, is said at once).
    Readers take no lock, open the memory read-only and create nothing.
    """
    from seelen.runtime import open_reader, open_writer

    if writer is None:
        app = open_reader(settings)
    else:
        refuse_beside_chat(settings, f"close it, then run `seelen {writer}` again")
        app = run(
            open_writer(
                settings,
                role=writer,
                on_line=lambda m: stderr_console().print(m, style="dim", markup=False),
                with_model=False,
                start_indexer=False,
                finish_archives=False,  # they need the tool model: the next chat or ask
            )
        )
    try:
        yield app
    finally:
        run(app.aclose())


def refuse_beside_chat(settings: Settings, advice: str) -> None:
    """Raise `ProfileBusy` at once when an open chat holds the profile: a command that needs
    the profile to itself would otherwise wait for a chat that may stay open for hours.
    `advice` says what to do instead. Any other holder (an `ask`, an import) finishes soon:
    the command waits for it, saying so."""
    from seelen.client import place
    from seelen.runtime import ProfileBusy

    if not place.lock_held(settings.profile_dir):
        return
    holder = place.Holder.read(settings.profile_dir)
    if holder.role == "chat":
        raise ProfileBusy(f"{holder.line()} has this profile open: {advice}")
