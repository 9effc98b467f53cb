"""A background watcher (watchdog) that reports changed files and folders in batches.

Events arrive in bursts (an editor saving writes, renames and closes), so the watcher waits
`SETTLE` seconds after the first event of a burst and reports the whole burst at once.
Opening and reading files (which the indexer itself does) is not a change and is ignored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver

# Long enough to gather one save's events, short enough to stay far inside the one second
# the index has to follow a change.
SETTLE = 0.05

_CHANGES = {"created", "modified", "deleted", "moved", "closed"}

OnChange = Callable[[set[str], set[str]], None]


class FolderWatcher:
    """Watches folders recursively; calls `on_change(files, folders)` from its own thread."""

    def __init__(self, roots: Sequence[str], on_change: OnChange) -> None:
        self.roots = list(roots)
        self.on_change = on_change
        self.last_error: str = ""
        self._files: set[str] = set()
        self._folders: set[str] = set()
        self._wake = threading.Condition()
        self._stopped = False
        self._observer: BaseObserver | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start watching (inotify on Linux) and the thread that applies the changes."""
        from watchdog.observers import Observer

        observer = self._observer = Observer()
        handler = _Handler(self)
        for root in self.roots:
            # watchdog calls only `dispatch`: no need to import its handler class to subclass.
            observer.schedule(handler, root, recursive=True)  # type: ignore[arg-type]
        observer.daemon = True
        observer.start()
        self._thread = threading.Thread(target=self._loop, name="knowledge-watch", daemon=True)
        self._thread.start()

    def note(self, event: FileSystemEvent) -> None:
        """Record one watchdog event (called from the observer's thread)."""
        if event.event_type not in _CHANGES:
            return
        paths = {event.src_path, getattr(event, "dest_path", "") or ""} - {""}
        with self._wake:
            if event.is_directory:
                if event.event_type != "modified":  # a folder's mtime says nothing new
                    self._folders.update(_text(p) for p in paths)
            else:
                self._files.update(_text(p) for p in paths)
            self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not (self._files or self._folders or self._stopped):
                    self._wake.wait()
                if self._stopped:
                    return
            time.sleep(SETTLE)  # let the rest of the burst arrive
            with self._wake:
                files, folders = self._files, self._folders
                self._files, self._folders = set(), set()
            try:
                self.on_change(files, folders)
            except Exception as exc:  # kept for `seelen knowledge list`; the next change retries
                self.last_error = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        """Stop watching and wait for the threads."""
        with self._wake:
            self._stopped = True
            self._wake.notify()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)


def _text(path: str | bytes) -> str:
    return path.decode() if isinstance(path, bytes) else path


class _Handler:
    """watchdog's handler protocol: one `dispatch(event)` method."""

    def __init__(self, watcher: FolderWatcher) -> None:
        self.watcher = watcher

    def dispatch(self, event: FileSystemEvent) -> None:
        self.watcher.note(event)
