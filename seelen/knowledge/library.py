"""Knowledge: the user's note folders, kept indexed, searched by question.

`start()` catches up in the background (notes changed, added or deleted while Seelen was not
running are found by their mtime and size) and then keeps the index current with a watcher.
`search()` may be called at any time: during a first indexing it answers from what is
indexed so far.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from seelen.knowledge.files import (
    NoteFile,
    NoteFilter,
    display_path,
    note_file,
    read_note,
    real_root,
    walk,
)
from seelen.knowledge.index import NoteIndex
from seelen.knowledge.search import CANDIDATES, passages, plan
from seelen.knowledge.watch import FolderWatcher
from seelen.protocol.results import NotePassage

# Notes read and written per transaction while catching up: large enough that commits do
# not dominate, small enough that a search sees progress during a first indexing.
BATCH = 200
# How long a search waits for the start's catch-up: a warm catch-up of 10,000 notes (a walk
# of stat calls) ends well within it; a first indexing does not, and is not waited for.
READY_WAIT = 2.0


@dataclass
class Progress:
    """How far the catch-up is: notes checked, notes (re)indexed, notes dropped."""

    checked: int = 0
    indexed: int = 0
    dropped: int = 0
    done: bool = False
    skipped: list[str] = field(default_factory=list)  # files that are not text
    too_large: set[str] = field(default_factory=set)  # files named as notes, over the limit


class Knowledge:
    """The notes of one profile's knowledge folders, indexed in `state_dir`."""

    def __init__(
        self, folders: Sequence[str], state_dir: Path, rules: NoteFilter | None = None
    ) -> None:
        self.rules = rules or NoteFilter()
        self.roots = _distinct_roots(folders)
        self.index = NoteIndex(Path(state_dir) / "index.db")
        self.progress = Progress()
        self.error = ""  # why the catch-up or the watcher stopped ("" when all is well)
        self._ready = threading.Event()
        self._stop = threading.Event()
        # The catch-up and the watcher both write; one at a time, batch by batch, so neither
        # writes what it read before the other's newer change.
        self._lock = threading.Lock()
        self._watcher: FolderWatcher | None = None
        self._thread: threading.Thread | None = None
        self._gone: set[str] = set()  # folders found moved away or removed, their notes dropped

    def start(self, *, watch: bool = True) -> None:
        """Watch the folders, then catch up in a background thread."""
        if watch and self.roots:
            # Watching starts first, so a change made during the catch-up is not missed.
            watcher = FolderWatcher(self.roots, self.apply)
            try:
                watcher.start()
                self._watcher = watcher
            except OSError as exc:  # e.g. the inotify watch limit: the next start catches up
                watcher.close()
                self.error = f"not watching the folders ({exc})"
        self._thread = threading.Thread(target=self._run, name="knowledge-index", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.catch_up()
        except Exception as exc:  # a background thread: keep the reason for the user
            self.error = f"indexing the notes failed ({type(exc).__name__}: {exc})"

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the catch-up to finish; True when it has."""
        return self._ready.wait(timeout)

    def catch_up(self) -> Progress:
        """Bring the index in step with the folders: new, changed and vanished notes."""
        try:
            seen = self._sync(None)
            if self._stop.is_set():
                return self.progress  # an early stop saw only part of the folders
            with self._lock:  # the watcher may have added a note since the walk passed by
                gone = [
                    p for p in self.index.signatures() if p not in seen and not self._qualifies(p)
                ]
                self.index.drop(gone)
            self.progress.dropped += len(gone)
        finally:
            self.progress.done = True
            self._ready.set()
        return self.progress

    def _sync(self, under: str | None) -> set[str]:
        """(Re)index every note whose signature changed, in `under` or everywhere; returns
        the paths of the notes found."""
        known = self.index.signatures()
        seen: set[str] = set()
        batch: list[NoteFile] = []
        for root in self.roots:
            if under is not None and not _below(under, root):
                continue
            for note in walk(root, self.rules, under, self.progress.too_large):
                if self._stop.is_set():
                    return seen
                seen.add(note.path)
                self.progress.checked += 1
                if known.get(note.path) != (note.mtime_ns, note.size, root):
                    batch.append(note)
                if len(batch) >= BATCH:
                    self._index(batch)
                    batch = []
        self._index(batch)
        return seen

    def _qualifies(self, path: str) -> bool:
        root = next((r for r in self.roots if _below(path, r)), None)
        return root is not None and note_file(path, root, self.rules) is not None

    def _index(self, notes: Iterable[NoteFile]) -> None:
        with self._lock:
            self._index_locked(notes)

    def _index_locked(self, notes: Iterable[NoteFile]) -> None:
        items = []
        for note in notes:
            read = read_note(note, self.rules)
            if read is not None and read[1] is None:
                self.progress.skipped.append(note.path)
            items.append(read if read is not None else (note, None))
        if items:
            self.index.put(items)
            self.progress.indexed += len(items)

    def apply(self, files: set[str], folders: set[str]) -> None:
        """Reflect changed files and folders (from the watcher) in the index."""
        for folder in folders:
            self._apply_folder(folder)
        with self._lock:
            self._apply_files(files)

    def _apply_folder(self, folder: str) -> None:
        seen = self._sync(folder) if os.path.isdir(folder) else set()
        if self._stop.is_set():
            return
        prefix = folder.rstrip(os.sep) + os.sep
        with self._lock:
            known = self.index.signatures()
            self.index.drop(p for p in known if p.startswith(prefix) and p not in seen)

    def _apply_files(self, files: set[str]) -> None:
        known = self.index.signatures()
        changed, gone = [], []
        for path in files:
            root = next((r for r in self.roots if _below(path, r)), None)
            note = note_file(path, root, self.rules) if root else None
            if note is not None:
                if known.get(path) != (note.mtime_ns, note.size, root):
                    changed.append(note)
            elif path in known:
                gone.append(path)
        self._index_locked(changed)
        self.index.drop(gone)

    def search(self, question: str, budget_tokens: int) -> list[NotePassage]:
        """The passages that best answer `question`, best first, within `budget_tokens`."""
        if self._thread is not None:
            self._ready.wait(READY_WAIT)
        try:
            if self._thread is not None:
                self._check_roots()
            query = plan(self.index, question)
            hits = self.index.search(query.match, CANDIDATES) if query else []
        except sqlite3.Error as exc:  # the notes are an extra: a broken index never ends a turn
            self.error = f"cannot read {self.index.path} ({exc}); delete it to rebuild it"
            return []
        if query is None:
            return []
        show = {h.path: display_path(h.path, self.roots) for h in hits}
        return passages(hits, query, budget_tokens, show)

    def _check_roots(self) -> None:
        """Reflect a knowledge folder itself moved away (renamed) or back: no watcher event
        says so (inotify's IN_MOVE_SELF reaches no handler), and its notes were found at
        paths that no longer exist. One stat per folder and search."""
        for root in self.roots:
            there = os.path.isdir(root)
            if there and root in self._gone:
                self._gone.discard(root)
            elif not there and root not in self._gone:
                self._gone.add(root)
            else:
                continue
            self._apply_folder(root)  # drops its notes, or reads them again

    @property
    def problem(self) -> str:
        """Why the index may be behind the folders ("" when it is not)."""
        return self.error or (self._watcher.last_error if self._watcher else "")

    def close(self) -> None:
        """Stop the watcher and the catch-up, then close the index."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.index.close()


def _below(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _distinct_roots(folders: Sequence[str]) -> list[str]:
    """Real paths of the existing folders, leaving out any folder inside another one."""
    roots = sorted({real_root(f) for f in folders if os.path.isdir(real_root(f))})
    return [r for r in roots if not any(r != o and _below(r, o) for o in roots)]
