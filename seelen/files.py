"""How Seelen writes files: private (folders 0700, files 0600, whatever the umask) and, when
a file is replaced, atomically (a reader sees the old file or the new one, never half).

Seelen's memory is personal. Rather than chmod each file after the fact (SQLite's -wal and
-shm files, LanceDB's fragments and logs are created by libraries), the process umask is
narrowed before the profile is opened, and whatever an earlier version left open is fixed.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE, FILE_MODE = 0o700, 0o600


def atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Write `text` (or its pieces, one after another) to `path` through a synced temporary
    file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines([text] if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # makes the rename itself survive a power cut
    finally:
        os.close(dir_fd)


def private_dir(path: Path) -> Path:
    """Create the folder `path` 0700 whatever the umask, and each parent it lacks 0700 too
    (`mkdir`'s mode reaches only the last one), and return it; an existing `path` that
    others may read is closed up, existing parents are left as they are."""
    missing: list[Path] = []
    folder = Path(path)
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():  # a file in the way
                raise
            continue  # another process made it meanwhile: it is theirs
        folder.chmod(DIR_MODE)  # mkdir's mode passes through the umask
    _fix(path, DIR_MODE)
    return path


def make_private(profile_dir: Path) -> None:
    """Narrow the umask for this process and close up the profile folder and its contents."""
    os.umask(PRIVATE_UMASK)
    close_up(private_dir(profile_dir))


def close_up(folder: Path) -> None:
    """`folder` and the folders below it 0700, its files 0600: what others may read is
    closed up."""
    _fix(folder, DIR_MODE)
    for root, dirs, files in os.walk(folder):  # never follows symlinks
        for name in dirs:
            _fix(Path(root) / name, DIR_MODE)
        for name in files:
            _fix(Path(root) / name, FILE_MODE)


def _fix(path: Path, mode: int) -> None:
    try:
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077:
            path.chmod(stat.S_IMODE(info.st_mode) & ~0o077 | (mode & 0o700))
    except OSError:  # a file that went away or is not ours: nothing to protect here
        pass
