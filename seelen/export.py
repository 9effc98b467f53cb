"""`seelen export`: everything Seelen remembers, as JSON or readable Markdown.

The format itself (and `seelen import`, which reads it back) lives in `memory/transfer.py`.
"""

from __future__ import annotations

from pathlib import Path

from seelen.app import App
from seelen.memory import transfer


def write_export(app: App, fmt: str, output: str | None) -> str | None:
    """Write the export to a file (atomically) or return it for stdout."""
    from seelen.atomic import atomic_write

    text = transfer.render_export(app.store, app.files, app.clock, fmt)
    if output:
        atomic_write(Path(output), text + "\n")
        return None
    return text
