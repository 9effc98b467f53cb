"""The memory calls that write: remember, forget, import. The caller holds the profile's
writer lock (the owner, a chat, or the Python API opened as the writer).

Remembered texts are the user's words, kept in a session of their own per client and day:
archived from the start, so they never enter the chat's live session or its archive, yet
recall, `ask` and `memory search` find them like any past turn (and `memory forget
--session` removes a client's day at once). Each is embedded before the call returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from seelen.protocol import calls
from seelen.protocol.results import FileWritten, Forgotten, Imported, ImportProgress, Remembered
from seelen.runtime import forget_session, forget_text, resolve_session
from seelen.service.reading import BadInput
from seelen.store import ARCHIVED, Session, now_ms

if TYPE_CHECKING:
    from seelen.app import App

# The longest text `remember` keeps. A remembered fact is recalled as one turn, and a turn
# longer than recall's default share of the prompt (12% of CONTEXT_TOKENS, about 3,800
# characters of English at the default 8,000 tokens) is never shown to the model whole; the
# embedder also reads only the first 4,096 characters. So: one fact, or a few, per call.
MAX_REMEMBER_CHARS = 4000
MAX_CLIENT_CHARS = 64
# The day sessions' ids: one per (client, day), the same in every process, so two clients
# (or two calls of one) in the same second find the same session instead of making two.
_DAY_SESSIONS = uuid.UUID("5ee1e2b5-6d63-4b7e-9a59-0c2a54f0a1d1")


def remember(app: App, request: calls.Remember) -> Remembered:
    """Keep the text in this client's session of the day, embedded before returning."""
    text = request.text.strip()
    if not text:
        raise BadInput("give the text to remember")
    if len(text) > MAX_REMEMBER_CHARS:
        raise BadInput(
            f"remember keeps at most {MAX_REMEMBER_CHARS:,} characters and this text has "
            f"{len(text):,}: store the gist, or one fact per call"
        )
    client = _client_name(request.client)
    store = app.store
    session_id = _day_session(app, client)
    turn = next(
        (t for t in store.turns(session_id) if request.key and t.meta.get("key") == request.key),
        None,
    )  # a retried call (its owner died after storing it) is stored once
    if turn is None:
        meta = {"source": "mcp", "client": client, "key": request.key}
        turn = store.add_turn(session_id, "user", text, meta)
        store.mark_archived(session_id)  # the session ends with its newest text
    app.index_pending()  # the caller holds the writer lock: embedded before we answer
    return Remembered(
        text_id=turn.text_id,
        session_id=session_id,
        time=app.clock.at(turn.ts_ms).isoformat(timespec="milliseconds"),
        role=turn.role,
        text=turn.text,
        client=client,
    )


def _day_session(app: App, client: str) -> str:
    """The id of `client`'s session of today (in TIMEZONE), created when missing."""
    now = now_ms()
    day = app.clock.at(now).date().isoformat()
    session_id = uuid.uuid5(_DAY_SESSIONS, f"{client}\n{day}").hex
    store = app.store
    if store.get_session(session_id) is None:  # created once: the import skips known ids
        store.import_records([Session(session_id, now, now, ARCHIVED, 0)], [], [])
    return session_id


def forget(app: App, request: calls.Forget) -> Forgotten:
    """Delete one turn or summary (and its vector) by id or unique prefix."""
    prefix = request.text_id.strip()
    matches = app.store.find_text_ids(prefix) if len(prefix) >= 4 else []
    count = forget_text(app, prefix)  # says what is wrong with the id
    return Forgotten(text_id=matches[0] if len(matches) == 1 else prefix, forgotten=count)


def forget_whole_session(app: App, request: calls.ForgetSession) -> Forgotten:
    """Delete a whole session (its turns, summary and vectors) by id or unique prefix;
    `text_id` of the result is the session's whole id (not the prefix given). The session
    this process talks in (an open chat's, the owner's) is emptied instead, as /reset does:
    it stays to talk on in, so the next turn is not written into a session that is gone."""
    prefix = request.session_id.strip()
    session = resolve_session(app, prefix)  # says what is wrong with the id
    if _talks_in(app, session.session_id):
        ids = app.sessions.reset()
        app.forget(ids)  # their vectors go too
        return Forgotten(text_id=session.session_id, forgotten=len(ids))
    whole = session.session_id
    return Forgotten(text_id=whole, forgotten=forget_session(app, whole))


def write_file(app: App, request: calls.WriteFile) -> FileWritten:
    """Replace the persona or the user profile (atomically, the previous version kept in
    history/): the holder's next turn uses the new text."""
    from seelen.memory.persona import PERSONA, PROFILE

    if request.name not in (PERSONA, PROFILE):
        raise BadInput(f"only {PERSONA} and {PROFILE} can be written, not {request.name!r}")
    change = app.files.write(request.name, request.text)
    return FileWritten(name=request.name, changed=change.changed, kept=bool(change.before))


def _talks_in(app: App, session_id: str) -> bool:
    """Whether `session_id` is the session this process talks in (held in its memory)."""
    try:
        return app.sessions.current.session_id == session_id
    except RuntimeError:  # no session was opened: a process of memory calls only
        return False


def import_file(
    app: App, request: calls.Import, progress: Callable[[ImportProgress], None]
) -> Imported:
    """Read, recognise and write the export at `request.path`; nothing is written when the
    file is not an export. Its vectors follow in the background (the caller's indexer)."""
    from seelen.memory.imports.conversation import HistoryError
    from seelen.memory.imports.source import read_export

    if not Path(request.path).is_absolute():
        raise BadInput(f"import: the path must be absolute, not {request.path!r}")
    try:
        export = read_export(request.path, request.fmt)
    except HistoryError as exc:  # said as the command in this process says it
        raise HistoryError(f"import: {exc}") from None
    if export.kind == "empty":
        return Imported(line="Nothing to import: the export holds no conversations.", turns=0)
    if export.kind == "seelen":
        from seelen.memory.transfer import import_export

        report = import_export(app.store, app.files, app.clock, export.text, app.sessions)
        line, turns = report.describe(), report.turns
    else:
        from seelen.memory.imports.writer import write_history

        def moved(done: int, total: int) -> None:
            progress(ImportProgress(done=done, total=total))

        history = write_history(app.store, export.conversations, app.clock, moved)
        line, turns = history.describe(), history.turns
    app.follow_language()
    if app.index is not None:
        app.index.wake()
    return Imported(line=line, turns=turns, unindexed=app.store.count_unindexed())


def _client_name(name: str) -> str:
    """The client's own name (`clientInfo.name`), printable and short; "mcp" when unnamed."""
    shown = "".join(c for c in name if c.isprintable()).strip()[:MAX_CLIENT_CHARS]
    return shown or "mcp"
