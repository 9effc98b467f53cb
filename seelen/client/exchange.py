"""One request to the profile's owner, with the retries every front-end needs.

A request the owner never stored is sent again if the owner goes away (a stop, an idle
exit, a crash); a question it stored is never stored twice: the client then says it is
saved (`Remember` carries a key, and an import skips what it wrote, so those are sent
again safely). An owner of another version or with other settings is stopped and replaced
once. No wait is without limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from seelen.client import place
from seelen.client.connect import LOST, OwnerLost, connect, frames, stop_owner
from seelen.protocol import calls, codec, events

if TYPE_CHECKING:
    from seelen.config import Settings
    from seelen.protocol import results

R = TypeVar("R", bound=calls.Request)
# How often a request is sent to a fresh owner when the one it went to stopped before
# answering (each try means an owner went away: three in a row is no accident).
ATTEMPTS = 3
# How long a memory call waits for its answer, and for a profile held by a process that
# does not serve it (an MCP client gives up after about a minute).
CALL_SECONDS = 60.0
HELD_SECONDS = 30.0
# A long-lived client (`seelen mcp`) reads the installed code's version at most this often:
# stat-ing every source file costs 1-6 ms, and an upgrade is noticed within two seconds.
VERSION_SECONDS = 2.0
_versions: list[tuple[float, str]] = []
# Why a memory call was not served: the open chat cannot hand the profile over.
OTHER_VERSION = (
    "a Seelen chat of another version has this profile open: close it and start it again"
)


def held_seconds(settings: Settings) -> float:
    """How long a memory call waits for a profile held without being served."""
    return min(HELD_SECONDS, settings.wait_seconds)


def versioned(request: R) -> R:
    """`request` carrying this code's version (read again at most every two seconds)."""
    now = time.monotonic()
    if not _versions or now - _versions[-1][0] > VERSION_SECONDS:
        _versions[:] = [(now, place.code_version())]
    return replace(request, version=_versions[-1][1])


def send(
    settings: Settings,
    request: calls.Request,
    *,
    on_frame: Callable[[codec.Frame], None] = lambda _: None,
    on_wait: Callable[[str], None] = lambda _: None,
    memory_only: bool = False,
    wait_seconds: float | None = None,
    seconds: float | None = None,
) -> codec.Frame | None:
    """Send `request` to the owner (started when none runs) and return its final frame,
    the frames before it going to `on_frame`. None: no owner could start, and nothing was
    sent. `Refused`: an open chat of other settings serves the profile and stays. `seconds`
    bounds the wait for each frame (then `Failed`)."""
    request = versioned(request)
    replaced = False
    for _attempt in range(ATTEMPTS + 1):
        try:
            sock = connect(
                settings, on_wait=on_wait, wait_seconds=wait_seconds, memory_only=memory_only
            )
        except TimeoutError as exc:  # nothing was sent: nothing is stored
            return events.Failed(message=str(exc))
        if sock is None:
            return None
        sock.settimeout(seconds)
        saved = shown = False
        try:
            for frame in frames(sock, request):
                if frame.FINAL:
                    break
                saved = saved or isinstance(frame, events.Saved)
                shown = shown or isinstance(frame, events.TextDelta)
                on_frame(frame)
        except OwnerLost:
            if saved:  # stored: sending it again would store it twice
                return events.Failed(message=LOST, saved=True)
            if shown:  # an ephemeral answer was half shown: starting over would repeat it
                return events.Failed(message=f"{LOST}; ask again")
            continue  # never stored: a fresh owner takes it
        except TimeoutError:
            silent = f"Seelen's background process did not answer in {seconds:.0f} s"
            return events.Failed(message=silent)
        if not isinstance(frame, calls.Refused):
            return frame
        # Another version, other settings, or an owner of memory calls only: replace it once.
        if replaced or not stop_owner(settings):
            return frame
        replaced = True
    return events.Failed(message=f"{LOST}, {ATTEMPTS} times: see logs/owner.log in the profile")


