"""A profile's memory as data: export it, and import exactly what export writes.

The JSON export is the outside interface of the memory: sessions with their ids, statuses,
times, rolling and final summaries, and every turn with its id, time, role, text and meta.
Times are ISO 8601 with milliseconds (the store's resolution), so they round-trip exactly.
Import calls no model: an archived session with its summary stays archived. It writes in one
transaction and skips ids it already holds, so importing the same file twice adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seelen.counts import counted
from seelen.errors import SeelenError
from seelen.memory.clock import Clock
from seelen.memory.imports.conversation import iso_to_ms
from seelen.memory.persona import PERSONA, PROFILE, PersonaFiles
from seelen.store import ACTIVE, ARCHIVED, Session, Store, Summary, Turn

if TYPE_CHECKING:
    from seelen.memory.sessions import Sessions

# Bumped when a field is added; import reads every version up to this one.
FORMAT_VERSION = 2
# Deeper JSON than this is not an export (ours is 5 levels deep, meta adds what tools wrote);
# the limit keeps a hostile file from exhausting the parser's recursion.
MAX_DEPTH = 64


class ImportDataError(SeelenError):
    """The file is not a Seelen export (nothing was written)."""


@dataclass(frozen=True)
class ImportReport:
    """What an import added (ids already present are not counted)."""

    sessions: int
    turns: int
    summaries: int
    files: tuple[str, ...] = ()  # memory files replaced (old versions kept in history/)
    demoted: int = 0  # active sessions stored as archived: the profile has its own

    def describe(self) -> str:
        """One line saying what the import added."""
        line = (
            f"Imported {counted(self.sessions, 'session')}, {counted(self.turns, 'turn')} and "
            f"{counted(self.summaries, 'summary', 'summaries')}"
        )
        if self.files:
            line += f"; replaced {', '.join(self.files)} (old versions in history/)"
        if self.demoted:
            active = counted(self.demoted, "active session")
            line += f"; {active} kept as archived (this profile has its own)"
        return line + "."


# --- export ------------------------------------------------------------------------------


def iso(clock: Clock, ms: int) -> str:
    """A stored timestamp as ISO 8601 with milliseconds in the user's timezone."""
    return clock.at(ms).isoformat(timespec="milliseconds")


def export_data(store: Store, files: PersonaFiles, clock: Clock) -> dict[str, Any]:
    """Everything Seelen remembers, as one JSON-ready object (oldest session first)."""
    return {**_header(files), "sessions": list(_sessions(store, clock))}


def _header(files: PersonaFiles) -> dict[str, Any]:
    return {
        "format": "seelen-export",
        "version": FORMAT_VERSION,
        "persona": files.read(PERSONA),  # from disk: the files as they are now
        "profile": files.read(PROFILE),
    }


def _sessions(store: Store, clock: Clock) -> Iterator[dict[str, Any]]:
    """Each session as export data, oldest first, its turns read when it comes."""
    for s in reversed(store.list_sessions(limit=-1)):
        summary = store.session_summary(s.session_id)
        yield {
            "session_id": s.session_id,
            "status": s.status,
            "start": iso(clock, s.start_ms),
            "end": iso(clock, s.end_ms) if s.end_ms else None,
            "summary": summary.text if summary else None,
            "summary_id": summary.text_id if summary else None,
            "summary_start": iso(clock, summary.start_ms) if summary else None,
            "summary_end": iso(clock, summary.end_ms) if summary else None,
            "rolling_summary": s.rolling_summary or None,
            "folded_count": s.folded_count,
            "turns": [_turn_data(clock, t) for t in store.turns(s.session_id)],
        }


def _turn_data(clock: Clock, t: Turn) -> dict[str, Any]:
    data = {"text_id": t.text_id, "time": iso(clock, t.ts_ms), "role": t.role, "text": t.text}
    return {**data, "meta": t.meta} if t.meta else data


def export_markdown(data: dict[str, Any]) -> str:
    """The export as readable Markdown (for people; import reads only JSON)."""
    return "\n".join(_markdown(data, data["sessions"]))


