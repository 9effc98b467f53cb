"""One loaded object per file for the whole process (an ONNX session, a tokenizer): every
embedder of the process shares it instead of loading its own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class PerFile(Generic[T]):
    """`load(path)` called once per file (by its resolved path), under a lock; `forget`
    drops it (holders keep theirs), and the next `get` loads it again."""

    def __init__(self, load: Callable[[Path], T]) -> None:
        self._load = load
        self._loaded: dict[Path, T] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> T:
        """The process's object for the file at `path`, loaded on first use."""
        key = path.resolve()
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = self._load(key)
            return self._loaded[key]

    def forget(self, path: Path) -> None:
        """Drop the object for `path`; the next `get` loads it again."""
        with self._lock:
            self._loaded.pop(path.resolve(), None)
