"""The thin client's connection to a profile's owner: find it, start it, stop it.

When another process holds the profile without serving it (a chat still opening, `memory
reindex`, an owner finishing before it stops), a client waits for it to serve or to leave,
saying once whom it waits for, at most SEELEN_WAIT_SECONDS. Whether the profile is held is
the kernel's answer (`place.lock_held`), never a pid read from a file.

Standard library only (and `seelen.protocol`): `seelen ask` costs tens of milliseconds
before its question is on its way.
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
from pathlib import Path
from typing import TYPE_CHECKING

from seelen.client import place
from seelen.client.procs import gone
from seelen.protocol import calls, codec, decode_answer

if TYPE_CHECKING:
    from seelen.config import Settings

# How long a new owner may take to open the profile (the local model loads in ~5-20 s).
START_SECONDS = 120.0
STOP_SECONDS = 15.0
POLL_SECONDS = 0.05
LOST = "the background Seelen stopped while answering"


class OwnerLost(Exception):
    """The owner went away before its final frame."""


class Busy(Exception):
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


def frames(sock: socket.socket, request: calls.Request) -> Iterator[codec.Frame]:
    """Send `request` and yield the owner's frames, up to the final one; OwnerLost when
    the owner goes away before it (TimeoutError, when the socket has a timeout and the
    owner is there but silent: no reason to send it again)."""
    with sock, sock.makefile("rb") as lines:
        try:
            sock.sendall(codec.encode(request))
            for line in lines:
                frame = decode_answer(line)
                yield frame
                if frame.FINAL:
                    return
        except TimeoutError:
            raise
        except (OSError, ValueError) as exc:  # reset, or a line cut off by a crash
            raise OwnerLost(LOST) from exc
    raise OwnerLost(LOST)


def request(path: Path, message: calls.Request) -> list[codec.Frame] | None:
    """Send one short request (status, stop) and collect the answer; None if no owner."""
    sock = _connect(path)
    if sock is None:
        return None
    try:
        return list(frames(sock, message))
    except OwnerLost:
        return None


@contextlib.contextmanager
def _spawn_lock(directory: Path) -> Iterator[None]:
    """Only one client at a time starts an owner; the others then connect to it."""
    fd = os.open(directory / place.SPAWN_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
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
    env.pop(place.MEMORY_ONLY_ENV, None)
    if memory_only:
        env[place.MEMORY_ONLY_ENV] = "1"
    if not settings.chat_model:
        env.pop("CHAT_MODEL")
    return env


def start_owner(settings: Settings, *, memory_only: bool = False) -> socket.socket | None:
    """Start the owner in the background and connect to it; None if it could not start
    (`Busy` when another process holds the profile). A `memory_only` owner serves memory
    calls without a chat model (see `place.MEMORY_ONLY_ENV`)."""
    from seelen.files import private_dir  # only here: a question that finds its owner skips it

    directory = settings.profile_dir
    try:
        private_dir(directory)
        return _spawn(settings, directory, memory_only=memory_only)
    except OSError:
        return None  # the in-process path reports what is wrong with the folder


def _spawn(settings: Settings, directory: Path, *, memory_only: bool) -> socket.socket | None:
    path = place.socket_path(settings)
    with _spawn_lock(directory):
        sock = _connect(path)
        if sock is not None:  # another client started it meanwhile
            return sock
        env = _owner_env(settings, memory_only=memory_only)
        for _ in range(2):
            process = launch_owner(settings, env)
            sock = _wait_for_socket(path, process)
            # Killed by a signal while it started (not a failure of its own, which it says in
            # logs/owner.log): one more start, as a running owner killed is replaced unseen.
            if sock is not None or process.returncode is None or process.returncode >= 0:
                return sock
        return None


def launch_owner(settings: Settings, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start `python -m seelen.owner` in the background, its output in logs/owner.log."""
    from seelen.files import private_dir  # only here: a question that finds its owner skips it

    logs = private_dir(settings.profile_dir / "logs")
    log_fd = os.open(logs / "owner.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            # -P: the caller's folder is not put on sys.path, so a folder named `seelen`
            # there (a clone in ~) cannot shadow the installed package.
            [sys.executable, "-P", "-m", "seelen.owner"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,  # Ctrl-C in this terminal must not reach it
        )
    finally:
        os.close(log_fd)


def _wait_for_socket(path: Path, process: subprocess.Popen[bytes]) -> socket.socket | None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        sock = _connect(path)
        if sock is not None:
            # A long-lived client (`seelen mcp`) reaps it when it ends: no zombie is left.
            threading.Thread(target=process.wait, name="seelen-owner-reaper", daemon=True).start()
            return sock
        if process.poll() is not None:
            if process.returncode == place.EXIT_PROFILE_BUSY:
                raise Busy
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
    leaves, at most `wait_seconds` (default SEELEN_WAIT_SECONDS), then TimeoutError."""
    path = place.socket_path(settings)
    limit = settings.wait_seconds if wait_seconds is None else wait_seconds
    deadline = time.monotonic() + limit
    told = False
    while True:
        sock = _connect(path)
        if sock is not None:
            return sock
        if not place.lock_held(settings.profile_dir):
            with contextlib.suppress(Busy):  # taken meanwhile: wait for the new holder
                return start_owner(settings, memory_only=memory_only)
        holder = place.Holder.read(settings.profile_dir)
        if time.monotonic() > deadline:
            raise TimeoutError(holder.still_there(limit))
        if not told:
            on_wait(f"waiting for {holder.line()} to finish with this profile…")
            told = True
        time.sleep(POLL_SECONDS * 2)


def stop_owner(settings: Settings) -> bool:
    """Ask a background owner to finish and wait until it is gone; True if one stopped."""
    path = place.socket_path(settings)
    status = owner_status(settings)
    answer = request(path, calls.Stop())
    if status is None or not answer or not isinstance(answer[-1], calls.Stopping):
        return False
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:  # gone means the profile's lock is free again
        if gone(status.pid):
            return True
        time.sleep(POLL_SECONDS)
    return True


def owner_status(settings: Settings) -> calls.OwnerStatus | None:
    """The running owner's status, or None."""
    answer = request(place.socket_path(settings), calls.Status())
    final = answer[-1] if answer else None
    return final if isinstance(final, calls.OwnerStatus) else None
