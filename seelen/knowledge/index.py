"""The incremental index of the notes: SQLite with FTS5, in the profile folder.

It holds derived data only (the notes themselves are the source of truth), so a schema
change simply rebuilds it. One connection writes (the catch-up and the watcher, one at a
time); another reads, so a search never waits for a long first indexing (WAL mode).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from seelen.files import private_dir
from seelen.knowledge.files import NoteFile
from seelen.knowledge.text import chunks, term_text

SCHEMA_VERSION = 2

# bm25 weight of each column of `chunk_terms`: the text, its heading path, its file's path.
# A heading or a file name states what the whole chunk is about, so one of its terms is
# worth two in the running text.
COLUMN_WEIGHTS = (1.0, 2.0, 2.0)

_SCHEMA = """
CREATE TABLE files(path TEXT PRIMARY KEY, root TEXT NOT NULL, mtime_ns INTEGER NOT NULL,
                   size INTEGER NOT NULL);
CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, seq INTEGER NOT NULL,
                    heading TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX chunks_by_path ON chunks(path, seq);
CREATE VIRTUAL TABLE chunk_terms USING fts5(body, heading, name, content = '',
                                            tokenize = 'unicode61 remove_diacritics 0');
CREATE VIRTUAL TABLE vocab USING fts5vocab(chunk_terms, row);
"""


@dataclass(frozen=True)
class Hit:
    """One ranked chunk. Higher `score` = better match."""

    chunk_id: int
    path: str
    seq: int
    heading: str
    body: str
    score: float


class NoteIndex:
    """Chunks of every note, their terms, and each file's signature (mtime, size)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        try:
            self._write = self._open(path)
        except sqlite3.DatabaseError:  # damaged: it holds only derived data, so start afresh
            for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                stale.unlink(missing_ok=True)
            self._write = self._open(path)
        self._read = self._connect(path)
        self._wlock = threading.Lock()
        self._rlock = threading.Lock()

    def _open(self, path: Path) -> sqlite3.Connection:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(path, 0o600)  # SQLite gives -wal and -shm the same mode
        conn = self._connect(path)
        try:
            self._migrate(conn)
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # derived data: a lost commit is re-indexed
        conn.execute("PRAGMA busy_timeout=5000")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE '%fts5%'"
            " AND name NOT LIKE 'chunk_terms_%' AND name NOT LIKE 'sqlite_%'"
        ).fetchall():
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        for name in ("vocab", "chunk_terms"):
            conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")

    # --- writing -------------------------------------------------------------------------

    def put(self, notes: Iterable[tuple[NoteFile, str | None]]) -> int:
        """Replace the chunks of each note in one transaction; None text = unreadable (kept
        with no chunks, so it is not read again until it changes). Returns chunks written."""
        written = 0
        with self._wlock:
            conn = self._write
            conn.execute("BEGIN IMMEDIATE")
            try:
                for note, text in notes:
                    self._delete_chunks(note.path)
                    if text is not None:
                        written += self._insert_chunks(note, text)
                    conn.execute(
                        "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)",
                        (note.path, note.root, note.mtime_ns, note.size),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return written

    def drop(self, paths: Iterable[str]) -> None:
        """Forget notes that were deleted or no longer qualify."""
        with self._wlock:
            conn = self._write
            conn.execute("BEGIN IMMEDIATE")
            try:
                for path in paths:
                    self._delete_chunks(path)
                    conn.execute("DELETE FROM files WHERE path = ?", (path,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _delete_chunks(self, path: str) -> None:
        # The term table is contentless (it would otherwise hold a second copy of every
        # note): FTS5 removes a row only when given the very terms it was indexed with.
        row = self._write.execute("SELECT root FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        name = term_text(_name_of(path, row[0]))
        rows = self._write.execute("SELECT id, heading, body FROM chunks WHERE path = ?", (path,))
        self._write.executemany(
            "INSERT INTO chunk_terms(chunk_terms, rowid, body, heading, name) "
            "VALUES ('delete', ?, ?, ?, ?)",
            [(i, term_text(body), term_text(heading), name) for i, heading, body in rows],
        )
        self._write.execute("DELETE FROM chunks WHERE path = ?", (path,))

    def _insert_chunks(self, note: NoteFile, text: str) -> int:
        name = term_text(_name_of(note.path, note.root))
        pieces = chunks(text, markdown=note.path.lower().endswith((".md", ".markdown")))
        for seq, piece in enumerate(pieces):
            cur = self._write.execute(
                "INSERT INTO chunks(path, seq, heading, body) VALUES (?, ?, ?, ?)",
                (note.path, seq, piece.heading, piece.text),
            )
            self._write.execute(
                "INSERT INTO chunk_terms(rowid, body, heading, name) VALUES (?, ?, ?, ?)",
                (cur.lastrowid, term_text(piece.text), term_text(piece.heading), name),
            )
        return len(pieces)

    # --- reading -------------------------------------------------------------------------

    def signatures(self) -> dict[str, tuple[int, int, str]]:
        """path -> (mtime_ns, size, root) of every indexed note."""
        with self._rlock:
            rows = self._read.execute("SELECT path, mtime_ns, size, root FROM files").fetchall()
        return {path: (mtime, size, root) for path, mtime, size, root in rows}

    def roots_of_text_notes(self) -> list[str]:
        """The root of each indexed note that has text: a file that is not text is kept in
        `files` (so it is not read again) but has no chunks, and is no note of the folder."""
        with self._rlock:
            rows = self._read.execute(
                "SELECT root FROM files"
                " WHERE EXISTS (SELECT 1 FROM chunks WHERE chunks.path = files.path)"
            ).fetchall()
        return [root for (root,) in rows]

    def chunk_count(self) -> int:
        """How many chunks are indexed (the N of inverse document frequency)."""
        with self._rlock:
            count: int = self._read.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return count

    def doc_freq(self, term: str) -> int:
        """In how many chunks `term` occurs (0: not in the folder's vocabulary)."""
        with self._rlock:
            row = self._read.execute("SELECT doc FROM vocab WHERE term = ?", (term,)).fetchone()
        return row[0] if row else 0

    def terms_between(self, low: str, high: str) -> list[tuple[str, int]]:
        """Vocabulary terms in [low, high) with their document frequency."""
        with self._rlock:
            return self._read.execute(
                "SELECT term, doc FROM vocab WHERE term >= ? AND term < ?", (low, high)
            ).fetchall()

    def search(self, match: str, limit: int) -> list[Hit]:
        """The best `limit` chunks for an FTS5 MATCH expression, best first."""
        weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
        with self._rlock:
            ranked = self._read.execute(
                f"SELECT rowid, bm25(chunk_terms, {weights}) AS s FROM chunk_terms "
                "WHERE chunk_terms MATCH ? ORDER BY s LIMIT ?",
                (match, limit),
            ).fetchall()
            scores = dict(ranked)
            marks = ",".join("?" * len(scores))
            rows = self._read.execute(
                f"SELECT id, path, seq, heading, body FROM chunks WHERE id IN ({marks})",
                list(scores),
            ).fetchall()
        hits = [Hit(i, p, q, h, b, -scores[i]) for i, p, q, h, b in rows]
        return sorted(hits, key=lambda h: -h.score)

    def close(self) -> None:
        """Close both connections."""
        with self._wlock:
            self._write.close()
        with self._rlock:
            self._read.close()


def _name_of(path: str, root: str) -> str:
    """The note's path inside its folder, without the extension: evidence of its subject."""
    rel = os.path.relpath(path, root)
    return os.path.splitext(rel)[0]
