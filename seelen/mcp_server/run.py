"""How `seelen mcp` runs: the owner warmed in the background, then stdio (without the MCP
SDK: `stdio.py`) or HTTP (the SDK's server)."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading

from seelen.client import connect, exchange
from seelen.config import Settings
from seelen.errors import SeelenError
from seelen.mcp_server.http import PATH
from seelen.mcp_server.profiles import missing_profile, served
from seelen.mcp_server.token import TokenFile


def warm_owner(settings: Settings) -> None:
    """Start the profile's owner now, in the background, so the first call finds it warm
    (a fresh owner takes seconds to open the profile); failures wait for that call."""
    if missing_profile(settings) is not None:
        return

    def start() -> None:
        with contextlib.suppress(Exception):
            sock = connect.connect(
                settings, wait_seconds=exchange.held_seconds(settings), memory_only=True
            )
            if sock is not None:
                sock.close()

    threading.Thread(target=start, name="seelen-mcp-warm", daemon=True).start()


def serve(settings: Settings, *, http: bool, host: str, port: int, read_only: bool) -> None:
    """Serve the profile's memory over stdio (what MCP clients start) or HTTP."""
    if http:
        _check_free(host, port)
    warm_owner(settings)
    print(f"seelen mcp: {served(settings).removeprefix('It ')}", file=sys.stderr)  # once
    if not http:
        from seelen.mcp_server.stdio import serve_stdio

        serve_stdio(settings, read_only=read_only)
        return
    import anyio

    from seelen.mcp_server.http import serve_http
    from seelen.mcp_server.server import build_server

    server = build_server(settings, read_only=read_only)

    token = TokenFile(settings.profile_dir)
    token.get()  # made on first use; shown only by `seelen mcp token`
    where = f"http://{host}:{port}{PATH}" if ":" not in host else f"http://[{host}]:{port}{PATH}"
    print(
        f"Seelen's memory ({settings.profile}) over MCP at {where}; "
        "clients send `Authorization: Bearer` with the token from `seelen mcp token`.",
        file=sys.stderr,
    )
    anyio.run(serve_http, server, token, host, port)


def _check_free(host: str, port: int) -> None:
    """One clear line when the address cannot be listened on (instead of uvicorn's log)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise SeelenError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
