"""The model record: a small JSON file beside the tables naming the embedding model that
made the vectors, their size, and how many rows each vector index was trained on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seelen.files import atomic_write

META_FILE = "seelen_vectors.json"


class ModelRecord:
    """The record file, read once and cached once it exists; `write` replaces it atomically.

    An absent record is not cached: a reader opened on a new profile must see the record
    the writer makes with its first vectors, or it would take them for another model's."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._data: dict[str, Any] | None = None
        self._loaded = False

    def read(self) -> dict[str, Any] | None:
        """The record; None when there is none, {} when it cannot be read (taken for
        another model, so the vectors are rebuilt)."""
        if not self._loaded:
            try:
                data = json.loads(self.file.read_text(encoding="utf-8"))
                self._data = data if isinstance(data, dict) else {}
            except FileNotFoundError:
                return None  # looked for again next time
            except (OSError, ValueError):
                self._data = {}
            self._loaded = True
        return self._data

    def write(self, data: dict[str, Any]) -> None:
        """Replace the record with `data`."""
        atomic_write(self.file, json.dumps(data, indent=2) + "\n")
        self._data, self._loaded = data, True

    def trained_rows(self) -> dict[str, int]:
        """Rows each kind's vector index was last trained on."""
        trained = (self._data or {}).get("trained_rows")
        return dict(trained) if isinstance(trained, dict) else {}
