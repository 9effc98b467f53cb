"""`python -m seelen.owner`: the warm owner process of the profile named by the environment.

Started in the background by `seelen.owner.client` when a client finds no owner; it opens the
profile (`host.open_host`), serves it (`server.OwnerServer`) until idle or stopped, and exits.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from collections.abc import Awaitable, Callable

from seelen.config import Settings
from seelen.owner import wire
from seelen.owner.host import OwnerHost, open_host
from seelen.owner.server import OwnerServer
from seelen.runtime import ProfileBusy


async def run_owner(
    settings: Settings, host_factory: Callable[[Settings], Awaitable[OwnerHost]]
) -> int:
    """Open the profile, serve it until idle or stopped, close it; returns the exit code."""
    path = wire.socket_path(settings)
    if not wire.usable(path):
        print(f"seelen owner: socket path too long: {path}", file=sys.stderr)
        return 2
    try:
        host = await host_factory(settings)
    except ProfileBusy as exc:  # another process holds it: the client waits for that one
        print(f"seelen owner: {exc}", file=sys.stderr)
        return wire.EXIT_PROFILE_BUSY
    server = OwnerServer(
        host,
        version=wire.code_version(),
        fingerprint=wire.fingerprint(settings),
        idle_seconds=settings.idle_minutes * 60 if settings.idle_minutes else None,
    )
    try:
        await server.serve(path)
    finally:
        await host.aclose()
    return 0


def main() -> None:
    """`python -m seelen.owner.server`: the owner of the profile named by the environment."""
    from seelen.config import load_settings
    from seelen.errors import SeelenError
    from seelen.heap import limit_arenas

    limit_arenas()  # before any thread starts
    try:
        memory_only = os.environ.get(wire.MEMORY_ONLY_ENV) == "1"
        host_factory = functools.partial(open_host, memory_only=memory_only)
        code = asyncio.run(run_owner(load_settings(), host_factory))
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
