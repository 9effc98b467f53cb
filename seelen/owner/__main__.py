"""`python -m seelen.owner`: the warm owner process of the profile named by the environment.

Started in the background by the thin client (`seelen.client.connect`) when a client finds
no owner; it takes the profile's lock, opens the profile (`host.open_service`), serves it
(`server.OwnerServer`) until idle or stopped, and exits.

Resting: a quiet minute frees the embedding model and lets go of the libraries' pages
(20,014 turns, one ask: 380-395 MiB warm, 137-149 after; `heap.page_out_files`), but
LanceDB's and onnxruntime's runtimes keep about 100 MiB that no release gives back. So a
background owner without a local model server that has been quiet for
`server.REST_SECONDS` (five minutes) closes the profile, starts a resting successor and
exits. The successor (`SEELEN_OWNER_RESTING=1`) holds the lock and listens with nothing
loaded (about 40 MiB), and
opens the profile at the first request that needs it, as a fresh owner would, then serves
as before. A local model server is never stopped this way: starting it again would make
the next question wait seconds for it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable

from seelen.client import place
from seelen.config import Settings
from seelen.owner.host import open_service
from seelen.owner.server import REST_SECONDS, OwnerServer
from seelen.runtime import ProfileLock, make_profile_dir
from seelen.service import ProfileService

RESTING_ENV = "SEELEN_OWNER_RESTING"
# How long a resting successor waits for the owner it replaces to let the lock go.
HANDOVER_SECONDS = 15.0


async def run_owner(settings: Settings, *, memory_only: bool, resting: bool = False) -> int:
    """Take the profile, serve it until idle or stopped, close it; returns the exit code."""
    path = place.socket_path(settings)
    if not place.usable(path):
        print(f"seelen owner: socket path too long: {path}", file=sys.stderr)
        return 2
    make_profile_dir(settings.profile_dir)
    lock = ProfileLock(settings.profile_dir, "owner", settings.wait_seconds)
    if not await _take(lock, HANDOVER_SECONDS if resting else 0.0):
        # Another process holds it: the client waits for that one.
        print(f"seelen owner: {lock.busy()}", file=sys.stderr)
        return place.EXIT_PROFILE_BUSY
    opened: list[ProfileService] = []

    async def opener() -> ProfileService:
        opened.append(await open_service(settings, memory_only=memory_only, lock=lock))
        return opened[-1]

    idle = settings.idle_minutes * 60 if settings.idle_minutes else None
    server = OwnerServer(
        None if resting else await _first(opener, lock),
        opener=opener,
        version=place.code_version(),
        fingerprint=place.fingerprint(settings),
        idle_seconds=idle,
        rest_seconds=None if idle is None else min(REST_SECONDS, idle / 3),
        memory_only=memory_only,
    )
    try:
        await server.serve(path)
    finally:
        if opened:
            await opened[-1].app.aclose()  # it lets the lock go, last
        else:
            lock.release()
    if server.resting:
        _hand_over(settings)
    return 0


async def _take(lock: ProfileLock, seconds: float) -> bool:
    """Take `lock`, waiting up to `seconds` for a holder to let it go."""
    deadline = time.monotonic() + seconds
    while not lock.try_acquire():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _first(
    opener: Callable[[], Awaitable[ProfileService]], lock: ProfileLock
) -> ProfileService:
    """Open the profile now (an owner that does not rest); the lock goes when it fails."""
    try:
        return await opener()
    except BaseException:
        lock.release()
        raise


def _hand_over(settings: Settings) -> None:
    """Start the resting successor (it waits for this process to let the lock go)."""
    from seelen.client.connect import launch_owner

    launch_owner(settings, {**os.environ, RESTING_ENV: "1"})  # memory-only, if it was


def main() -> None:
    """The owner of the profile named by the environment."""
    from seelen.config import load_settings
    from seelen.errors import SeelenError
    from seelen.heap import hold_collector

    hold_collector()  # and the malloc arenas limited, before any thread starts
    try:
        memory_only = os.environ.get(place.MEMORY_ONLY_ENV) == "1"
        resting = os.environ.get(RESTING_ENV) == "1"
        code = asyncio.run(run_owner(load_settings(), memory_only=memory_only, resting=resting))
    except SeelenError as exc:
        print(f"seelen owner: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    # Everything is closed and committed by now; skipping the interpreter's teardown (seconds,
    # with onnxruntime's and LanceDB's threads) frees the profile for the next owner at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
