"""Which folders a profile reads: KNOWLEDGE_DIRS plus the profile's own list.

The profile's list (`seelen knowledge add|remove`) is a small JSON file in the profile
folder, replaced atomically, so a crash mid-write leaves the old list intact.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from seelen.config import Settings
from seelen.errors import ConfigError, SeelenError
from seelen.files import atomic_write
from seelen.knowledge.files import NoteFilter, real_root
from seelen.knowledge.index import NoteIndex
from seelen.knowledge.library import Knowledge

FOLDERS_FILE = "knowledge_folders.json"
INDEX_DIR = "knowledge"


def configured_dirs(settings: Settings) -> list[str]:
    """The folders of KNOWLEDGE_DIRS (separated like PATH)."""
    return [d.strip() for d in settings.knowledge_dirs.split(os.pathsep) if d.strip()]


def load_folders(profile_dir: Path) -> list[str]:
    """The profile's own folder list (empty when none was added)."""
    path = profile_dir / FOLDERS_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise SeelenError(f"cannot read {path} ({exc}); fix or delete it") from None
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        raise SeelenError(f'{path}: expected {{"folders": ["/path", ...]}}')
    return folders


def add_folder(profile_dir: Path, folder: str) -> tuple[str, bool]:
    """Add a folder (stored as an absolute path) to the profile's list. Returns the path the
    list holds for it, and whether it was added: a folder the list holds already, however
    spelt (through a link too), is not added again."""
    path = os.path.abspath(os.path.expanduser(folder))
    if not os.path.isdir(path):
        raise SeelenError(f"knowledge add: {folder} is not a folder")
    folders = load_folders(profile_dir)
    same = [f for f in folders if real_root(f) == real_root(path)]
    if same:
        return same[0], False
    _save(profile_dir, [*folders, path])
    return path, True


def remove_folder(profile_dir: Path, folder: str) -> bool:
    """Remove a folder from the profile's list, however it is spelt (through a link too);
    False when it was not there."""
    folders = load_folders(profile_dir)
    real = real_root(os.path.abspath(os.path.expanduser(folder)))
    kept = [f for f in folders if f != folder and real_root(f) != real]
    if len(kept) == len(folders):
        return False
    _save(profile_dir, kept)
    return True


def _save(profile_dir: Path, folders: list[str]) -> None:
    text = json.dumps({"folders": folders}, ensure_ascii=False, indent=2) + "\n"
    atomic_write(profile_dir / FOLDERS_FILE, text)


def note_filter(settings: Settings) -> NoteFilter:
    """KNOWLEDGE_PATTERNS and KNOWLEDGE_MAX_BYTES as a filter."""
    patterns = tuple(p.strip() for p in settings.knowledge_patterns.split(",") if p.strip())
    if not patterns:
        raise ConfigError("KNOWLEDGE_PATTERNS: give at least one pattern, e.g. *.md,*.txt")
    return NoteFilter(patterns, settings.knowledge_max_bytes)


def all_folders(settings: Settings) -> list[str]:
    """KNOWLEDGE_DIRS and the profile's list, each folder once (however it is spelt, through
    a symlink too), in that order."""
    folders: dict[str, str] = {}
    for folder in [*configured_dirs(settings), *load_folders(settings.profile_dir)]:
        folders.setdefault(real_root(folder), folder)
    return list(folders.values())


def open_knowledge(settings: Settings) -> Knowledge | None:
    """The profile's Knowledge (not started), or None when it reads no folder."""
    folders = all_folders(settings)
    if not folders:
        return None
    return Knowledge(folders, settings.profile_dir / INDEX_DIR, note_filter(settings))


def indexed_counts(settings: Settings) -> dict[str, int]:
    """Notes indexed per folder (by the folder as configured), files that are not text left
    out; missing folders are left out."""
    path = settings.profile_dir / INDEX_DIR / "index.db"
    roots: list[str] = []
    if path.exists():  # a count creates no index
        index = NoteIndex(path)
        try:
            roots = index.roots_of_text_notes()
        finally:
            index.close()
    counts: dict[str, int] = {}
    for folder in all_folders(settings):
        real = real_root(folder)
        if os.path.isdir(real):
            counts[folder] = sum(1 for r in roots if r == real or r.startswith(real + os.sep))
    return counts