def ask(
    settings: Settings,
    text: str,
    *,
    ephemeral: bool,
    on_event: Callable[[codec.Frame], None],
    on_wait: Callable[[str], None] = lambda _: None,
) -> events.Done | events.Failed | None:
    """Ask the owner; returns the turn's last event (`Done` or `Failed`), the others going to
    `on_event`. None: no owner could answer and nothing was stored, so the caller answers
    in this process."""
    path = place.socket_path(settings)
    if not settings.owner or not place.usable(path):
        return None
    question = calls.Ask(text=text, ephemeral=ephemeral, fingerprint=place.fingerprint(settings))
    final = send(settings, question, on_frame=on_event, on_wait=on_wait)
    if isinstance(final, (events.Done, events.Failed)):
        return final
    if final is None or isinstance(final, calls.Refused):
        return None  # no owner; or an open chat with other settings: answered here
    return events.Failed(message=f"the background Seelen answered {final.TAG}")


def call(
    settings: Settings, request: calls.Request, *, seconds: float = CALL_SECONDS
) -> codec.Frame:
    """One memory call (`seelen mcp`) through the profile's owner, started when none runs:
    its result, or `Failed` with one sentence. Never raises and never hangs."""
    path = place.socket_path(settings)
    if not place.usable(path):
        return events.Failed(message=f"the profile's path is too long for a Unix socket: {path}")
    final = _memory_send(settings, request, seconds)
    return events.Failed(message=start_failure(settings)) if final is None else final


def memory_call(settings: Settings, request: calls.Request) -> codec.Frame | None:
    """A memory call of a command (`memory forget`) through the process that holds the
    profile (an open chat, the warm owner, or one started for it), so that no open chat has
    to close first: its result, or `Failed` with one sentence. None: no owner can run here
    (SEELEN_OWNER=false, a socket path too long, an owner that could not start), and the
    caller does the work in this process."""
    if not settings.owner or not place.usable(place.socket_path(settings)):
        return None
    return _memory_send(settings, request, CALL_SECONDS)


def _memory_send(settings: Settings, request: calls.Request, seconds: float) -> codec.Frame | None:
    """`request` sent as a memory call (an owner started for memory calls only, if none
    runs); None when no owner could start."""
    final = send(
        settings,
        request,
        memory_only=True,
        wait_seconds=held_seconds(settings),
        seconds=seconds,
    )
    return events.Failed(message=OTHER_VERSION) if isinstance(final, calls.Refused) else final


def import_file(
    settings: Settings,
    path: str,
    fmt: str | None,
    *,
    on_progress: Callable[[results.ImportProgress], None],
    on_wait: Callable[[str], None] = lambda _: None,
) -> results.Imported | events.Failed | None:
    """Import the export at `path` through the process that holds the profile (an open chat,
    the warm owner, or one started for it), with its progress. None: no owner can run here
    (SEELEN_OWNER=false, a socket path too long, an owner that could not start)."""
    from seelen.protocol import results

    socket_file = place.socket_path(settings)
    if not settings.owner or not place.usable(socket_file):
        return None

    def progress(frame: codec.Frame) -> None:
        if isinstance(frame, results.ImportProgress):
            on_progress(frame)

    request = calls.Import(path=path, fmt=fmt)
    final = send(settings, request, on_frame=progress, on_wait=on_wait, memory_only=True)
    if isinstance(final, (results.Imported, events.Failed)):
        return final
    if isinstance(final, calls.Refused):
        return events.Failed(message=OTHER_VERSION)
    return None


def start_failure(settings: Settings) -> str:
    """Why no owner could start, from the last line it wrote to logs/owner.log."""
    try:
        lines = (settings.profile_dir / "logs" / "owner.log").read_text("utf-8").splitlines()
    except OSError:
        lines = []
    why = next((line for line in reversed(lines) if line.startswith("seelen owner: ")), "")
    reason = why.removeprefix("seelen owner: ") or "see logs/owner.log in the profile"
    return f"Seelen's background process could not start: {reason}"
