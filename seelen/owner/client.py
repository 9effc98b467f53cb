"""The thin client: hand a request to the profile's warm owner, starting one if needed.

Imports only the standard library (and `seelen.owner.wire`), so `seelen ask` costs tens of
milliseconds before its question is on its way. When no owner can serve (the socket path is
too long, the owner cannot start), the caller answers in-process instead, exactly as without
an owner. When another process holds the profile without serving it (a chat still opening,
`memory reindex`, an owner finishing before it stops), the client waits for it to serve or
to leave, saying once whom it waits for.

A question the owner never stored is sent again if the owner goes away (a stop, an idle
exit, a crash); one it stored is never stored twice: the client then says it is saved.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from seelen.owner import wire
from seelen.owner.procs import gone

if TYPE_CHECKING:
    from seelen.config import Settings

# How long a new owner may take to open the profile (the local model loads in ~5-20 s).
START_SECONDS = 120.0
STOP_SECONDS = 15.0
POLL_SECONDS = 0.05
# How often a question is sent to a fresh owner when the one it went to stopped before
# storing it (each try means an owner went away: three in a row is no accident).
ATTEMPTS = 3
LOST = "the background Seelen stopped while answering"


class OwnerLost(Exception):
    """The owner went away before its final message."""


class _Busy(Exception):
    """Another process took the profile while this client started an owner."""


def _connect(path: Path) -> socket.socket | None:
    """A connection to the owner at `path`, or None when nobody listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _messages(sock: socket.socket, request: wire.Request) -> Iterator[wire.Answer]:
    """Send `request` and yield the owner's answers, up to the final one; OwnerLost when
    the owner goes away before it."""
    with sock, sock.makefile("rb") as lines:
        try:
            sock.sendall(wire.encode(request))
            for line in lines:
                message = wire.decode_answer(line)
                yield message
                if message.FINAL:
                    return
        except TimeoutError:
            raise  # the owner is there but does not answer: no reason to send it again
        except (OSError, ValueError) as exc:  # reset, or a line cut off by a crash
            raise OwnerLost(LOST) from exc
    raise OwnerLost(LOST)


def request(path: Path, message: wire.Request) -> list[wire.Answer] | None:
    """Send one short request (status, stop) and collect the answer; None if no owner."""
    sock = _connect(path)
    if sock is None:
        return None
    try:
        return list(_messages(sock, message))
    except OwnerLost:
        return None


