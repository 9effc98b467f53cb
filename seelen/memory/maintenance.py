"""`seelen db`: check, repair, optimize, back up, restore and measure one profile.

Operations only; they return data and `cli/db.py` shows it. SQLite is checked through
a connection of its own, so a check sees the file as it is on disk.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from seelen.counts import counted
from seelen.errors import SeelenError, StoreError
from seelen.files import atomic_write, close_up, private_dir
from seelen.memory.indexer import KINDS, measure
from seelen.memory.persona import PERSONA, PROFILE

if TYPE_CHECKING:
    from seelen.config import Settings
    from seelen.memory.indexer import Indexer
    from seelen.memory.recall import Recall
    from seelen.store import Store
    from seelen.vectors import VectorIndex

DB_FILE = "chat_sessions.db"
INDEX_DIR = "lancedb"
BACKUPS_DIR = "backups"
FILES = (PERSONA, PROFILE)
FOLDERS = (INDEX_DIR, "history")
Progress = Callable[[int, int], None]


class OpenProfile(Protocol):
    """What these operations need of an open profile: an `App` is one."""

    settings: Settings
    store: Store
    index: Indexer | None
    recall: Recall | None


def _vectors(app: OpenProfile) -> VectorIndex:
    assert app.recall is not None and app.recall.index is not None, "an open profile has them"
    return app.recall.index


@dataclass(frozen=True)
class Finding:
    """One thing `check` looked at: whether it is right, and what it saw. A `pending` one
    is not right yet only because work is under way (texts waiting to be embedded, vectors
    of another embedding model to be replaced): the profile's writer finishes it."""

    name: str
    ok: bool
    detail: str
    pending: bool = False


