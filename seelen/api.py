"""A small Python API over one profile's memory: open it, import, export, recall.

    from seelen.api import Memory

    with Memory.open("/tmp/seelen-data", "default") as memory:
        memory.import_json(open("export.json", encoding="utf-8").read())
        for turn in memory.recall("peanut allergy")["turns"]:
            print(turn["rank"], turn["time"], turn["text"])

It is the same pipeline as `seelen import` and `seelen memory search --json`: no model is
started, and each recall returns the object that command prints for one query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seelen.app import App, build_app
from seelen.config import load_settings
from seelen.memory.explain import Ranking
from seelen.memory.transfer import ImportReport, export_data, import_export


class Memory:
    """One profile's memory, loaded once; close it (or use `with`) when done."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._ranking: Ranking | None = None

    @classmethod
    def open(cls, data_dir: str | Path, profile: str = "default", **settings: object) -> Memory:
        """Open (creating if needed) `profile` under `data_dir`; extra settings by env name,
        e.g. `RECALL_CONV_NUM=10`, override the environment and `.env`."""
        overrides = {"SEELEN_DATA_DIR": str(data_dir), "SEELEN_PROFILE": profile, **settings}
        return cls(build_app(load_settings(overrides), with_model=False))

    def import_json(self, text: str) -> ImportReport:
        """Import a `seelen export --format json` text and index what it added."""
        report = import_export(self._app.store, self._app.files, self._app.clock, text)
        self._app.follow_language()
        self._index()
        return report

    def export(self) -> dict[str, Any]:
        """The whole memory as the JSON export's object."""
        return export_data(self._app.store, self._app.files, self._app.clock)

    def recall(self, query: str, limit: int | None = None, mode: str = "hybrid") -> dict[str, Any]:
        """The ranking for `query` (what `seelen memory search --json` prints)."""
        if self._ranking is None:
            assert self._app.recall is not None
            self._ranking = Ranking(
                self._app.recall, self._app.clock, self._app.settings.context_tokens
            )
        self._index()
        return self._ranking.search(query, limit, mode)

    def _index(self) -> None:
        if self._app.index is not None and self._app.index.behind():
            self._app.index.index_all()

    def close(self) -> None:
        """Stop background work and close the store."""
        import asyncio

        asyncio.run(self._app.aclose())

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
