"""`seelen db …`: the maintenance commands, as a typer sub-app (`cli/main.py` registers it).

Each command prints plain lines; `check` exits 1 when anything is wrong.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seelen.cli.common import DataOpt, ProfileOpt, existing_settings, labelled, memory_only
from seelen.errors import SeelenError

if TYPE_CHECKING:
    from seelen.app import App
    from seelen.config import Settings

db_app = typer.Typer(
    no_args_is_help=True, help="Check, repair, optimize, back up and restore the memory."
)


def _settings(profile: str | None, data_dir: str | None) -> Settings:
    """The flags given before `db` count too. A profile that does not exist is named (as
    misspelt, beside others): no `db` command starts one (a backup or repair of nothing),
    and on a new machine none calls the memory that is not there yet damaged."""
    settings = existing_settings(profile, data_dir)
    if not settings.profile_dir.is_dir():
        raise SeelenError(
            f"no memory at {settings.profile_dir} yet: a chat, an ask or an import starts it"
        )
    return settings


def damaged(profile_dir: Path) -> str:
    """What to do about a database SQLite cannot read (`db check`, `db backup`)."""
    from seelen.memory.maintenance import backups

    if not backups(profile_dir):
        return (
            f"there is no backup to restore: copy {profile_dir} somewhere safe before "
            "anything else; `seelen db repair` cannot mend it"
        )
    return (
        "`seelen db restore` puts back the newest backup (`seelen db list` shows them), "
        "keeping this one; `seelen db repair` cannot mend it"
    )


def _memory(
    profile: str | None, data_dir: str | None, writer: str | None = None
) -> AbstractContextManager[App]:
    """The profile's store, index and indexer, without a chat model (see `memory_only`)."""
    return memory_only(_settings(profile, data_dir), writer)


@db_app.command("check")
def check(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Check SQLite, the vector index against the texts, and the persona and profile files."""
    from seelen.memory.maintenance import DB_FILE, INTEGRITY, sqlite_findings
    from seelen.memory.maintenance import check as run_check

    settings = _settings(profile, data_dir)
    findings = sqlite_findings(settings.profile_dir / DB_FILE)
    if all(f.ok for f in findings):  # a damaged database is reported, not opened
        with memory_only(settings) as app:
            findings = run_check(app, findings)  # SQLite's checked once (whole-file reads)
    for f in findings:  # work under way (texts waiting for their vectors) is no failure
        mark = "ok  " if f.ok else "…   " if f.pending else "FAIL"
        typer.echo(f"{mark} {labelled(f.name, f.detail)}")
    if any(f.pending for f in findings):
        typer.echo(
            "… is work under way, not a fault: the process that holds this profile finishes "
            "it (or the next one to open it).",
            err=True,
        )
    if not all(f.ok or f.pending for f in findings):
        unreadable = any(f.name == INTEGRITY and not f.ok for f in findings)
        typer.echo(
            f"The database is damaged: {damaged(settings.profile_dir)}."
            if unreadable
            else "Some checks failed: `seelen db repair` fixes what it can.",
            err=True,
        )
        raise typer.Exit(1)


@db_app.command("repair")
def repair(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Fix what `check` finds: re-index missing vectors, drop orphans, rebuild a damaged index."""
    from seelen.cli.common import progress_bar, stderr_console
    from seelen.memory.maintenance import repair as run_repair

    with (
        _memory(profile, data_dir, "db repair") as app,
        progress_bar(stderr_console(), "repairing", app.store.count_unindexed()) as progress,
    ):
        lines = run_repair(app, progress)
    for line in lines or ["nothing to repair"]:
        typer.echo(line)
    if any(line.startswith("still wrong") for line in lines):
        raise typer.Exit(1)


@db_app.command("optimize")
def optimize(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """VACUUM and ANALYZE the database, compact the vector index and rebuild its indices."""
    from seelen.memory.maintenance import optimize as run_optimize

    with _memory(profile, data_dir, "db optimize") as app:
        for line in run_optimize(app):
            typer.echo(line)


@db_app.command("backup")
def backup(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Copy the profile into backups/ (safe while Seelen runs); keeps SEELEN_BACKUPS copies.
    A damaged database is not copied: its copy would push a good backup out."""
    from seelen.memory.maintenance import DB_FILE, INTEGRITY, sqlite_findings
    from seelen.memory.maintenance import backup as run_backup

    settings = _settings(profile, data_dir)
    # SQLite's quick check reads every page, as the copy does: 0.8-0.9 s at a million turns
    # (the full integrity check, which also matches each index to its table, 5.1-5.4 s).
    for f in sqlite_findings(settings.profile_dir / DB_FILE, quick=True):
        if f.name == INTEGRITY and not f.ok:
            raise SeelenError(
                f"the database is damaged ({f.detail}), so no backup was made (its copy would "
                f"push a good backup out): {damaged(settings.profile_dir)}"
            )
    typer.echo(str(run_backup(settings.profile_dir, settings.backups)))


@db_app.command("restore")
def restore(
    which: Annotated[
        str | None,
        typer.Argument(help="backup number (1 = newest) or name; default newest", metavar="BACKUP"),
    ] = None,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Restore a backup; the current state is backed up first. Close any chat before: it
    would go on with the memory it holds, so restore refuses while one is open."""
    from seelen.cli.common import refuse_beside_chat
    from seelen.client.connect import stop_owner
    from seelen.memory.maintenance import restore as run_restore
    from seelen.runtime import ProfileLock

    settings = _settings(profile, data_dir)
    refuse_beside_chat(settings, "close it, then run `seelen db restore` again")
    stop_owner(settings)
    lock = ProfileLock(settings.profile_dir, "db restore", settings.wait_seconds)
    lock.acquire(wait=True, on_wait=lambda line: typer.echo(line, err=True))
    try:
        source, saved = run_restore(settings.profile_dir, which, settings.backups)
    finally:
        lock.release()
    typer.echo(f"restored {source.name}; what was there is kept as {saved.name}")


@db_app.command("list")
def list_backups(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """The backups, numbered as `restore` takes them (1 = newest)."""
    from seelen.memory.maintenance import backups, human, size

    found = backups(_settings(profile, data_dir).profile_dir)
    if not found:
        typer.echo("no backups yet: `seelen db backup` makes one")
    for n, path in enumerate(found, start=1):
        typer.echo(f"{n:>3}  {path.name}  {human(size(path))}")


@db_app.command("stats")
def stats(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Counts of sessions, texts and vectors, and the size of each part of the profile."""
    from seelen.memory.maintenance import stats as run_stats

    with _memory(profile, data_dir) as app:
        rows = run_stats(app)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        typer.echo(f"{label:<{width}}  {value}")