@contextlib.contextmanager
def _spawn_lock(directory: Path) -> Iterator[None]:
    """Only one client at a time starts an owner; the others then connect to it."""
    fd = os.open(directory / wire.SPAWN_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _owner_env(settings: Settings, *, memory_only: bool) -> dict[str, str]:
    """The owner sees what this client sees, with the command-line flags made explicit."""
    env = dict(os.environ)
    env.update(
        SEELEN_PROFILE=settings.profile,
        SEELEN_DATA_DIR=str(Path(settings.data_dir).absolute()),
        CHAT_MODEL=settings.chat_model,
    )
    env.pop(wire.MEMORY_ONLY_ENV, None)
    if memory_only:
        env[wire.MEMORY_ONLY_ENV] = "1"
    if not settings.chat_model:
        env.pop("CHAT_MODEL")
    return env


def start_owner(settings: Settings, *, memory_only: bool = False) -> socket.socket | None:
    """Start the owner in the background and connect to it; None if it could not start
    (`_Busy` when another process holds the profile). A `memory_only` owner serves memory
    calls without a chat model (see `wire.MEMORY_ONLY_ENV`)."""
    from seelen.files import private_dir  # only here: a question that finds its owner skips it

    directory = settings.profile_dir
    try:
        private_dir(directory)
        return _spawn(settings, directory, memory_only=memory_only)
    except OSError:
        return None  # the in-process path reports what is wrong with the folder


def _spawn(settings: Settings, directory: Path, *, memory_only: bool) -> socket.socket | None:
    from seelen.files import private_dir

    path = wire.socket_path(settings)
    with _spawn_lock(directory):
        sock = _connect(path)
        if sock is not None:  # another client started it meanwhile
            return sock
        logs = private_dir(directory / "logs")
        log_fd = os.open(logs / "owner.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            process = subprocess.Popen(
                # -P: the caller's folder is not put on sys.path, so a folder named `seelen`
                # there (a clone in ~) cannot shadow the installed package.
                [sys.executable, "-P", "-m", "seelen.owner"],
                env=_owner_env(settings, memory_only=memory_only),
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                start_new_session=True,  # Ctrl-C in this terminal must not reach it
            )
        finally:
            os.close(log_fd)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            sock = _connect(path)
            if sock is not None:
                # A long-lived client (`seelen mcp`) reaps it when it ends: no zombie is left.
                threading.Thread(
                    target=process.wait, name="seelen-owner-reaper", daemon=True
                ).start()
                return sock
            if process.poll() is not None:
                if process.returncode == wire.EXIT_PROFILE_BUSY:
                    raise _Busy
                return None  # it could not open the profile: the caller runs in-process
            time.sleep(POLL_SECONDS)
        process.terminate()
        return None


def connect(
    settings: Settings,
    *,
    on_wait: Callable[[str], None] = lambda _: None,
    wait_seconds: float | None = None,
    memory_only: bool = False,
) -> socket.socket | None:
    """A connection to the profile's owner, starting one (`memory_only`: see `start_owner`)
    when none runs; None when no owner can run. While another process holds the profile's
    lock without serving it, wait (saying so once through `on_wait`) until it serves or
    leaves, at most `wait_seconds` (default SEELEN_WAIT_SECONDS), then TimeoutError.

    Whether the profile is held is the kernel's answer (`wire.lock_held`), never the pid
    written in the lock file: a file naming a live process nobody locks with is no holder."""
    path = wire.socket_path(settings)
    limit = settings.wait_seconds if wait_seconds is None else wait_seconds
    deadline = time.monotonic() + limit
    told = False
    while True:
        sock = _connect(path)
        if sock is not None:
            return sock
        if not wire.lock_held(settings.profile_dir):
            with contextlib.suppress(_Busy):  # taken meanwhile: wait for the new holder
                return start_owner(settings, memory_only=memory_only)
        holder = wire.lock_holder(settings.profile_dir)
        if time.monotonic() > deadline:
            raise TimeoutError(wire.still_held(holder, limit))
        if not told:
            on_wait(f"waiting for {wire.describe_holder(holder)} to finish with this profile…")
            told = True
        time.sleep(POLL_SECONDS * 2)


def stop_owner(settings: Settings) -> bool:
    """Ask a background owner to finish and wait until it is gone; True if one stopped."""
    path = wire.socket_path(settings)
    status = owner_status(settings)
    answer = request(path, wire.Stop())
    if status is None or not answer or not isinstance(answer[-1], wire.Stopping):
        return False
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:  # gone means the profile's lock is free again
        if gone(status.pid):
            return True
        time.sleep(POLL_SECONDS)
    return True


def owner_status(settings: Settings) -> wire.StatusReply | None:
    """The running owner's status, or None."""
    answer = request(wire.socket_path(settings), wire.Status())
    final = answer[-1] if answer else None
    return final if isinstance(final, wire.StatusReply) else None


def ask(
    settings: Settings,
    text: str,
    *,
    ephemeral: bool,
    on_message: Callable[[wire.Answer], None],
    on_wait: Callable[[str], None] = lambda _: None,
) -> wire.Done | wire.Failed | None:
    """Ask the owner; returns its final message (`Done` or `Failed`).

    None means no owner could answer and nothing was stored: the caller answers in-process.
    An owner of another version or with other settings is stopped and replaced once; one
    that goes away before storing the question is replaced, and the question sent again.
    """
    path = wire.socket_path(settings)
    if not settings.owner or not wire.usable(path):
        return None
    question = wire.Ask(
        text=text,
        ephemeral=ephemeral,
        version=wire.code_version(),
        fingerprint=wire.fingerprint(settings),
    )
    replaced = False
    for _attempt in range(ATTEMPTS + 1):
        try:
            sock = connect(settings, on_wait=on_wait)
        except TimeoutError as exc:  # nothing was sent: nothing is stored
            return wire.Failed(message=str(exc))
        if sock is None:
            return None
        saved = shown = False
        try:
            for message in _messages(sock, question):
                if isinstance(message, wire.Saved):
                    saved = True
                elif isinstance(message, (wire.Done, wire.Failed)):
                    return message
                elif not message.FINAL:
                    shown = shown or isinstance(message, wire.Delta)
                    on_message(message)
                elif not isinstance(message, wire.Refused):
                    return wire.Failed(message=f"the background Seelen answered {message.TAG}")
        except OwnerLost:
            if saved:  # stored: sending it again would store it twice
                return wire.Failed(message=LOST, saved=True)
            if shown:  # an ephemeral answer was half shown: starting over would repeat it
                return wire.Failed(message=f"{LOST}; ask again")
            continue  # never stored: a fresh owner takes it
        # Refused: another version, other settings, or an owner of memory calls only.
        if replaced or not stop_owner(settings):
            return None  # an open chat serves this profile with other settings
        replaced = True
    return None


# How long a memory call waits for its answer, and for a profile held by a process that
# does not serve it (an MCP client gives up after about a minute).
CALL_SECONDS = 60.0
HELD_SECONDS = 30.0


def held_seconds(settings: Settings) -> float:
    """How long a memory call waits for a profile held without being served."""
    return min(HELD_SECONDS, settings.wait_seconds)


def call(
    settings: Settings, request: wire.MemoryCall, *, seconds: float = CALL_SECONDS
) -> wire.Result | wire.Failed:
    """One memory call (`seelen mcp`) through the profile's owner, started when none runs.

    Never raises and never hangs: an owner of another version is replaced once, one that goes
    away before answering gets the call again (a `Remember` carries a key, so it is stored
    once), and whatever stops it is a `Failed` with one sentence.
    """
    path = wire.socket_path(settings)
    if not wire.usable(path):
        return wire.Failed(message=f"the profile's path is too long for a Unix socket: {path}")
    request = replace(request, version=_version())
    replaced = False
    for _attempt in range(ATTEMPTS + 1):
        try:
            sock = connect(settings, wait_seconds=held_seconds(settings), memory_only=True)
        except TimeoutError as exc:
            return wire.Failed(message=str(exc))
        if sock is None:
            return wire.Failed(message=_start_failure(settings))
        sock.settimeout(seconds)
        try:
            final = list(_messages(sock, request))[-1]
        except OwnerLost:
            continue
        except TimeoutError:
            silent = f"Seelen's background process did not answer in {seconds:.0f} s"
            return wire.Failed(message=silent)
        if isinstance(final, (wire.Result, wire.Failed)):
            return final
        if not isinstance(final, wire.Refused):
            return wire.Failed(message=f"the background Seelen answered {final.TAG}")
        if replaced or not stop_owner(settings):
            return wire.Failed(
                message="a Seelen chat of another version has this profile open: "
                "close it and start it again"
            )
        replaced = True
    return wire.Failed(message=f"{LOST}, {ATTEMPTS} times: see logs/owner.log in the profile")


# A long-lived client (`seelen mcp`) reads the installed code's version at most this often:
# stat-ing every source file costs 1-6 ms, and an upgrade is noticed within two seconds.
VERSION_SECONDS = 2.0
_versions: list[tuple[float, str]] = []


def _version() -> str:
    now = time.monotonic()
    if not _versions or now - _versions[-1][0] > VERSION_SECONDS:
        _versions[:] = [(now, wire.code_version())]
    return _versions[-1][1]


def _start_failure(settings: Settings) -> str:
    """Why no owner could start, from the last line it wrote to logs/owner.log."""
    try:
        lines = (settings.profile_dir / "logs" / "owner.log").read_text("utf-8").splitlines()
    except OSError:
        lines = []
    why = next((line for line in reversed(lines) if line.startswith("seelen owner: ")), "")
    reason = why.removeprefix("seelen owner: ") or "see logs/owner.log in the profile"
    return f"Seelen's background process could not start: {reason}"