@contextmanager
def _sqlite(path: Path, *, write: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection of its own to an existing database; SQLite errors become one line."""
    if not path.is_file():
        raise StoreError(f"no memory database at {path}")
    uri = path.resolve().as_uri() + ("" if write else "?mode=ro")
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=10, isolation_level=None)) as db:
            yield db
    except sqlite3.Error as exc:
        raise StoreError(f"{path.name}: {exc}") from exc


# -- check and repair ------------------------------------------------------------------


def check(app: OpenProfile, sqlite: list[Finding] | None = None) -> list[Finding]:
    """SQLite integrity and foreign keys, the vector index against the texts, and the
    persona and profile files; every finding, good or bad. `sqlite`: SQLite's findings when
    the caller made them already (`sqlite_findings`: the integrity check reads the whole
    file, 0.4 s at 100k turns)."""
    findings = sqlite if sqlite is not None else sqlite_findings(app.settings.profile_dir / DB_FILE)
    findings = [*findings, *index_findings(app)]
    for name in FILES:
        findings.append(_file_finding(app.settings.profile_dir / name))
    return findings


# The finding that says whether the file itself is sound (`db repair` cannot mend it).
INTEGRITY = "SQLite integrity"


def sqlite_findings(db_path: Path, *, quick: bool = False) -> list[Finding]:
    """SQLite's integrity_check and foreign_key_check (needs no open profile, so a damaged
    database is reported rather than refused); `quick`: its quick_check alone, which reads
    every page but matches no index to its table (all a backup needs to know)."""
    try:
        with _sqlite(db_path) as db:
            pragma = "PRAGMA quick_check" if quick else "PRAGMA integrity_check"
            verdict = [r[0] for r in db.execute(pragma)]
            orphans = [] if quick else db.execute("PRAGMA foreign_key_check").fetchall()
    except StoreError as exc:
        return [Finding(INTEGRITY, False, str(exc))]
    sound = Finding(INTEGRITY, verdict == ["ok"], "; ".join(verdict[:5]))
    point = "points" if len(orphans) == 1 else "point"
    keys = f"{counted(len(orphans), 'row')} {point} at a missing session" if orphans else "ok"
    return [sound] if quick else [sound, Finding("SQLite foreign keys", not orphans, keys)]


def index_findings(app: OpenProfile) -> list[Finding]:
    """The vector index: readable, of the current model, one vector per text."""
    index = _vectors(app)
    if not index.compatible():
        stored = index.stored_model()
        detail = f"vectors of {stored or 'an unreadable record'}, expected {index.model_id}"
        return [Finding("vector model", False, detail, pending=stored is not None)]
    findings = [Finding("vector model", True, index.model_id)]
    try:
        drifts = [measure(app.store, index, kind) for kind in KINDS]
    except StoreError as exc:
        return [*findings, Finding("vector index readable", False, str(exc))]
    for drift in drifts:
        ok, waiting = drift.ok and not drift.pending, drift.ok and bool(drift.pending)
        findings.append(Finding(f"vectors of {drift.kind}", ok, drift.describe(), waiting))
    return findings


def rebuild_under_way(app: OpenProfile) -> bool:
    """Whether a re-index is being built beside the index (or one a crash cut short waits
    for the next start to remove it)."""
    from seelen.vectors.folders import present, staging_path

    return present(staging_path(_vectors(app).path))


def _file_finding(path: Path) -> Finding:
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        return Finding(path.name, False, f"cannot be read: {exc}")
    return Finding(path.name, True, f"{len(text)} characters")


def repair(app: OpenProfile, progress: Progress | None = None) -> list[str]:
    """Fix what `check` finds that can be fixed without losing a word; returns what was
    done. SQLite damage and unreadable files are left for `restore`, and said so."""
    assert app.index is not None, "every open profile has an indexer"
    done = _adopt_orphan_rows(app.settings.profile_dir / DB_FILE)
    done += app.index.repair(progress)
    indexed = app.index.index_all(progress)
    if indexed:
        done.append(f"indexed {counted(indexed, 'text')}")
    for finding in check(app):
        if not finding.ok:
            done.append(f"still wrong: {finding.name}: {finding.detail}")
    return done


def _adopt_orphan_rows(db_path: Path) -> list[str]:
    """Turns and summaries whose session row is gone get an archived session again, so
    nothing the user said is dropped."""
    with _sqlite(db_path, write=True) as db:
        missing = [
            r[0]
            for r in db.execute(
                "SELECT session_id FROM conversation WHERE session_id NOT IN "
                "(SELECT session_id FROM session) UNION SELECT session_id FROM summary "
                "WHERE session_id NOT IN (SELECT session_id FROM session)"
            )
        ]
        for session_id in missing:
            start, end = db.execute(
                "SELECT coalesce(min(timestamp), 0), max(timestamp) FROM conversation "
                "WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            db.execute(
                "INSERT INTO session (session_id, start_timestamp, end_timestamp, status) "
                "VALUES (?, ?, ?, 'archived')",
                (session_id, start, end),
            )
    if not missing:
        return []
    their = "its" if len(missing) == 1 else "their"
    return [f"gave {counted(len(missing), 'orphaned session')} {their} session row again"]


# -- optimize ----------------------------------------------------------------------------


def optimize(app: OpenProfile) -> list[str]:
    """VACUUM and ANALYZE SQLite, compact LanceDB and rebuild its indices; returns lines."""
    directory = app.settings.profile_dir
    before = {name: size(directory / name) for name in (DB_FILE, INDEX_DIR)}
    with _sqlite(directory / DB_FILE, write=True) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("ANALYZE")
    lines = []
    if _vectors(app).compatible():
        _vectors(app).rebuild_indices()
    else:
        lines.append("vector index left alone: it needs a re-index (seelen db repair)")
    for name, old in before.items():
        lines.append(f"{name}: {human(old)} → {human(size(directory / name))}")
    return lines


# -- backup and restore ------------------------------------------------------------------


def backups(profile_dir: Path) -> list[Path]:
    """The profile's backups, newest first."""
    folder = profile_dir / BACKUPS_DIR
    if not folder.is_dir():
        return []
    return sorted(
        (p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True
    )


def backup(profile_dir: Path, keep: int, *, label: str = "", protect: Path | None = None) -> Path:
    """A consistent copy of the profile under `backups/`, made while Seelen may run (SQLite's
    backup API; the index and files copied); only the newest `keep` are kept."""
    folder = private_dir(profile_dir / BACKUPS_DIR)
    name = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + (f"-{label}" if label else "")
    base, n = name, 1
    while (folder / name).exists():  # two backups in one second
        n += 1
        name = f"{base}.{n}"
    partial = folder / f".{name}.partial"  # never listed: a crash leaves no half backup
    shutil.rmtree(partial, ignore_errors=True)
    private_dir(partial)
    try:
        _copy_profile(profile_dir, partial, salvage=bool(label))
        close_up(partial)
        partial.rename(folder / name)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    for old in backups(profile_dir)[keep:]:
        if old != protect:
            shutil.rmtree(old)
    return folder / name


def _copy_profile(source: Path, target: Path, *, salvage: bool) -> None:
    """The database, files and folders of the profile at `source` into `target`.

    `salvage` (before a restore): a missing database is skipped and an unreadable one is
    kept byte for byte, since restoring is how a user recovers from exactly that.
    """
    try:
        _copy_database(source / DB_FILE, target / DB_FILE)
    except StoreError:
        if not salvage:
            raise
        for suffix in ("", "-wal", "-shm"):
            if (source / (DB_FILE + suffix)).is_file():
                shutil.copy2(source / (DB_FILE + suffix), target / (DB_FILE + suffix))
    for name in FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    for name in FOLDERS:
        if (source / name).is_dir():
            # The index may change while it is copied; it is rebuildable from SQLite, and a
            # restore repairs any difference.
            shutil.copytree(source / name, target / name, ignore_dangling_symlinks=True)


def _copy_database(source: Path, target: Path, *, journal: str = "DELETE") -> None:
    """A consistent copy of a live database (SQLite's backup API), as one file: a backup in
    WAL mode would have every read of it leave a -wal and a -shm beside it."""
    target.unlink(missing_ok=True)
    with _sqlite(source) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)
        dst.execute(f"PRAGMA journal_mode={journal}")


