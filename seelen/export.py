"""`seelen export`: everything Seelen remembers, as JSON or readable Markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seelen.app import App
from seelen.memory.persona import PERSONA, PROFILE


def export_data(app: App) -> dict[str, Any]:
    """Everything Seelen remembers, as one JSON-ready object."""
    sessions = []
    for s in reversed(app.store.list_sessions(limit=-1)):
        summary = app.store.session_summary(s.session_id)
        sessions.append(
            {
                "session_id": s.session_id,
                "status": s.status,
                "start": app.clock.at(s.start_ms).isoformat(),
                "end": app.clock.at(s.end_ms).isoformat() if s.end_ms else None,
                "summary": summary.text if summary else None,
                "rolling_summary": s.rolling_summary or None,
                "turns": [
                    {
                        "text_id": t.text_id,
                        "time": app.clock.at(t.ts_ms).isoformat(),
                        "role": t.role,
                        "text": t.text,
                        **({"meta": t.meta} if t.meta else {}),
                    }
                    for t in app.store.turns(s.session_id)
                ],
            }
        )
    files = app.files  # read from disk: an export shows the files as they are now
    return {"persona": files.read(PERSONA), "profile": files.read(PROFILE), "sessions": sessions}


def export_markdown(data: dict[str, Any]) -> str:
    """The export as readable Markdown."""
    lines = [
        "# Seelen memory export",
        "",
        "## Persona",
        "",
        data["persona"].strip(),
        "",
        "## User profile",
        "",
        data["profile"].strip() or "(empty)",
        "",
    ]
    for s in data["sessions"]:
        lines += [f"## Session {s['session_id'][:12]} ({s['start'][:16]}, {s['status']})", ""]
        if s["summary"]:
            lines += [f"> {s['summary']}", ""]
        for t in s["turns"]:
            if t["role"] in ("user", "assistant"):
                lines += [f"**{t['role']}** ({t['time'][:16]}): {t['text']}", ""]
    return "\n".join(lines)


def write_export(app: App, fmt: str, output: str | None) -> str | None:
    """Write the export to a file (atomically) or return it for stdout."""
    from seelen.atomic import atomic_write

    data = export_data(app)
    text = (
        json.dumps(data, ensure_ascii=False, indent=2) if fmt == "json" else export_markdown(data)
    )
    if output:
        atomic_write(Path(output), text + "\n")
        return None
    return text
