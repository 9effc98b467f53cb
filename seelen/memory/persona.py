"""The two permanent memory files: the persona and the user profile.

Both are plain text in the profile's data dir, copied from the repository's `data/` on first
run. Every rewrite is atomic and first copies the old text into `history/`, so no update,
by the model or by hand, can destroy what was there.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from seelen.counts import counted
from seelen.files import atomic_write
from seelen.store import now_ms

PERSONA, PROFILE = "persona_memory.txt", "user_profile.txt"
DEFAULTS_DIR = Path(__file__).resolve().parents[2] / "data"
FALLBACK_PERSONA = "I am Seelen, a warm and concise companion who remembers the user.\n"


@dataclass(frozen=True)
class Change:
    """One rewrite of a memory file, for showing the user what changed."""

    name: str
    before: str
    after: str
    note: str | None = None  # why the file was left as it was (refused answer, too big)

    @property
    def changed(self) -> bool:
        return self.before.strip() != self.after.strip()

    def diff(self, max_lines: int = 40) -> list[str]:
        """A short unified diff of the change (without the file header lines)."""
        lines = difflib.unified_diff(
            self.before.splitlines(), self.after.splitlines(), lineterm="", n=0
        )
        body = [ln for ln in lines if not ln.startswith(("---", "+++", "@@"))]
        return body[:max_lines] + (
            [f"… {counted(len(body) - max_lines, 'more line')}"] if len(body) > max_lines else []
        )


class PersonaFiles:
    """Reads and safely rewrites `persona_memory.txt` and `user_profile.txt`."""

    def __init__(self, directory: Path, defaults: Path = DEFAULTS_DIR) -> None:
        self.dir = Path(directory)
        self.history = self.dir / "history"
        self._defaults = defaults
        # The texts as last read or written by this object: the prompt of every turn uses
        # them, and only the profile's one writer changes the files (see runtime.py).
        self._loaded: dict[str, str] = {}

    def ensure(self) -> None:
        """Copy the shipped defaults for whichever file does not exist yet, then `load`."""
        for name in (PERSONA, PROFILE):
            if not (self.dir / name).exists():
                atomic_write(self.dir / name, self._default(name))
        self.load()

    def load(self) -> None:
        """Read both files; one that does not exist reads as its shipped default, and is
        not created (a reader writes nothing)."""
        for name in (PERSONA, PROFILE):
            exists = (self.dir / name).exists()
            self._loaded[name] = self.read(name) if exists else self._default(name)

    def _default(self, name: str) -> str:
        source = self._defaults / name
        text = source.read_text("utf-8") if source.is_file() else ""
        return FALLBACK_PERSONA if name == PERSONA and not text.strip() else text

    def path(self, name: str) -> Path:
        """Where one of the two files lives."""
        return self.dir / name

    def read(self, name: str) -> str:
        """The file's text ('' when it does not exist).

        Bytes that are not UTF-8 read as U+FFFD, so a damaged file never stops a command; the
        tool model is never sent such a file (see `vetting.oversized_input`)."""
        path = self.dir / name
        return path.read_bytes().decode("utf-8", "replace") if path.exists() else ""

    @property
    def persona(self) -> str:
        """The persona as loaded by `ensure` or last written (no I/O)."""
        return self._loaded.get(PERSONA, "")

    @property
    def profile(self) -> str:
        """The user profile as loaded by `ensure` or last written (no I/O)."""
        return self._loaded.get(PROFILE, "")

    def write(self, name: str, text: str) -> Change:
        """Replace a file atomically, keeping the previous version in history/."""
        before = self.read(name)
        change = Change(name, before, text)
        if not change.changed:
            return change
        if before:
            stem = name.removesuffix(".txt")
            atomic_write(self.history / f"{stem}.{now_ms()}.txt", before)
        text = text if text.endswith("\n") else text + "\n"
        atomic_write(self.dir / name, text)
        self._loaded[name] = text
        return change

    def versions(self, name: str) -> list[Path]:
        """Earlier versions of a file, oldest first."""
        stem = name.removesuffix(".txt")
        return sorted(self.history.glob(f"{stem}.*.txt"), key=lambda p: int(p.stem.split(".")[-1]))