def _drop_empty_journal(db: Path) -> None:
    """Remove the empty -wal and -shm that reading an older Seelen's (WAL) backup leaves."""
    wal, shm = db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")
    if wal.is_file() and wal.stat().st_size == 0:
        wal.unlink()
        shm.unlink(missing_ok=True)


def find_backup(profile_dir: Path, which: str | None) -> Path:
    """A backup by number (1 = newest), by name or unique name prefix; newest if None."""
    found = backups(profile_dir)
    if not found:
        raise SeelenError(f"no backups in {profile_dir / BACKUPS_DIR}: run `seelen db backup`")
    if which is None:
        return found[0]
    if which.isdigit():
        if not 1 <= int(which) <= len(found):
            raise SeelenError(
                f"restore: there is no backup {which}: they are numbered 1 (the newest) to "
                f"{len(found)} (`seelen db list`)"
            )
        return found[int(which) - 1]
    matches = [p for p in found if p.name == which] or [
        p for p in found if p.name.startswith(which)
    ]
    if not matches:
        raise SeelenError(f"restore: no backup is named {which!r} (`seelen db list`)")
    if len(matches) > 1:
        raise SeelenError(f"restore: {which!r} begins {len(matches)} backups' names; give more")
    return matches[0]


def restore(profile_dir: Path, which: str | None, keep: int) -> tuple[Path, Path]:
    """Replace the profile by a backup, saving the current state as a backup first; returns
    (restored backup, backup of what was there). Run it while no chat is open."""
    source = find_backup(profile_dir, which)
    saved = backup(profile_dir, keep, label="before-restore", protect=source)
    live = profile_dir / DB_FILE
    incoming = live.with_name(DB_FILE + ".restoring")
    _copy_database(source / DB_FILE, incoming, journal="WAL")
    _drop_empty_journal(source / DB_FILE)
    incoming.chmod(0o600)
    for suffix in ("-wal", "-shm"):  # the old database's journal, kept in `saved`
        live.with_name(DB_FILE + suffix).unlink(missing_ok=True)
    os.replace(incoming, live)
    for name in FILES:
        if (source / name).is_file():
            atomic_write(profile_dir / name, (source / name).read_text(encoding="utf-8"))
    for name in FOLDERS:
        _replace_folder(source / name, profile_dir / name)
    return source, saved


def _replace_folder(source: Path, live: Path) -> None:
    """Swap in a copy of `source` (or nothing, if the backup has none) at `live`."""
    incoming = live.with_name(live.name + ".restoring")
    shutil.rmtree(incoming, ignore_errors=True)
    if source.is_dir():
        shutil.copytree(source, incoming)
        close_up(incoming)
    outgoing = live.with_name(live.name + ".replaced")
    shutil.rmtree(outgoing, ignore_errors=True)
    if live.exists():
        live.rename(outgoing)
    if incoming.exists():
        incoming.rename(live)
    shutil.rmtree(outgoing, ignore_errors=True)


# -- stats -----------------------------------------------------------------------------


def stats(app: OpenProfile) -> list[tuple[str, str]]:
    """Counts of sessions, texts and vectors, and the size of each part of the profile."""
    directory = app.settings.profile_dir
    with _sqlite(directory / DB_FILE) as db:
        counts = [
            (label, db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for label, table in (
                ("sessions", "session"),
                ("turns", "conversation"),
                ("summaries", "summary"),
            )
        ]
    rows = [(label, str(n)) for label, n in counts]
    index = _vectors(app)
    for kind in KINDS:
        try:
            rows.append((f"vectors of {kind}", str(index.count(kind))))
        except StoreError as exc:
            rows.append((f"vectors of {kind}", f"unreadable ({exc})"))
    rows.append(("waiting to be indexed", str(app.store.count_unindexed())))
    database = sum(size(directory / (DB_FILE + s)) for s in ("", "-wal", "-shm"))
    rows.append(("database size", human(database)))
    for name in (INDEX_DIR, "history", "logs"):
        rows.append((f"{name} size", human(size(directory / name))))
    kept = backups(directory)
    rows.append(("backups", f"{len(kept)}, {human(size(directory / BACKUPS_DIR))}"))
    rows.append(("damaged indexes kept", str(len(index.aside()))))
    return rows


def size(path: Path) -> int:
    """Bytes in the file or folder at `path` (0 when absent)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def human(n: float) -> str:
    """`n` bytes as B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
