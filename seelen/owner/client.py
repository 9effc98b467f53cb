"""The thin client: hand a question to the profile's warm owner, starting one if needed.

Imports only the standard library (and `seelen.owner.wire`), so `seelen ask` costs tens of
milliseconds before its question is on its way. When no owner can serve (the socket path is
too long, the owner cannot start, a chat in another terminal holds the profile without
serving it), the caller answers in-process instead, exactly as without an owner.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.owner import wire
from seelen.owner.procs import gone

if TYPE_CHECKING:
    from seelen.config import Settings

# How long a new owner may take to open the profile (the local model loads in ~5-20 s).
START_SECONDS = 120.0
STOP_SECONDS = 15.0
POLL_SECONDS = 0.05


class OwnerLost(Exception):
    """The owner went away in the middle of an answer."""


def _connect(path: Path) -> socket.socket | None:
    """A connection to the owner at `path`, or None when nobody listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError, OSError):
        sock.close()
        return None
    return sock


def _messages(sock: socket.socket) -> Iterator[dict[str, Any]]:
    """The owner's messages, up to the one marked `end`."""
    with sock, sock.makefile("rb") as lines:
        for line in lines:
            message = wire.decode(line)
            yield message
            if message.get("end"):
                return
    raise OwnerLost("the background Seelen stopped while answering")


def request(path: Path, message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Send one short request (status, stop) and collect the answer; None if no owner."""
    sock = _connect(path)
    if sock is None:
        return None
    sock.sendall(wire.encode(message))
    try:
        return list(_messages(sock))
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


def _owner_env(settings: Settings) -> dict[str, str]:
    """The owner sees what this client sees, with the command-line flags made explicit."""
    env = dict(os.environ)
    env.update(
        SEELEN_PROFILE=settings.profile,
        SEELEN_DATA_DIR=str(Path(settings.data_dir).absolute()),
        CHAT_MODEL=settings.chat_model,
    )
    if not settings.chat_model:
        env.pop("CHAT_MODEL")
    return env


def start_owner(settings: Settings) -> socket.socket | None:
    """Start the owner in the background and connect to it; None if it could not start."""
    from seelen.files import private_dir  # only here: a question that finds its owner skips it

    directory = settings.profile_dir
    try:
        private_dir(directory)
        return _spawn(settings, directory)
    except OSError:
        return None  # the in-process path reports what is wrong with the folder


def _spawn(settings: Settings, directory: Path) -> socket.socket | None:
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
                [sys.executable, "-m", "seelen.owner"],
                env=_owner_env(settings),
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
                return sock
            if process.poll() is not None:
                return None  # it could not open the profile: the caller runs in-process
            time.sleep(POLL_SECONDS)
        process.terminate()
        return None


def stop_owner(settings: Settings) -> bool:
    """Ask a background owner to finish and wait until it is gone; True if one stopped."""
    path = wire.socket_path(settings)
    status = request(path, {"op": "status"})
    answer = request(path, {"op": "stop"})
    if not status or not answer or answer[-1].get("type") != "stopping":
        return False
    pid = int(status[-1]["pid"])
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:  # gone means the profile's lock is free again
        if gone(pid):
            return True
        time.sleep(POLL_SECONDS)
    return True


def owner_status(settings: Settings) -> dict[str, Any] | None:
    """The running owner's status, or None."""
    answer = request(wire.socket_path(settings), {"op": "status"})
    return answer[-1] if answer else None


def ask(
    settings: Settings,
    text: str,
    *,
    ephemeral: bool,
    on_message: Callable[[dict[str, Any]], None],
) -> dict[str, Any] | None:
    """Ask the owner; returns its final message (`done` or `failed`).

    None means no owner could answer and nothing was sent: the caller answers in-process.
    An owner of another version or with other settings is stopped and replaced once.
    """
    path = wire.socket_path(settings)
    if not settings.owner or not wire.usable(path):
        return None
    question = {
        "op": "ask",
        "text": text,
        "ephemeral": ephemeral,
        "version": wire.code_version(),
        "fingerprint": wire.fingerprint(settings),
    }
    for _attempt in range(2):
        sock = _connect(path) or start_owner(settings)
        if sock is None:
            return None
        sock.sendall(wire.encode(question))
        final: dict[str, Any] = {}
        for message in _messages(sock):
            if message.get("type") == "refused":
                final = message
                break
            on_message(message)
            final = message
        if final.get("type") != "refused":
            return final
        if not stop_owner(settings):
            return None  # an open chat serves this profile with other settings
    return None
