"""Which files of a knowledge folder are notes, and reading them safely.

A note matches one of the patterns (by file name), lies in no hidden folder, is not hidden
itself, is not over the size limit, and really lies inside its folder: a symbolic link is
read only when its target is inside the same folder, and linked folders are never entered
(that also keeps a link loop from walking forever).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

# A file whose first 8 KiB hold a NUL byte is binary, whatever its name says (the same
# heuristic as git and grep).
_BINARY_PROBE = 8192
# The control characters text does not hold (it holds tabs, line breaks, form feeds and the
# escape of colours).
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f]")  # all but \t \n \v \f \r \x1b
# Those a text may hold, as a share of its characters: there are none in docs/*.md, the
# tests' 49 notes, or the LoCoMo and MemoryBank text and JSON files (measured); random
# bytes have ~10% (27 of 256 values). One in a thousand keeps a note with a stray bell or
# backspace and drops any binary by a wide margin.
_MAX_CONTROLS = 0.001


@dataclass(frozen=True)
class NoteFile:
    """A note found in a folder: where it is, and its signature (mtime, size)."""

    path: str  # absolute, as seen inside the folder
    root: str  # the knowledge folder it belongs to (real path)
    mtime_ns: int
    size: int


@dataclass(frozen=True)
class NoteFilter:
    """The rules that make a file a note: name patterns and a size limit in bytes."""

    patterns: tuple[str, ...] = ("*.md", "*.txt")
    max_bytes: int = 2_000_000

    def wants_name(self, name: str) -> bool:
        """True when a file name matches a pattern (case-insensitive) and is not hidden."""
        if name.startswith("."):
            return False
        lowered = name.lower()
        return any(fnmatch.fnmatch(lowered, p.lower()) for p in self.patterns)


def real_root(folder: str) -> str:
    """The real, absolute path of a knowledge folder (the folder itself may be a link)."""
    return os.path.realpath(os.path.expanduser(folder))


def inside(path: str, root: str) -> bool:
    """True when the real path of `path` lies inside `root` (a real path)."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def walk(
    root: str, rules: NoteFilter, under: str | None = None, too_large: set[str] | None = None
) -> Iterator[NoteFile]:
    """Every note in `root` (or in its subfolder `under`), never leaving the folder; the
    paths of files that would be notes but for their size are added to `too_large`."""
    start = under or root
    if not inside(start, root) or _hidden_below(start, root):
        return
    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # vanished or unreadable: nothing to index there
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                st = _candidate(entry.path, root, rules)
            except OSError:
                continue
            if st is not None and st.st_size > rules.max_bytes:
                if too_large is not None:
                    too_large.add(entry.path)
            elif st is not None:
                yield NoteFile(entry.path, root, st.st_mtime_ns, st.st_size)


def note_file(path: str, root: str, rules: NoteFilter) -> NoteFile | None:
    """The note at `path`, or None when it is not one (any more): wrong name, hidden,
    too large, outside the folder, not a regular file, or gone."""
    st = _candidate(path, root, rules)
    if st is None or st.st_size > rules.max_bytes:
        return None
    return NoteFile(path, root, st.st_mtime_ns, st.st_size)


def _candidate(path: str, root: str, rules: NoteFilter) -> os.stat_result | None:
    """The stat of the file at `path` when it is a note but for its size (its name, not
    hidden, inside the folder, a regular file); None otherwise, or when it is gone."""
    if not rules.wants_name(os.path.basename(path)) or _hidden_below(path, root):
        return None
    if not inside(path, root):
        return None
    try:
        st = os.stat(path)  # follows a link, whose target was just checked to be inside
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _hidden_below(path: str, root: str) -> bool:
    """True when a part of `path` below `root` starts with a dot."""
    rel = os.path.relpath(os.path.abspath(path), root)
    return any(part.startswith(".") and part not in (".", "..") for part in rel.split(os.sep))


def read_note(note: NoteFile, rules: NoteFilter) -> tuple[NoteFile, str | None] | None:
    """The note's text with its signature at reading time; text None when the file is not
    text (binary: skipped, whatever its name says); None when it is too large or gone. UTF-8
    first; GB18030 next, since Chinese notes saved by older Windows editors use it; then
    Windows-1252, which Western ones use."""
    if not inside(note.path, note.root):  # the link may have changed since the walk
        return None
    try:
        with open(os.path.realpath(note.path), "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size > rules.max_bytes:
                return None
            data = f.read(rules.max_bytes + 1)
    except OSError:
        return None
    if len(data) > rules.max_bytes:
        return None
    fresh = NoteFile(note.path, note.root, st.st_mtime_ns, st.st_size)
    return fresh, as_text(data)


def as_text(data: bytes) -> str | None:
    """`data` decoded as UTF-8, GB18030 or Windows-1252 (Latin-1), or None when it is not
    text: a NUL byte in its first 8 KiB, or control characters (a binary file decodes as
    one of them, full of them). GB18030 is taken only when it reads Chinese, not a Western
    note's accented letters paired with the letters after them ("crème" read as "cr鑝e")."""
    if b"\0" in data[:_BINARY_PROBE]:
        return None
    for encoding in ("utf-8-sig", "gb18030", "cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if encoding == "gb18030" and not _reads_chinese(text):
            continue
        controls = len(_CONTROLS.findall(text))
        return text if controls <= len(text) * _MAX_CONTROLS else None
    return None


# Chinese in GB18030 pairs a lead byte with a trail byte over 0x7F: one pair in 58,827 of
# the MemoryBank Chinese set and the tests' notes has an ASCII trail (measured). A Western
# note in Windows-1252 read as GB18030 has almost only such pairs (an accent, then the
# letter after it). Half keeps every Chinese text and drops every Western one by far.
_MAX_ASCII_TRAILS = 0.5


def _reads_chinese(text: str) -> bool:
    """Whether `text`, decoded as GB18030, holds Chinese rather than paired Latin-1 bytes."""
    pairs = [ch.encode("gb18030") for ch in text if ord(ch) > 0x7F]
    pairs = [b for b in pairs if len(b) == 2]
    ascii_trails = sum(1 for b in pairs if b[1] < 0x80)
    return ascii_trails <= len(pairs) * _MAX_ASCII_TRAILS


def display_path(path: str, roots: Sequence[str]) -> str:
    """A note's path as shown to the user: its folder's name, then the path inside it."""
    for root in roots:
        if path.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.join(os.path.basename(root), os.path.relpath(path, root))
    return path
