"""What `seelen mcp` checks about a profile without opening it (standard library only)."""

from __future__ import annotations

import json
from pathlib import Path

from seelen.config import Settings

DEFAULT_PROFILE = "default"
MEMORY_FILE = "chat_sessions.db"
# The profile's own knowledge folders (seelen/knowledge/folders.py), read here without
# importing the knowledge package (0.3 s): only whether there is one.
FOLDERS_FILE = "knowledge_folders.json"


def missing_profile(settings: Settings) -> str | None:
    """Why the profile cannot be served (it does not exist), or None.

    The default profile is made by its first use, from any front-end; another name that does
    not exist is most likely misspelt in the client's configuration, so nothing is created.
    """
    if settings.profile == DEFAULT_PROFILE or (settings.profile_dir / MEMORY_FILE).exists():
        return None
    data_dir = Path(settings.data_dir)
    names = sorted(p.parent.name for p in data_dir.glob(f"*/{MEMORY_FILE}")) or ["none yet"]
    return (
        f"there is no profile {settings.profile!r} in {data_dir} (profiles: {', '.join(names)});"
        f" `seelen --profile {settings.profile}` creates it"
    )


def knowledge_configured(settings: Settings) -> bool:
    """Whether the profile reads knowledge folders (KNOWLEDGE_DIRS or `knowledge add`)."""
    if settings.knowledge_dirs.strip():
        return True
    try:
        data = json.loads((settings.profile_dir / FOLDERS_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("folders"))


def served(settings: Settings) -> str:
    """Which memory this server serves, and whether it is new and empty (a client that does
    not pass SEELEN_DATA_DIR gets the default data dir's, maybe not the user's own)."""
    line = f"It serves Seelen's profile {settings.profile!r} in {settings.data_dir}"
    if not (settings.profile_dir / MEMORY_FILE).exists():
        return (
            f"{line}, which is new and empty: nothing is remembered there yet (set "
            "SEELEN_DATA_DIR or --data-dir in this client's configuration if the user's "
            "memory lives elsewhere)."
        )
    return line + "."
