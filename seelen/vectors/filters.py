"""SQL filters for LanceDB (DataFusion) queries, built from values safely.

Every value becomes a quoted literal; column names are trusted constants, never user input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

ID_CHUNK = 500  # text ids per SQL predicate, to keep each statement small


def sql_string(value: str) -> str:
    """`value` as a SQL string literal for LanceDB (DataFusion) filters: `'` is doubled.

    Backslashes, `%`, `_` and `"` have no special meaning inside such a literal.
    """
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')`; `column` must be a trusted name, never user input."""
    literals = [sql_string(v) for v in values]
    if not literals:
        raise ValueError("an IN list needs at least one value")
    return f"{column} IN ({', '.join(literals)})"


def session_filter(exclude_session: str | None, only_sessions: Sequence[str] | None) -> str | None:
    """The WHERE clause for `search`'s session options, or None for no filter."""
    parts = []
    if exclude_session is not None:
        parts.append(f"session_id != {sql_string(exclude_session)}")
    if only_sessions is not None:
        parts.append(sql_in("session_id", only_sessions))
    return " AND ".join(parts) or None


def id_predicates(text_ids: Sequence[str]) -> list[str]:
    """`text_id IN (...)` predicates of at most `ID_CHUNK` ids each."""
    return [
        sql_in("text_id", text_ids[i : i + ID_CHUNK]) for i in range(0, len(text_ids), ID_CHUNK)
    ]
