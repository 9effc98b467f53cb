"""A small Python API over one profile's memory: open it, import, export, recall.

    from seelen.api import Memory

    with Memory.open("/tmp/seelen-data", "default") as memory:
        memory.import_json(open("export.json", encoding="utf-8").read())
        for turn in memory.search("peanut allergy").turns:
            print(turn.rank, turn.time, turn.text)

It is the same service as `seelen memory search --json` and `seelen mcp` use: no model is
started; `search` returns the protocol's `SearchResult`, `recall` the JSON object that
command prints for one query.

Opened as the profile's writer (the default), a Memory holds the profile's lock until it
is closed, as a chat does; `read_only=True` opens it as a reader, beside a running chat.
"""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

from seelen.app import App
from seelen.config import load_settings
from seelen.errors import SeelenError
from seelen.memory.transfer import ImportReport, export_data, import_export
from seelen.protocol import to_json
from seelen.protocol.calls import Search
from seelen.protocol.results import SearchResult
from seelen.runtime import open_memory, open_reader, unindexed_note
from seelen.service import ProfileService


class Memory:
    """One profile's memory, loaded once; close it (or use `with`) when done."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.service = ProfileService(app)
        self._told = False  # a reader says once what it finds by words only

    @classmethod
    def open(
        cls,
        data_dir: str | Path,
        profile: str = "default",
        *,
        read_only: bool = False,
        wait: bool = False,
        **settings: str,
    ) -> Memory:
        """Open `profile` under `data_dir`; extra settings by env name, e.g.
        `RECALL_CONV_NUM="10"`, override the environment and `.env`.

        As the profile's writer (created if needed; a warm background Seelen steps aside):
        when a chat holds the profile this raises `ProfileBusy`, or waits with `wait=True`.
        `read_only=True`: recall and export only, no lock, nothing written or created; texts
        the writer has not indexed yet are found by their words only (said once, as a
        warning).
        """
        overrides = {"SEELEN_DATA_DIR": str(data_dir), "SEELEN_PROFILE": profile, **settings}
        config = load_settings(overrides)
        if read_only:
            return cls(open_reader(config))
        return cls(open_memory(config, role="python api", wait=wait))

    def import_json(self, text: str) -> ImportReport:
        """Import a `seelen export --format json` text and index what it added."""
        if self._app.lock is None:
            raise SeelenError("this Memory was opened read_only: importing writes")
        report = import_export(self._app.store, self._app.files, self._app.clock, text)
        self._app.follow_language()
        self._app.index_pending()
        return report

    def export(self) -> dict[str, Any]:
        """The whole memory as the JSON export's object."""
        return export_data(self._app.store, self._app.files, self._app.clock)

    def search(self, query: str, limit: int | None = None, mode: str = "hybrid") -> SearchResult:
        """The ranking for `query`, as the chat ranks it (`limit` turns, default chat's)."""
        if self._app.lock is not None:
            self._app.index_pending()  # the newest texts are found by meaning too
        elif not self._told:
            self._told = True
            if note := unindexed_note(self._app):
                warnings.warn(note, stacklevel=3)
        if not query.strip():
            return SearchResult(query=query, mode=mode)
        return self.service.search(Search(query=query, limit=limit, mode=mode))

    def recall(self, query: str, limit: int | None = None, mode: str = "hybrid") -> dict[str, Any]:
        """The ranking for `query` as JSON data (what `seelen memory search --json` prints)."""
        data: dict[str, Any] = to_json(self.search(query, limit, mode))
        return data

    def close(self) -> None:
        """Stop background work, close the store and, for a writer, let the next one in."""
        asyncio.run(self._app.aclose())

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
