"""The SQLite schema: named migrations, and how user text becomes a safe FTS5 query.

Migrations are plain functions that return their SQL; `Store` runs each once, in one
transaction with the row that records its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable


def m001_initial() -> str:
    return """
        CREATE TABLE session (
            session_id TEXT PRIMARY KEY,
            start_timestamp INTEGER NOT NULL,
            end_timestamp INTEGER,
            status TEXT NOT NULL DEFAULT 'active',
            current_conv_count INTEGER NOT NULL DEFAULT 0,
            rolling_summary TEXT NOT NULL DEFAULT '',
            folded_count INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE conversation (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            text_id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL REFERENCES session(session_id),
            timestamp INTEGER NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            indexed INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX conversation_session ON conversation(session_id, seq);
        CREATE INDEX conversation_unindexed ON conversation(indexed) WHERE indexed = 0;
        CREATE TABLE summary (
            text_id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES session(session_id),
            summary TEXT NOT NULL,
            start_timestamp INTEGER NOT NULL,
            end_timestamp INTEGER NOT NULL,
            indexed INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX summary_session ON summary(session_id);
        """


def m002_full_text() -> str:
    # External-content FTS5 tables kept in step by triggers, so BM25 never drifts from the text.
    return """
        CREATE VIRTUAL TABLE conversation_fts USING fts5(
            text, content='conversation', content_rowid='seq', tokenize='porter unicode61');
        CREATE TRIGGER conversation_ai AFTER INSERT ON conversation BEGIN
            INSERT INTO conversation_fts(rowid, text) VALUES (new.seq, new.text);
        END;
        CREATE TRIGGER conversation_ad AFTER DELETE ON conversation BEGIN
            INSERT INTO conversation_fts(conversation_fts, rowid, text)
            VALUES ('delete', old.seq, old.text);
        END;
        CREATE TRIGGER conversation_au AFTER UPDATE OF text ON conversation BEGIN
            INSERT INTO conversation_fts(conversation_fts, rowid, text)
            VALUES ('delete', old.seq, old.text);
            INSERT INTO conversation_fts(rowid, text) VALUES (new.seq, new.text);
        END;
        CREATE VIRTUAL TABLE summary_fts USING fts5(
            summary, content='summary', content_rowid='rowid', tokenize='porter unicode61');
        CREATE TRIGGER summary_ai AFTER INSERT ON summary BEGIN
            INSERT INTO summary_fts(rowid, summary) VALUES (new.rowid, new.summary);
        END;
        CREATE TRIGGER summary_ad AFTER DELETE ON summary BEGIN
            INSERT INTO summary_fts(summary_fts, rowid, summary)
            VALUES ('delete', old.rowid, old.summary);
        END;
        CREATE TRIGGER summary_au AFTER UPDATE OF summary ON summary BEGIN
            INSERT INTO summary_fts(summary_fts, rowid, summary)
            VALUES ('delete', old.rowid, old.summary);
            INSERT INTO summary_fts(rowid, summary) VALUES (new.rowid, new.summary);
        END;
        """


def m003_archive_steps() -> str:
    # Each finished archive step is recorded, so an interrupted archive resumes where it stopped.
    return """
        CREATE TABLE archive_step (
            session_id TEXT NOT NULL REFERENCES session(session_id),
            step TEXT NOT NULL,
            done_at INTEGER NOT NULL,
            payload TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (session_id, step)
        );
        """


def m004_fts_by_session() -> str:
    # The session id joins the word index (weight 0 in BM25), so "not this session" and
    # "only these sessions" are filtered inside FTS5 and `ORDER BY rank LIMIT n` stays fast at
    # 100k turns. Only spoken turns are indexed: tool traffic is noise for recall.
    spoken = "role IN ('user', 'assistant')"
    return f"""
        DROP TRIGGER conversation_ai;
        DROP TRIGGER conversation_ad;
        DROP TRIGGER conversation_au;
        DROP TABLE conversation_fts;
        CREATE VIRTUAL TABLE conversation_fts USING fts5(
            text, session_id, content='conversation', content_rowid='seq',
            tokenize='porter unicode61');
        INSERT INTO conversation_fts(conversation_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
        INSERT INTO conversation_fts(rowid, text, session_id)
            SELECT seq, text, session_id FROM conversation WHERE {spoken};
        CREATE TRIGGER conversation_ai AFTER INSERT ON conversation WHEN new.{spoken} BEGIN
            INSERT INTO conversation_fts(rowid, text, session_id)
            VALUES (new.seq, new.text, new.session_id);
        END;
        CREATE TRIGGER conversation_ad AFTER DELETE ON conversation WHEN old.{spoken} BEGIN
            INSERT INTO conversation_fts(conversation_fts, rowid, text, session_id)
            VALUES ('delete', old.seq, old.text, old.session_id);
        END;
        CREATE TRIGGER conversation_au AFTER UPDATE OF text ON conversation
        WHEN new.{spoken} BEGIN
            INSERT INTO conversation_fts(conversation_fts, rowid, text, session_id)
            VALUES ('delete', old.seq, old.text, old.session_id);
            INSERT INTO conversation_fts(rowid, text, session_id)
            VALUES (new.seq, new.text, new.session_id);
        END;
        """


# A session's fold boundary from its fold count: the seq of its `folded_count`-th turn.
FOLD_SEQ_FROM_COUNT = """
    UPDATE session SET folded_upto_seq = COALESCE((
        SELECT c.seq FROM conversation c WHERE c.session_id = session.session_id
        AND (SELECT count(*) FROM conversation o
             WHERE o.session_id = c.session_id AND o.seq <= c.seq) = session.folded_count
        ), 0)
    WHERE folded_count > 0 AND folded_upto_seq = 0"""


def m005_fold_by_seq() -> str:
    # The rolling summary covers the turns up to a `seq`, not a count: forgetting a folded
    # turn must not shift the live window. Existing counts become the seq they reach.
    return f"""
        ALTER TABLE session ADD COLUMN folded_upto_seq INTEGER NOT NULL DEFAULT 0;
        {FOLD_SEQ_FROM_COUNT};
        """


# Each returns its SQL; it runs in one transaction together with the line recording it.
MIGRATIONS: list[Callable[[], str]] = [
    m001_initial,
    m002_full_text,
    m003_archive_steps,
    m004_fts_by_session,
    m005_fold_by_seq,
]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be but by do does did for from had has have he her hers him his how"
    " i if in into is it its me my of on or our she so than that the their them then there"
    " these they this to too us was we were what when where which who whom why will with you"
    " your yours am been can could would should about just not no yes ok okay s m t ll re ve d"
    " now right usually really go get got like also still some any very much more most one"
    " tell know think want need said say please thanks thank well oh hi hey".split()
)
MAX_QUERY_WORDS = 12


def phrase(text: str) -> str:
    """An FTS5 string literal: the text can never be read as query syntax."""
    return '"' + text.replace('"', '""') + '"'


def fts_query(text: str) -> str:
    """An FTS5 MATCH expression: the text's content words, each quoted, joined by OR."""
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in dict.fromkeys(words) if w not in _STOPWORDS] or list(dict.fromkeys(words))
    # Quoting each word (quotes doubled) means no user text can be read as FTS5 syntax.
    return " OR ".join(phrase(w) for w in kept[:MAX_QUERY_WORDS])
