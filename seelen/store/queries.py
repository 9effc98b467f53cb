"""The store's read queries: full-text search (BM25) and the vector index's bookkeeping.

Mixed into `Store`, whose connection, lock and `_query`/`_tx` they use.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seelen.store.reader import SecondReader
from seelen.store.records import (
    INDEXABLE_TURN,
    RECOUNT_TURNS,
    Session,
    Summary,
    Turn,
    insert_session,
    insert_summary,
    insert_turn,
    like_prefix,
    summary_row,
    turn_row,
)
from seelen.store.schema import FOLD_SEQ_FROM_COUNT, fts_terms, phrase
from seelen.store.wordcounts import WordCounts


class Lookups:
    """Small read queries about what is stored."""

    _query: Callable[..., list[Any]]

    def has_history(self, exclude_session: str | None = None) -> bool:
        """True when anything outside `exclude_session` could be recalled."""
        rows = self._query(
            "SELECT EXISTS (SELECT 1 FROM summary WHERE session_id IS NOT ?) OR EXISTS "
            "(SELECT 1 FROM conversation WHERE session_id IS NOT ? "
            "AND role IN ('user', 'assistant'))",
            (exclude_session, exclude_session),
        )
        return bool(rows[0][0])

    def find_text_ids(self, prefix: str) -> list[str]:
        """Turn and summary ids that start with `prefix`."""
        pattern = like_prefix(prefix)
        rows = self._query(
            "SELECT text_id FROM conversation WHERE text_id LIKE ? ESCAPE '\\' UNION ALL "
            "SELECT text_id FROM summary WHERE text_id LIKE ? ESCAPE '\\'",
            (pattern, pattern),
        )
        return [r[0] for r in rows]

    def sessions_in_time(
        self, start_ms: int, end_ms: int, limit: int, exclude_session: str | None = None
    ) -> list[str]:
        """Up to `limit` ids of sessions with a spoken turn in [start_ms, end_ms)."""
        rows = self._query(
            "SELECT DISTINCT session_id FROM conversation WHERE timestamp >= ? AND timestamp < ? "
            "AND session_id IS NOT ? AND role IN ('user', 'assistant') LIMIT ?",
            (start_ms, end_ms, exclude_session, limit),
        )
        return [r[0] for r in rows]

    def recent_user_texts(self, limit: int, chars: int) -> list[str]:
        """The first `chars` characters of the newest `limit` user turns."""
        rows = self._query(
            "SELECT substr(text, 1, ?) FROM conversation WHERE role = 'user' "
            "ORDER BY seq DESC LIMIT ?",
            (chars, limit),
        )
        return [r[0] for r in rows]

    def spoken_around(self, text_ids: Iterable[str]) -> dict[str, tuple[str | None, str | None]]:
        """(previous, next) spoken turn id of each given turn in its own session (None at a
        session's edge); tool traffic in between is skipped. One query for all."""
        ids = list(text_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        near = (
            "SELECT p.text_id FROM conversation p WHERE p.session_id = c.session_id "
            # Unqualified names in INDEXABLE_TURN resolve to the inner table, p.
            f"AND p.seq {{}} c.seq AND {INDEXABLE_TURN} "
            "ORDER BY p.seq {} LIMIT 1"
        )
        rows = self._query(
            f"SELECT c.text_id, ({near.format('<', 'DESC')}), ({near.format('>', 'ASC')}) "
            f"FROM conversation c WHERE c.text_id IN ({marks})",
            ids,
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def count_turns(self) -> int:
        """How many turns are stored in all sessions."""
        count: int = self._query("SELECT count(*) FROM conversation")[0][0]
        return count

    def count_sessions(self) -> int:
        """How many sessions are stored (ephemeral ones too, while they last)."""
        count: int = self._query("SELECT count(*) FROM session")[0][0]
        return count


# A word held by more rows than this is left out of the searches over the whole memory, and
# weighs nothing in the word shares: BM25 reads every row a word is in (1.2 ms for each
# thousand, measured at 100k and 1M turns: "like" in 205,816 of a million turns took 250 ms),
# and a word that common says little of what is asked (the question's rarer words carry
# it, and the vectors its meaning). Chosen by cost: 2,000 rows bound a word's cost to about
# 2.5 ms; a memory of up to 2,000 turns (every recall bench) is searched as before. The
# same holds inside named sessions: FTS5 weighs a word by counting every row that holds it,
# however few rows the sessions leave (at 1M turns, 7 words inside 3 sessions: 25 ms ranked,
# 0.9 ms unranked), so there too a common word is left out.
COMMON_ROWS = 2_000


class TextSearch:
    """BM25 over turns and summaries (SQLite FTS5)."""

    _query: Callable[..., list[Any]]
    _db: sqlite3.Connection
    _lock: threading.RLock
    _word_counts: WordCounts | None = None  # made at the first count
    _second: SecondReader | None = None  # made at the first direct word search
    common_rows: int
    path: Path
    _connect: Callable[..., sqlite3.Connection]

    def _rows_holding(
        self, fts: str, column: str, terms: Sequence[str], after: int = 0
    ) -> dict[str, int]:
        """How many rows of the FTS table `fts` after row `after` hold each term in `column`,
        counted up to `common_rows` + 1 (0.2 ms a term, whatever its count), once while
        nothing changes."""
        sql = (
            f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? AND rowid > ? LIMIT ?)"
        )
        cap = self.common_rows + 1
        with self._lock:
            counts = self._counted().at(self._version())
            for t in terms:
                if (fts, t, after) not in counts:
                    found = self._query(sql, (f"{column} : {t}", after, cap))[0][0]
                    counts[(fts, t, after)] = found
            return {t: counts[(fts, t, after)] for t in terms}

    def rows_with(self, terms: Sequence[str]) -> list[np.ndarray]:
        """The rows (seq) of the spoken turns holding each of `terms` (FTS5 phrases), sorted,
        read once while nothing changes (`WordCounts`)."""
        sql = "SELECT group_concat(rowid) FROM conversation_fts WHERE conversation_fts MATCH ?"
        with self._lock:
            counted = self._counted()
            counted.at(self._version())
            for t in terms:
                if t not in counted.rows:  # one string, not a row object per turn (0.3 ms)
                    (listed,) = self._query(sql, (f"text : {t}",))[0]
                    found = listed.split(",") if listed else []
                    counted.rows[t] = np.sort(np.array(found, dtype=np.int64))
            return [counted.rows[t] for t in terms]

    def _counted(self) -> WordCounts:
        if self._word_counts is None:
            self._word_counts = WordCounts()
        return self._word_counts

    def _version(self) -> tuple[int, int]:
        """What changes with every write: this connection's, or another's commit."""
        return (self._db.total_changes, self._query("PRAGMA data_version")[0][0])

    def _rows_stored(self) -> int:
        """Turn rows ever stored (the newest row number): a stand-in for how many there are,
        which a count would find only by reading every row."""
        return int(self._query("SELECT coalesce(max(seq), 0) FROM conversation")[0][0])

    def _telling(self, fts: str, column: str, query: str) -> str:
        """The FTS5 expression for `query` without its common words (COMMON_ROWS); "" when
        every word is common, or none is held."""
        rows = self._rows_holding(fts, column, fts_terms(query))
        return " OR ".join(t for t, n in rows.items() if 0 < n <= self.common_rows)

    def common_words(self, words: Sequence[str], share: float) -> set[str]:
        """Those of `words` that at least `share` of the turns stored hold. Rows are counted
        up to `common_rows` (a word's cost stays bounded), so in a memory of more than
        `common_rows` / `share` turns the share is that of the newest `common_rows` /
        `share` turns: what the memory holds now, at the cost of a small one."""
        window = int(self.common_rows / share) if share > 0 else 0
        stored = self._rows_stored()
        newest = max(stored - window, 0)  # the rows after this one are counted
        total = stored - newest
        terms = {w: t[0] for w in words if (t := fts_terms(w))}
        held = self._rows_holding("conversation_fts", "text", list(terms.values()), newest)
        return {w for w, t in terms.items() if total and held.get(t, 0) >= share * total}

    def search_turns_text(
        self,
        query: str,
        limit: int,
        *,
        exclude_session: str | None = None,
        only_sessions: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """(text_id, score) of spoken turns by BM25, best first; higher score = better;
        common words are left out (COMMON_ROWS)."""
        if limit <= 0 or only_sessions == []:
            return []
        words = self._telling("conversation_fts", "text", query)
        if not words:
            return []
        match = f"(text : ({words}))"
        if only_sessions:
            match += f" AND (session_id : ({' OR '.join(phrase(s) for s in only_sessions)}))"
        if exclude_session is not None:
            match += f" NOT (session_id : {phrase(exclude_session)})"
        # The search over the whole memory, the heaviest, runs on a connection of its own.
        run = self._query if only_sessions else self._second_reader().query
        rows = run(
            "SELECT c.text_id, -f.rank, c.session_id FROM (SELECT rowid, rank FROM "
            "conversation_fts WHERE conversation_fts MATCH ? ORDER BY rank LIMIT ?) f "
            "JOIN conversation c ON c.seq = f.rowid ORDER BY f.rank",
            (match, limit),
        )
        # Phrase matching on ids is exact for our hex ids; the check keeps odd ids exact too.
        return [
            (r[0], r[1])
            for r in rows
            if r[2] != exclude_session and (not only_sessions or r[2] in only_sessions)
        ]

    def _second_reader(self) -> SecondReader:
        with self._lock:
            if self._second is None:
                self._second = SecondReader(self.path, self._connect, self._query)
            return self._second

    def word_shares(self, query: str, text_ids: Iterable[str]) -> dict[str, float]:
        """How much of the question each turn holds: the share of the question's word weight
        (the IDF of each of its words found in the memory) that the turn's words carry, 0-1.

        A turn that shares only "bad" with "what snack could give me a bad reaction?" holds
        a small share; one holding the question's rare words, a large one."""
        ids = list(dict.fromkeys(text_ids))
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        seqs: dict[int, str] = dict(
            self._query(f"SELECT seq, text_id FROM conversation WHERE text_id IN ({marks})", ids)
        )
        total = self._rows_stored()  # standing in for the turns indexed
        weights: dict[str, float] = {}
        held: dict[str, float] = dict.fromkeys(ids, 0.0)
        rows = self._rows_holding("conversation_fts", "text", fts_terms(query))
        terms = [t for t, n in rows.items() if n <= self.common_rows]
        candidates = np.array(list(seqs), dtype=np.int64)
        # Each word's rows, as the sessions as wholes read them (joining each of its index
        # entries to its turn cost 4-8x more at 100k): their count, and the candidates' rows.
        for term, holding in zip(terms, self.rows_with(terms), strict=True):
            if not len(holding):  # a word the memory never holds weighs nothing
                continue
            weight = math.log((total + 1) / len(holding))
            weights[term] = weight
            at = np.searchsorted(holding, candidates).clip(max=len(holding) - 1)
            for seq in candidates[holding[at] == candidates].tolist():
                held[seqs[seq]] += weight
        whole = sum(weights.values())
        return {i: held[i] / whole if whole else 0.0 for i in ids}

    def search_summaries_text(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> list[tuple[str, float]]:
        """(text_id, score) of session summaries by BM25, best first; higher score = better;
        common words are left out (COMMON_ROWS)."""
        match = self._telling("summary_fts", "summary", query) if limit > 0 else ""
        if not match:
            return []
        sql = (
            "SELECT c.text_id, -bm25(summary_fts) AS score FROM summary_fts JOIN summary c "
            "ON c.rowid = summary_fts.rowid WHERE summary_fts MATCH ?"
        )
        params: list[Any] = [match]
        if exclude_session is not None:
            sql += " AND c.session_id != ?"
            params.append(exclude_session)
        rows = self._query(sql + " ORDER BY score DESC LIMIT ?", [*params, limit])
        return [(r[0], r[1]) for r in rows]


class IndexBookkeeping:
    """Which texts are in the vector index, and which wait for it."""

    _query: Callable[..., list[Any]]
    _tx: Callable[..., Any]

    def unindexed(self, limit: int = 256) -> tuple[list[Turn], list[Summary]]:
        """Texts not yet in the vector index (new, or left behind by a crash)."""
        turns = self._query(
            "SELECT * FROM conversation WHERE indexed = 0 ORDER BY seq LIMIT ?", (limit,)
        )
        sums = self._query("SELECT * FROM summary WHERE indexed = 0 LIMIT ?", (limit,))
        return [turn_row(r) for r in turns], [summary_row(r) for r in sums]

    def count_unindexed(self) -> int:
        """How many texts wait for the vector index."""
        rows = self._query(
            "SELECT (SELECT count(*) FROM conversation WHERE indexed = 0) + "
            "(SELECT count(*) FROM summary WHERE indexed = 0)"
        )
        count: int = rows[0][0]
        return count

    def mark_indexed(self, text_ids: Iterable[str], indexed: bool = True) -> None:
        """Record that these texts are (or are no longer) in the vector index."""
        ids = list(text_ids)
        with self._tx() as db:
            # In chunks: SQLite limits the number of parameters in one statement.
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for table in ("conversation", "summary"):
                    db.execute(
                        f"UPDATE {table} SET indexed = ? WHERE text_id IN ({marks})",
                        [int(indexed), *chunk],
                    )

    def mark_all_unindexed(self) -> None:
        """Queue every spoken turn and summary for (re-)indexing, e.g. after a model change."""
        with self._tx() as db:
            db.execute(f"UPDATE conversation SET indexed = 0 WHERE {INDEXABLE_TURN}")
            db.execute("UPDATE summary SET indexed = 0")

    def index_flags(self, kind: str) -> dict[str, bool]:
        """text_id → marked as in the vector index, for every text of `kind` ("turns" or
        "summaries") that belongs there; compared with the index to find drift."""
        if kind == "turns":
            sql = f"SELECT text_id, indexed FROM conversation WHERE {INDEXABLE_TURN}"
        else:
            sql = "SELECT text_id, indexed FROM summary"
        return {r[0]: bool(r[1]) for r in self._query(sql)}

    def indexable(self, kind: str, after: int, limit: int) -> tuple[int, list[Turn | Summary]]:
        """The next `limit` texts of `kind` that belong in the vector index, after the
        position `after` (0 at first); returns the position to continue from."""
        if kind == "turns":
            sql = f"SELECT seq AS pos, * FROM conversation WHERE {INDEXABLE_TURN} AND seq > ?"
            make: Callable[[sqlite3.Row], Turn | Summary] = turn_row
        else:
            sql = "SELECT rowid AS pos, * FROM summary WHERE rowid > ?"
            make = summary_row
        rows = self._query(sql + " ORDER BY pos LIMIT ?", (after, limit))
        return (rows[-1]["pos"] if rows else after), [make(r) for r in rows]


class Imports:
    """Rows taken in whole from an export (`seelen import`)."""

    _tx: Callable[..., Any]

    def import_records(
        self, sessions: Sequence[Session], turns: Sequence[Turn], summaries: Sequence[Summary]
    ) -> tuple[int, int, int]:
        """Insert sessions, turns and summaries with their own ids and times, in one
        transaction; rows whose id is already stored are left as they are (so importing twice
        adds nothing). Returns how many sessions, turns and summaries were new."""
        with self._tx() as db:
            new = (
                sum(insert_session(db, s) for s in sessions),
                sum(insert_turn(db, t) for t in turns),
                sum(insert_summary(db, m) for m in summaries),
            )
            db.executemany(RECOUNT_TURNS, [(sid,) for sid in {s.session_id for s in sessions}])
            db.execute(FOLD_SEQ_FROM_COUNT)  # an export carries the count; the seq is ours
        return new

    def import_history(
        self, sessions: Sequence[Session], turns: Sequence[Turn], summaries: Sequence[Summary]
    ) -> tuple[int, int, int]:
        """Insert another assistant's conversations in one transaction, as `import_records`
        does; a session already stored takes the turns it lacks (a re-download that grew)
        and its end moves to its newest turn. Returns how many rows of each kind were new."""
        with self._tx() as db:
            new = (
                sum(insert_session(db, s) for s in sessions),
                sum(insert_turn(db, t) for t in turns),
                sum(insert_summary(db, m) for m in summaries),
            )
            db.executemany(
                "UPDATE session SET current_conv_count = (SELECT count(*) FROM conversation "
                "WHERE session_id = ?1), end_timestamp = max(coalesce(end_timestamp, 0), "
                "(SELECT max(timestamp) FROM conversation WHERE session_id = ?1)) "
                "WHERE session_id = ?1",
                [(s.session_id,) for s in sessions],
            )
        return new
