"""`python -m seelen.owner`: the warm owner process of the profile named by the environment.

Started in the background by the thin client (`seelen.client.connect`) when a client finds
no owner; it opens the profile (`host.open_service`), serves it (`server.OwnerServer`) until
idle or stopped, and exits.
"""

from __future__ import annotations

import asyncio
import os
import sys

from seelen.client import place
from seelen.config import Settings
from seelen.owner.host import open_service
from seelen.owner.server import server_for
from seelen.runtime import ProfileBusy


async def run_owner(settings: Settings, *, memory_only: bool) -> int:
    """Open the profile, serve it until idle or stopped, close it; returns the exit code."""
    path = place.socket_path(settings)
    if not place.usable(path):
        print(f"seelen owner: socket path too long: {path}", file=sys.stderr)
        return 2
    try:
        service = await open_service(settings, memory_only=memory_only)
    except ProfileBusy as exc:  # another process holds it: the client waits for that one
        print(f"seelen owner: {exc}", file=sys.stderr)
        return place.EXIT_PROFILE_BUSY
    idle = settings.idle_minutes * 60 if settings.idle_minutes else None
    server = server_for(service, idle_seconds=idle)
    try:
        await server.serve(path)
    finally:
        await service.app.aclose()
    return 0


def main() -> None:
    """The owner of the profile named by the environment."""
    from seelen.config import load_settings
    from seelen.errors import SeelenError
    from seelen.heap import limit_arenas

    limit_arenas()  # before any thread starts
    try:
        memory_only = os.environ.get(place.MEMORY_ONLY_ENV) == "1"
        code = asyncio.run(run_owner(load_settings(), memory_only=memory_only))
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
