"""The runtime: the one owner of a profile, and the lock that makes it the only writer.

Every process that writes to a profile (a chat, an `ask` answered in-process, the warm
owner, `save`, `forget`, `reindex`, edits) opens it through `open_writer`, which:
1. asks a warm background owner to step aside (it holds the profile while idle),
2. takes the profile's writer lock, saying once on stderr whom it waits for,
3. builds the objects (`app.build_app`), opens or restores the session, finishes a
   half-done archive, re-indexes after an embedding-model change, warms recall up and
   starts the background indexer.
Each returns the `App`; closing it closes what opening opened, newest first, and lets the
next writer in last.
Commands that only read (lists, shows, searches, export) open the profile without the lock,
read-only (`open_reader`): the store with SQLite's `mode=ro`, the vectors refusing
every write, no indexer, no folder or file created. SQLite's WAL lets them read while the
owner writes; texts the writer has not indexed yet are found by their words only
(`unindexed_note` says so). Indexing is the writer's alone (`App.index_pending` raises
without the lock); a search indexes first only when no process holds the profile
(`open_if_free`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from seelen.app import App, build_app
from seelen.app.core import DB_FILE
from seelen.client import place
from seelen.config import Settings, existing_profiles
from seelen.counts import counted
from seelen.errors import ConfigError, SeelenError
from seelen.files import private_dir
from seelen.store import OutdatedStore, Session, Store
from seelen.store.records import LONGEST_ID

T = TypeVar("T")

LOCK_FILE = place.LOCK_FILE


class ProfileBusy(SeelenError):
    """Another process owns the profile, and this one was not to wait."""


class ProfileLock:
    """`fcntl.flock` on `<profile>/owner.lock`; the file names the holder (pid, role).

    The kernel drops the lock when its process dies, however it dies, so a crash never
    leaves a profile locked. A writer that finds it held waits at most `wait_seconds`
    (SEELEN_WAIT_SECONDS), then raises ProfileBusy: no wait is without limit.
    """

    def __init__(self, directory: Path, role: str, wait_seconds: float = 120.0) -> None:
        self.path = Path(directory) / LOCK_FILE
        self.role = role
        self.wait_seconds = wait_seconds
        self._fd: int | None = None

    def holder(self) -> str:
        """Who holds the lock, in words, from what the holder wrote into the file."""
        return place.Holder.read(self.path.parent).line()

    def waiting_line(self) -> str:
        """What a writer that waits for the holder says, once."""
        return f"waiting for {self.holder()} to finish with this profile…"

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; False when another process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "role": self.role}).encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def busy(self) -> ProfileBusy:
        """The error of a writer that was not to wait."""
        return ProfileBusy(f"{self.holder()} is using this profile")

    def acquire(self, *, wait: bool, on_wait: Callable[[str], None] = lambda _: None) -> None:
        """Take the lock; when another process has it, wait (saying so) at most
        `wait_seconds`, or raise ProfileBusy at once (`wait=False`)."""
        if self.try_acquire():
            return
        if not wait:
            raise self.busy()
        for pause in self.pauses(on_wait):
            time.sleep(pause)
            if self.try_acquire():
                return

    def pauses(self, on_wait: Callable[[str], None]) -> Iterator[float]:
        """How a writer waits, once refused: it says whom it waits for, then tries again
        after each pause yielded here, until `wait_seconds` pass (then ProfileBusy)."""
        on_wait(self.waiting_line())
        deadline = time.monotonic() + self.wait_seconds
        while time.monotonic() < deadline:
            yield LOCK_POLL_SECONDS
        holder = place.Holder.read(self.path.parent)
        raise ProfileBusy(holder.still_there(self.wait_seconds))

    @property
    def held(self) -> bool:
        """True while this object holds the lock (no I/O: it is this process's state)."""
        return self._fd is not None

    def release(self) -> None:
        """Let the next writer in."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


# How often a writer that waits for the profile tries its lock again. Polling, rather than
# a blocking flock in a thread, keeps the wait cancellable: a chat closed while it waits
# leaves no thread blocked behind it. A tenth of a second is below what a person notices.
LOCK_POLL_SECONDS = 0.1


async def take_lock(
    lock: ProfileLock, *, wait: bool, on_wait: Callable[[str], None] = lambda _: None
) -> None:
    """Take `lock`; when another process has it, wait (saying so once) at most its
    `wait_seconds`, or raise ProfileBusy."""
    if lock.try_acquire():
        return
    if not wait:
        raise lock.busy()
    for pause in lock.pauses(on_wait):
        await asyncio.sleep(pause)  # the event loop runs on: a chat can leave meanwhile
        if lock.try_acquire():
            return


async def open_writer(
    settings: Settings,
    *,
    role: str,
    on_line: Callable[[str], None] = lambda _: None,
    wait: bool = True,
    with_model: bool = True,
    start_indexer: bool = True,
    finish_archives: bool = True,
    on_locked: Callable[[], None] = lambda: None,
    lock: ProfileLock | None = None,
) -> App:
    """Open the profile as its writer (see the module docstring for the steps); closing
    the App lets the next writer in, last. Cancelling it while it waits for the lock is
    safe; `on_locked` says when it has it. `lock`: the profile's lock, held already by this
    process (a resting owner's); the caller keeps it if opening fails."""
    await asyncio.to_thread(make_profile_dir, settings.profile_dir)
    if role != "owner":
        from seelen.client.connect import stop_owner

        await asyncio.to_thread(stop_owner, settings)
    async with contextlib.AsyncExitStack() as stack:  # a step that fails closes the rest
        if lock is None:
            lock = ProfileLock(settings.profile_dir, role, settings.wait_seconds)
            await take_lock(lock, wait=wait, on_wait=on_line)
            stack.callback(lock.release)
        on_locked()
        app = await asyncio.to_thread(
            build_app, settings, progress=on_line, with_model=with_model, lock=lock
        )
        stack.pop_all()  # the App releases the lock now, after everything else it closes
        stack.push_async_callback(app.aclose)
        await app.start(on_line, start_indexer=start_indexer, finish_archives=finish_archives)
        stack.pop_all()
    return app


def open_memory(
    settings: Settings,
    *,
    role: str,
    wait: bool = True,
    on_line: Callable[[str], None] = lambda _: None,
    step_aside: bool = True,
) -> App:
    """The profile's memory alone (no model, nothing started) as its writer: for the
    Python API and for indexing before a search. `step_aside`: a warm owner that holds
    the profile is asked to stop first. Raises ProfileBusy when another process holds
    it and `wait` is False."""
    make_profile_dir(settings.profile_dir)
    if step_aside:
        from seelen.client.connect import stop_owner

        stop_owner(settings)
    lock = ProfileLock(settings.profile_dir, role, settings.wait_seconds)
    lock.acquire(wait=wait, on_wait=on_line)
    try:
        return build_app(settings, with_model=False, lock=lock)
    except BaseException:
        lock.release()
        raise


def open_if_free(settings: Settings, *, role: str) -> App | None:
    """`open_memory` when no process holds the profile now; None when one does (it
    indexes by itself), when the profile holds no memory yet (nothing is created), or
    when its folder cannot be written."""
    if not (settings.profile_dir / DB_FILE).is_file():
        return None
    if not os.access(settings.profile_dir, os.W_OK):
        return None  # a folder that cannot be written (a read-only backup) is only read
    try:
        return open_memory(settings, role=role, wait=False, step_aside=False)
    except ProfileBusy:
        return None


async def open_observer(
    settings: Settings, *, on_line: Callable[[str], None], ephemeral: bool = False
) -> App:
    """Open the profile with its model to answer without writing (an ephemeral ask,
    `doctor`): no lock, the memory read-only, no session created, no indexer."""
    app = await asyncio.to_thread(_build_reader, settings, progress=on_line, with_model=True)
    try:
        app.sessions.peek()
        if ephemeral and app.recall is not None:
            app.recall.warm(app.sessions.current.session_id)
    except BaseException:
        await app.aclose()
        raise
    return app


def open_reader(settings: Settings) -> App:
    """Open the profile to read it: no lock, no model, no background work, the memory
    read-only; nothing is created, not even for a profile that does not exist."""
    must_exist(settings)
    return _build_reader(settings, with_model=False)


def must_exist(settings: Settings) -> None:
    """A reader of a profile that does not exist, beside profiles that do, was most likely
    given a misspelt name: say which exist instead of showing an empty memory. (In a new
    data dir, with no profile at all, reading shows the empty memory.)"""
    if settings.profile_dir.is_dir():
        return
    others = existing_profiles(settings.data_dir)
    if others:
        raise ConfigError(
            f"there is no profile {settings.profile!r} in {settings.data_dir} (its profiles: "
            f"{', '.join(others)}); a chat, an ask or an import with that name would start it"
        )


def _build_reader(
    settings: Settings, *, with_model: bool, progress: Callable[[str], None] = lambda _: None
) -> App:
    """A read-only App. A memory file of an older Seelen is first brought up to date by a
    writer's migrations, under the lock, when no other process holds the profile."""
    try:
        return build_app(settings, progress=progress, with_model=with_model, read_only=True)
    except OutdatedStore:
        lock = ProfileLock(settings.profile_dir, "update", settings.wait_seconds)
        try:
            lock.acquire(wait=False)
        except ProfileBusy:
            raise OutdatedStore(
                f"{settings.profile_dir / DB_FILE} was written by an older Seelen, and "
                f"{lock.holder()} holds it: close it, then try again"
            ) from None
        try:
            Store(settings.profile_dir / DB_FILE).close()  # opening as a writer migrates
        finally:
            lock.release()
        return build_app(settings, progress=progress, with_model=with_model, read_only=True)


def make_profile_dir(directory: Path) -> None:
    """The profile's folder, made private (0700) if it is new; one line if it cannot be."""
    try:
        private_dir(directory)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"SEELEN_DATA_DIR: cannot write to {directory} ({reason})") from None


# --- operations on the opened profile ------------------------------------------------


def reindex_all(app: App, progress: Callable[[int, int], None] | None = None) -> int:
    """`seelen memory reindex`: embed all texts again into new tables, swapped in when done."""
    assert app.index is not None
    return app.index.rebuild(progress)


def unindexed_note(app: App) -> str:
    """For a reader, one line on what recall can find by its words only ('' when nothing):
    texts the writer has not indexed yet, or vectors of another embedding model."""
    if app.recall is None or app.recall.index is None or not app.store.has_history():
        return ""
    if not app.recall.index.compatible():
        return (
            "the vector index holds another embedding model's vectors: recall uses keywords "
            "only until Seelen re-indexes (it does when it next writes to this profile)"
        )
    waiting = app.store.count_unindexed()
    if not waiting:
        return ""
    newer = counted(waiting, "newer text")
    are = "is" if waiting == 1 else "are"
    return (
        f"{newer} {are} not in the vector index yet: recall finds them by their words only "
        "until Seelen indexes them"
    )


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


def _quoted(prefix: str) -> str:
    """`prefix` quoted for an error line; one longer than any id (a pasted text) is cut."""
    if len(prefix) <= LONGEST_ID:
        return repr(prefix)
    return f"{prefix[:LONGEST_ID]!r}… ({len(prefix):,} characters)"


def resolve_session(app: App, prefix: str) -> Session:
    """A session by its id or a unique prefix of it (at least 4 characters)."""
    missing = f"no session starts with {_quoted(prefix)} (see `seelen sessions list`)"
    return _unique(prefix, app.store.find_sessions, missing, "sessions")


def forget_text(app: App, text_id: str) -> int:
    """Delete one turn or summary (by id or unique prefix) from SQLite and LanceDB."""
    missing = f"no memory has the id {_quoted(text_id)} (see `seelen memory search`)"
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