def _markdown(header: dict[str, Any], sessions: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Every stored text as a block quote under its label, so that its own Markdown (a
    reply's "## Step 1", a list) stays inside it and never reads as the export's sections."""
    persona = _quoted(header["persona"]) or "(empty)"  # as the profile: not a blank section
    yield from ["# Seelen memory export", "", "## Persona", "", persona, ""]
    yield from ["## User profile", "", _quoted(header["profile"]) or "(empty)", ""]
    for s in sessions:
        yield from [f"## Session {s['session_id'][:12]} ({s['start'][:16]}, {s['status']})", ""]
        if s["summary"]:
            yield from ["*summary:*", "", _quoted(s["summary"]), ""]
        for t in s["turns"]:
            if t["role"] in ("user", "assistant"):
                yield from [f"**{t['role']}** ({t['time'][:16]}):", "", _quoted(t["text"]), ""]


def _quoted(text: str) -> str:
    """`text` as a Markdown block quote, every line of it ("" for a blank text)."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip().splitlines())


def render_export(store: Store, files: PersonaFiles, clock: Clock, fmt: str) -> str:
    """The whole export as text: `json` (what import reads) or `markdown`."""
    return "".join(export_chunks(store, files, clock, fmt))


def export_chunks(store: Store, files: PersonaFiles, clock: Clock, fmt: str) -> Iterator[str]:
    """The export as text, a session at a time, so that a large memory is never held whole:
    joined, the same text as `json.dumps(export_data(...), indent=2)` (or its Markdown)."""
    header, sessions = _header(files), _sessions(store, clock)
    if fmt != "json":
        for n, line in enumerate(_markdown(header, sessions)):
            yield line if n == 0 else "\n" + line
        return
    opening = json.dumps({**header, "sessions": []}, ensure_ascii=False, indent=2)
    yield opening[: -len("[]\n}")]
    first = True
    for session in sessions:
        text = json.dumps(session, ensure_ascii=False, indent=2).replace("\n", "\n    ")
        yield ("[\n    " if first else ",\n    ") + text
        first = False
    yield "[]\n}" if first else "\n  ]\n}"


# --- import ------------------------------------------------------------------------------


def parse_export(text: str, clock: Clock) -> tuple[list[Session], list[Turn], list[Summary]]:
    """Read an export's sessions, turns and summaries, or raise one clear error."""
    data = _load(text)
    sessions: list[Session] = []
    turns: list[Turn] = []
    summaries: list[Summary] = []
    for n, raw in enumerate(_list(data, "sessions", "the file"), start=1):
        where = f"session {n}"
        session = _session(_obj(raw, where), clock, where)
        if session is None:
            continue
        sessions.append(session)
        for k, t in enumerate(_list(raw, "turns", where), start=1):
            turns.append(_turn(_obj(t, f"{where}, turn {k}"), session, clock, f"{where}, turn {k}"))
        summary = _summary(raw, session, turns, clock, where)
        if summary is not None:
            summaries.append(summary)
    return sessions, turns, summaries


def import_export(
    store: Store,
    files: PersonaFiles,
    clock: Clock,
    text: str,
    sessions_in_use: Sessions | None = None,
) -> ImportReport:
    """Import an export's JSON text into this profile; calls no model, writes nothing on error.

    The persona and profile in the file (when present and not blank) replace the profile's
    own, whose previous versions are kept in history/; a blank one (an export of a profile
    that knew nothing yet) leaves the profile's own as it is. The export's open session (its
    newest active one) stays open when this profile's own open session is empty, as in a new
    profile: that empty one goes, and `sessions_in_use` (the caller's, if any) moves to the
    imported one. Older active sessions in the file were being archived when it was written:
    they are again.
    """
    sessions, turns, summaries = parse_export(text, clock)
    data = json.loads(text)  # already checked by parse_export
    own_active = store.active_session()
    imported_active = sorted(
        (s for s in sessions if s.status == ACTIVE), key=lambda s: (s.start_ms, s.session_id)
    )
    keep_open = own_active is None or (bool(imported_active) and _empty(store, own_active))
    demoted = 0
    if not keep_open:
        # One active session per profile: the imported ones join the archive as they are.
        assert own_active is not None
        sessions, demoted = _demoted(store, sessions, own_active.session_id)
    new = store.import_records(sessions, turns, summaries)
    if keep_open and imported_active:
        if own_active is not None:
            store.delete_session(own_active.session_id)
        for pending in imported_active[:-1]:  # archived again at the next start
            if not store.archive_steps(pending.session_id):
                store.record_archive_step(pending.session_id, "started")
        if sessions_in_use is not None:
            sessions_in_use.open()
    replaced = []
    for key, name in (("persona", PERSONA), ("profile", PROFILE)):
        value = data.get(key)
        if isinstance(value, str) and value.strip() and files.write(name, value).changed:
            replaced.append(name)
    return ImportReport(*new, files=tuple(replaced), demoted=demoted)


def _empty(store: Store, session: Session) -> bool:
    """Nothing was said in `session` yet (a new profile's, or the one this command opened)."""
    return not session.rolling_summary and not store.turns(session.session_id)


def _demoted(store: Store, sessions: list[Session], own: str) -> tuple[list[Session], int]:
    """`sessions` with every active one but `own` stored as archived, and how many of those
    are new here (one held already is skipped by the import)."""
    kept, demoted = [], 0
    for s in sessions:
        if s.status == ACTIVE and s.session_id != own and store.get_session(s.session_id) is None:
            s = Session(
                s.session_id, s.start_ms, s.end_ms, ARCHIVED, 0, s.rolling_summary, s.folded_count
            )
            demoted += 1
        kept.append(s)
    return kept, demoted


def _load(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except RecursionError:
        raise ImportDataError("import: the JSON is nested too deeply to be an export") from None
    except ValueError as exc:
        raise ImportDataError(f"import: not JSON ({exc})") from None
    if _depth(data) > MAX_DEPTH:
        raise ImportDataError("import: the JSON is nested too deeply to be an export")
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), list):
        raise ImportDataError("import: not a Seelen export (no list of sessions)")
    version = data.get("version", 1)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ImportDataError(f"import: export version {version!r} is newer than this Seelen")
    return data


def _depth(value: object) -> int:
    """Nesting depth, without recursion (a deep file must not crash the check)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        if isinstance(item, (dict, list)):
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _session(raw: dict[str, Any], clock: Clock, where: str) -> Session | None:
    status = raw.get("status")
    if status not in (ACTIVE, ARCHIVED, "ephemeral"):
        raise ImportDataError(f"import: {where}: unknown status {status!r}")
    if status == "ephemeral":  # a one-off exchange that was never meant to be kept
        return None
    end = raw.get("end")
    folded = raw.get("folded_count", 0)
    if not isinstance(folded, int) or folded < 0:
        raise ImportDataError(f"import: {where}: folded_count must be a number ≥ 0")
    return Session(
        _text(raw, "session_id", where, nonempty=True),
        to_ms(raw.get("start"), clock, where),
        to_ms(end, clock, where) if end is not None else None,
        status,
        0,
        _optional_text(raw, "rolling_summary", where),
        folded,
    )


def _turn(raw: dict[str, Any], session: Session, clock: Clock, where: str) -> Turn:
    meta = raw.get("meta", {})
    if not isinstance(meta, dict):
        raise ImportDataError(f"import: {where}: meta must be an object")
    return Turn(
        _text(raw, "text_id", where, nonempty=True),
        session.session_id,
        to_ms(raw.get("time"), clock, where),
        _text(raw, "role", where, nonempty=True),
        _text(raw, "text", where),
        0,
        meta,
    )


def _summary(
    raw: dict[str, Any], session: Session, turns: list[Turn], clock: Clock, where: str
) -> Summary | None:
    text = _optional_text(raw, "summary", where)
    if not text:
        return None
    own = [t.ts_ms for t in turns if t.session_id == session.session_id]
    start, end = raw.get("summary_start"), raw.get("summary_end")
    # Version 1 exports carry no summary id or span: the session's turns give the span, and
    # the id is derived from the session's so that a second import still finds it present.
    return Summary(
        _optional_text(raw, "summary_id", where) or f"{session.session_id}-summary",
        session.session_id,
        text,
        to_ms(start, clock, where) if start else min(own, default=session.start_ms),
        to_ms(end, clock, where) if end else max(own, default=session.end_ms or session.start_ms),
    )


def to_ms(value: object, clock: Clock, where: str) -> int:
    """An ISO 8601 time as integer milliseconds (a time without offset is the user's zone)."""
    if not isinstance(value, str):
        raise ImportDataError(f"import: {where}: a time must be an ISO 8601 string, not {value!r}")
    ms = iso_to_ms(value, naive_zone=clock.tz)
    if ms is None:
        raise ImportDataError(f"import: {where}: {value!r} is not an ISO 8601 time")
    return ms


def _obj(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ImportDataError(f"import: {where} must be an object")
    return value


def _list(raw: dict[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise ImportDataError(f"import: {where}: {key!r} must be a list")
    return value


def _text(raw: dict[str, Any], key: str, where: str, *, nonempty: bool = False) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or (nonempty and not value):
        raise ImportDataError(f"import: {where}: {key!r} must be a{' non-empty' * nonempty} string")
    return value


def _optional_text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ImportDataError(f"import: {where}: {key!r} must be a string")
    return value
