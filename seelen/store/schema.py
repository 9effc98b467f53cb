"""The SQLite schema: named migrations, and how user text becomes a safe FTS5 query.

Migrations are plain functions that return their SQL; `Store` runs each once, in one
transaction with the row that records its name.

Scripts written without spaces (Chinese, Japanese) are word-indexed one character a token:
`index_text` (registered in SQLite as `seelen_words`, used by the FTS triggers) spaces out
those characters, and `fts_query` turns a run of them into phrases of adjacent pairs, so
"金枪鱼" matches the characters 金枪 then 枪鱼 side by side: bigram search from a unigram index.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import overload


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


def m006_fts_any_language() -> str:
    # The word index is rebuilt from the stored text through `seelen_words` (index_text), so
    # Chinese becomes searchable, old turns included. Contentless (content=''): FTS5 never
    # reads the original text back, so a rebuild or integrity check cannot compare it with the
    # spaced-out form; rows are removed with the 'delete' command and the indexed values.
    spoken = "role IN ('user', 'assistant')"
    return f"""
        DROP TRIGGER conversation_ai;
        DROP TRIGGER conversation_ad;
        DROP TRIGGER conversation_au;
        DROP TABLE conversation_fts;
        CREATE VIRTUAL TABLE conversation_fts USING fts5(
            text, session_id, content='', tokenize='porter unicode61');
        INSERT INTO conversation_fts(conversation_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
        INSERT INTO conversation_fts(rowid, text, session_id)
            SELECT seq, seelen_words(text), session_id FROM conversation WHERE {spoken};
        CREATE TRIGGER conversation_ai AFTER INSERT ON conversation WHEN new.{spoken} BEGIN
            INSERT INTO conversation_fts(rowid, text, session_id)
            VALUES (new.seq, seelen_words(new.text), new.session_id);
        END;
        CREATE TRIGGER conversation_ad AFTER DELETE ON conversation WHEN old.{spoken} BEGIN
            INSERT INTO conversation_fts(conversation_fts, rowid, text, session_id)
            VALUES ('delete', old.seq, seelen_words(old.text), old.session_id);
        END;
        CREATE TRIGGER conversation_au AFTER UPDATE OF text ON conversation
        WHEN new.{spoken} BEGIN
            INSERT INTO conversation_fts(conversation_fts, rowid, text, session_id)
            VALUES ('delete', old.seq, seelen_words(old.text), old.session_id);
            INSERT INTO conversation_fts(rowid, text, session_id)
            VALUES (new.seq, seelen_words(new.text), new.session_id);
        END;
        DROP TRIGGER summary_ai;
        DROP TRIGGER summary_ad;
        DROP TRIGGER summary_au;
        DROP TABLE summary_fts;
        CREATE VIRTUAL TABLE summary_fts USING fts5(
            summary, content='', tokenize='porter unicode61');
        INSERT INTO summary_fts(rowid, summary)
            SELECT rowid, seelen_words(summary) FROM summary;
        CREATE TRIGGER summary_ai AFTER INSERT ON summary BEGIN
            INSERT INTO summary_fts(rowid, summary) VALUES (new.rowid, seelen_words(new.summary));
        END;
        CREATE TRIGGER summary_ad AFTER DELETE ON summary BEGIN
            INSERT INTO summary_fts(summary_fts, rowid, summary)
            VALUES ('delete', old.rowid, seelen_words(old.summary));
        END;
        CREATE TRIGGER summary_au AFTER UPDATE OF summary ON summary BEGIN
            INSERT INTO summary_fts(summary_fts, rowid, summary)
            VALUES ('delete', old.rowid, seelen_words(old.summary));
            INSERT INTO summary_fts(rowid, summary) VALUES (new.rowid, seelen_words(new.summary));
        END;
        """


def m007_turn_time() -> str:
    # Recall finds the sessions that have turns inside a time a question names ("on March 4",
    # "last week"); without this index that is a scan of every turn.
    return "CREATE INDEX conversation_time ON conversation(timestamp);"


# Each returns its SQL; it runs in one transaction together with the line recording it.
MIGRATIONS: list[Callable[[], str]] = [
    m001_initial,
    m002_full_text,
    m003_archive_steps,
    m004_fts_by_session,
    m005_fold_by_seq,
    m006_fts_any_language,
    m007_turn_time,
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
# Pairs of characters that ask rather than name (what, where, how, my, your, remember…):
# in nearly every Chinese question, so they only add noise, like the English stopwords.
_CJK_STOPWORDS = frozenset(
    "什么 怎么 哪里 哪儿 为什么 是不是 我的 你的 我们 你们 一下 知道 记得 告诉 还记 请问".split()
)
# Han (with extensions and compatibility forms) and the Japanese kana: scripts whose words
# are not separated by spaces. Hangul is left out: Korean puts spaces between words.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_CJK_RUN = re.compile(f"[{_CJK}]+|[^{_CJK}]+")
MAX_QUERY_WORDS = 12


@overload
def index_text(text: str) -> str: ...
@overload
def index_text(text: None) -> None: ...
def index_text(text: str | None) -> str | None:
    """The text as the word index sees it: each CJK character set apart as its own word."""
    return _CJK_CHAR.sub(r" \g<0> ", text) if text else text


def _cjk_terms(run: str) -> list[str]:
    """A run of CJK characters as overlapping pairs (a lone character stays itself)."""
    if len(run) == 1:
        return [run]
    pairs = [run[i : i + 2] for i in range(len(run) - 1)]
    return [p for p in pairs if p not in _CJK_STOPWORDS] or pairs


def _terms(text: str) -> list[str]:
    """The query's terms in order: lowercased words, and CJK character pairs."""
    terms: list[str] = []
    for word in _WORD.findall(text):
        for run in _CJK_RUN.findall(word):
            terms += _cjk_terms(run) if _CJK_CHAR.match(run) else [run.lower()]
    return terms


def phrase(text: str) -> str:
    """An FTS5 string literal: the text can never be read as query syntax."""
    return '"' + text.replace('"', '""') + '"'


def fts_query(text: str) -> str:
    """An FTS5 MATCH expression: the text's content words, each quoted, joined by OR."""
    words = list(dict.fromkeys(_terms(text)))
    kept = [w for w in words if w not in _STOPWORDS] or words
    # Quoting each term (quotes doubled) means no user text can be read as FTS5 syntax; a
    # CJK pair goes in spaced out, so it matches its two characters side by side.
    return " OR ".join(phrase(index_text(w).strip()) for w in kept[:MAX_QUERY_WORDS])
