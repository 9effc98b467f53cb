"""`seelen knowledge add|list|remove|search`: the profile's note folders, from the shell.

A typer sub-app of its own, registered by one line in `cli/main.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from seelen.cli.common import DataOpt, ProfileOpt
from seelen.counts import counted
from seelen.errors import SeelenError

if TYPE_CHECKING:
    from seelen.config import Settings
    from seelen.knowledge.library import Knowledge

knowledge_app = typer.Typer(
    no_args_is_help=True, help="Note folders Seelen reads by itself (knowledge folders)."
)


def _given(path: str) -> str:
    """PATH as given; an empty one (`"$NOTES"` unset in a script) is refused: read as the
    current folder, it added (or removed) the folder the shell was in, often the home."""
    if not path.strip():
        raise typer.BadParameter("it is empty: name a folder of notes")
    return path


PathArg = Annotated[str, typer.Argument(help="a folder of notes", metavar="PATH", callback=_given)]


def _settings(profile: str | None, data_dir: str | None, *, reading: bool = False) -> Settings:
    """The profile's settings. A writer (add, remove) creates the profile's folder; a reader
    (list, search) creates nothing, and a misspelt profile name gets the names that exist."""
    from seelen.cli.common import existing_settings, settings_from
    from seelen.config import prepare_profile_dir

    if reading:
        return existing_settings(profile, data_dir)
    settings = settings_from(profile, None, data_dir)
    prepare_profile_dir(settings)
    return settings


@knowledge_app.command("add")
def add(path: PathArg, profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Read the notes of PATH from now on (this profile only).

    \b
    Example:
      seelen knowledge add ~/notes
    """
    from seelen.knowledge.folders import add_folder

    settings = _settings(profile, data_dir)
    folder, added = add_folder(settings.profile_dir, path)
    if not added:
        print(f"already read: {folder}")
        return
    print(f"added {folder}")
    _index_now(settings, folder)


def _index_now(settings: Settings, folder: str) -> None:
    """Index the folders now, counting on stderr (a list or search right after shows them;
    until then the index said "0 notes indexed")."""
    import threading

    from seelen.cli.common import stderr_console
    from seelen.knowledge.folders import indexed_counts, open_knowledge

    knowledge = open_knowledge(settings)
    if knowledge is None:
        return
    try:
        worker = threading.Thread(target=knowledge.catch_up, name="seelen-knowledge-add")
        worker.start()
        with stderr_console().status("indexing the notes…") as status:
            while worker.is_alive():
                done = knowledge.progress
                status.update(f"indexing the notes… {done.checked} read, {done.indexed} indexed")
                worker.join(0.1)
    finally:
        knowledge.close()
    if knowledge.error:
        raise SeelenError(f"knowledge add: {knowledge.error}")
    say_skipped(knowledge)
    # The folder's notes in the index, not those read in this pass: a folder removed and
    # added again is indexed already, and said "0 notes indexed".
    print(f"{counted(indexed_counts(settings).get(folder, 0), 'note')} indexed")


def say_skipped(knowledge: Knowledge) -> None:
    """One line on stderr naming the files of the folders that are not text (a binary file
    named *.md), and one naming those over KNOWLEDGE_MAX_BYTES: the index skips both."""
    from seelen.cli.common import stderr_console
    from seelen.knowledge.files import display_path

    skipped, large = knowledge.progress.skipped, sorted(knowledge.progress.too_large)
    are = "is" if len(skipped) == 1 else "are"
    limit = f"KNOWLEDGE_MAX_BYTES, {knowledge.rules.max_bytes:,} bytes"
    reasons = (skipped, f"that {are} not text"), (large, f"over the size limit ({limit})")
    for paths, why in reasons:
        if paths:
            names = ", ".join(display_path(p, knowledge.roots) for p in paths[:5])
            more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
            line = f"skipped {counted(len(paths), 'file')} {why}: {names}{more}"
            stderr_console().print(line, markup=False)


@knowledge_app.command("remove")
def remove(path: PathArg, profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Stop reading PATH (its notes leave the index on the next start)."""
    from seelen.knowledge.folders import remove_folder

    settings = _settings(profile, data_dir)
    if not remove_folder(settings.profile_dir, path):
        raise SeelenError(f"knowledge remove: {path} is not in this profile's list")
    print(f"removed {path}")


@knowledge_app.command("list")
def list_folders(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """The folders read, where each comes from, and how many notes of it are indexed."""
    from seelen.knowledge.files import real_root
    from seelen.knowledge.folders import all_folders, configured_dirs, indexed_counts

    settings = _settings(profile, data_dir, reading=True)
    # Told apart by real path, as the index reads them: a folder named by KNOWLEDGE_DIRS
    # and again (another spelling, a link) by the profile is one folder, listed once.
    from_env = {real_root(folder) for folder in configured_dirs(settings)}
    folders, counts = all_folders(settings), indexed_counts(settings)
    if not folders:
        print("no knowledge folder; add one with: seelen knowledge add PATH")
    for folder in folders:
        where = "KNOWLEDGE_DIRS" if real_root(folder) in from_env else "profile"
        count = counts.get(folder)
        state = "missing" if count is None else f"{counted(count, 'note')} indexed"
        print(f"{folder}  ({where}, {state})")


@knowledge_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="what to look for", metavar="QUERY")],
    tokens: Annotated[
        int, typer.Option(help="token budget of the answer", min=1, metavar="N")
    ] = 2000,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Bring the index up to date, then print the passages that best match QUERY."""
    from rich.console import Console

    from seelen.chat.listings import render_passages
    from seelen.config import prepare_profile_dir
    from seelen.knowledge.folders import open_knowledge

    if not query.strip():
        raise typer.BadParameter("give the words to look for", param_hint="QUERY")
    settings = _settings(profile, data_dir, reading=True)
    knowledge = open_knowledge(settings)
    if knowledge is None:
        print("no knowledge folder; add one with: seelen knowledge add PATH")
        return
    prepare_profile_dir(settings)  # the notes' index lives in the profile (KNOWLEDGE_DIRS)
    try:
        knowledge.catch_up()
        say_skipped(knowledge)
        passages = knowledge.search(query, tokens)
        render_passages(Console(highlight=False), passages)
        if not passages:
            print("Nothing found.")
    finally:
        knowledge.close()
