"""`seelen mcp --http`: the same server over streamable HTTP at http://HOST:PORT/mcp.

It listens only where it is told (127.0.0.1 by default), and every HTTP request must carry
`Authorization: Bearer <token>` (`seelen mcp token`); anything else gets 401 before the MCP
server sees it. Access logs are off, and the token is never written anywhere but its file.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from seelen.mcp_server.token import TokenFile

if TYPE_CHECKING:
    from seelen.mcp_server.server import SeelenMCP

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
DEFAULT_PORT = 7335
PATH = "/mcp"


class BearerAuth:
    """ASGI middleware: an HTTP request without the profile's bearer token gets 401."""

    def __init__(self, app: ASGIApp, token: TokenFile) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorised(scope):
            body = json.dumps(
                {"error": "invalid_token", "error_description": "use `seelen mcp token`"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="seelen"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)  # lifespan, and authorised requests

    def _authorised(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and self.token.accepts(given.strip())
        return False


async def serve_http(server: SeelenMCP, token: TokenFile, host: str, port: int) -> None:
    """Serve `server` (an MCPServer) at http://host:port/mcp behind the bearer token."""
    import uvicorn

    # On a loopback address the SDK also checks the Host and Origin headers (DNS rebinding).
    app = server.streamable_http_app(streamable_http_path=PATH, host=host)
    config = uvicorn.Config(
        BearerAuth(app, token), host=host, port=port, access_log=False, log_level="warning"
    )
    await uvicorn.Server(config).serve()
