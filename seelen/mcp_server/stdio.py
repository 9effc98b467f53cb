"""`seelen mcp` over stdio, as MCP clients start it: JSON-RPC 2.0, one message per line.

It answers `initialize` and `tools/list` from the catalog (`catalog.json`, generated from the
SDK's server) without importing the MCP SDK, so a client has Seelen's tools a fraction of a
second after it starts the command; every call goes to the profile's owner through
`tools.py`, as the SDK's HTTP server's calls do. Each request is answered in a worker
thread of its own (a slow search never holds up a ping or a second call), and the replies
are written one whole line at a time.

The handshake revisions of the protocol are spoken (`catalog.PROTOCOL_VERSIONS`); a client
that asks for `server/discover` (the newer stateless revision) is told the method is not
found and falls back to the handshake, as with any server of the handshake era.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from seelen.config import Settings
from seelen.errors import SeelenError
from seelen.mcp_server import catalog, tools
from seelen.mcp_server.arguments import check_arguments

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR = -32603
# Calls at once: each waits on the owner, which answers memory calls side by side.
WORKERS = 8
Message = dict[str, Any]  # Any: JSON-RPC carries JSON values


class RpcError(Exception):
    """A JSON-RPC error answer (`code`, one-sentence `message`, optional `data`)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:  # Any: JSON
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class StdioMemoryServer:
    """Serves one profile's memory to one client over a pair of streams."""

    def __init__(self, settings: Settings, *, read_only: bool, out: IO[str]) -> None:
        import seelen

        self.settings = settings
        self.version = seelen.__version__
        self.out = out
        self.client = ""  # the client's name, from its `initialize`
        known = catalog.load()
        offered = tools.tool_names(settings, read_only=read_only)
        self.tools = {t["name"]: t for t in known["tools"] if t["name"] in offered}
        self.resources, self.prompts = known["resources"], known["prompts"]
        self.versions: list[str] = known["protocol_versions"]
        self._write = threading.Lock()

    def serve(self, lines: IO[str]) -> None:
        """Answer every request read from `lines` until it ends; then wait for the calls
        still under way, so that none is left unanswered."""
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="seelen-mcp") as pool:
            for line in lines:
                if line.strip():
                    pool.submit(self.handle, line)

    def handle(self, line: str) -> None:
        """One line: a request (answered), a notification (not), or something else."""
        try:
            message = json.loads(line)
        except ValueError:
            self._send({"id": None, "error": {"code": PARSE_ERROR, "message": "Parse error"}})
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            if isinstance(message, dict) and "method" not in message:
                return  # a response to a request of ours: this server sends none
            self._send({"id": None, "error": {"code": INVALID_REQUEST, "message": "Invalid"}})
            return
        if "id" not in message:
            return  # a notification: initialized, cancelled, progress
        try:
            result = self.answer(message["method"], message.get("params") or {})
        except RpcError as exc:
            error: Message = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            self._send({"id": message["id"], "error": error})
        except Exception as exc:  # a bug: one line to the client, no traceback on stdout
            print(f"seelen mcp: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            error = {"code": INTERNAL_ERROR, "message": f"internal error: {exc}"}
            self._send({"id": message["id"], "error": error})
        else:
            self._send({"id": message["id"], "result": result})

    def answer(self, method: str, params: Message) -> Message:
        """The result of one request; RpcError for one that cannot be answered."""
        if method == "initialize":
            return self._initialize(params)
        if method in ("ping", "logging/setLevel"):
            return {}
        if method == "tools/list":
            return {"tools": list(self.tools.values())}
        if method == "tools/call":
            return self._call(params)
        if method == "resources/list":
            return {"resources": self.resources}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "resources/read":
            return self._read(params)
        if method == "prompts/list":
            return {"prompts": self.prompts}
        if method == "prompts/get":
            return self._prompt(params)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: Message) -> Message:
        asked = params.get("protocolVersion")
        info = params.get("clientInfo") or {}
        self.client = str(info.get("name", "")) if isinstance(info, dict) else ""
        return {
            "protocolVersion": asked if asked in self.versions else self.versions[-1],
            "capabilities": {
                "prompts": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False},
            },
            "serverInfo": {"name": "seelen", "version": self.version},
            "instructions": tools.instructions(self.settings),
        }

    def _call(self, params: Message) -> Message:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        args, problem = check_arguments(tool["inputSchema"], params.get("arguments") or {})
        if problem:
            return _tool_error(f"{name}: {problem}")
        answer = tools.run_tool(self.settings, tool["name"], args, self.client)
        if answer.error:
            return _tool_error(answer.text)
        return {
            "content": [{"type": "text", "text": answer.text}],
            "structuredContent": answer.structured,
            "isError": False,
        }

    def _read(self, params: Message) -> Message:
        uri = str(params.get("uri", ""))
        try:
            text = tools.read_resource(self.settings, uri)
        except SeelenError as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from None
        if text is None:
            raise RpcError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}

    def _prompt(self, params: Message) -> Message:
        name = params.get("name")
        known = [p["name"] for p in self.prompts]
        if name not in known:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {name} (prompts: {', '.join(known)})")
        try:
            text = tools.memory_prompt(self.settings)
        except SeelenError as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from None
        description = next(p.get("description", "") for p in self.prompts if p["name"] == name)
        message = {"role": "user", "content": {"type": "text", "text": text}}
        return {"description": description, "messages": [message]}

    def _send(self, message: Message) -> None:
        line = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False)
        with self._write:
            self.out.write(line + "\n")
            self.out.flush()


def _tool_error(message: str) -> Message:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def serve_stdio(settings: Settings, *, read_only: bool) -> None:
    """Serve on this process's stdin and stdout (UTF-8, whatever the locale says)."""
    with (
        open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False) as lines,
        open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False) as out,
    ):
        StdioMemoryServer(settings, read_only=read_only, out=out).serve(lines)
