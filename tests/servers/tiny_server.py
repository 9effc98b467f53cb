"""A minimal stdio MCP server in plain Python: it starts in milliseconds.

It speaks the handshake-era protocol (initialize, tools/list, tools/call, ping) and answers
anything else "method not found", which is how a client learns to skip the newer
`server/discover`. Tools: `echo(text)`, `crash()`, which ends the process at once, and
`later`, which says it runs only as a task.
"""

import json
import os
import sys

TOOLS = [
    {
        "name": "echo",
        "description": "Say the text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {"name": "crash", "description": "End the server.", "inputSchema": {"type": "object"}},
    {
        "name": "later",
        "description": "Runs only as a task (MCP 2025-11-25 tasks).",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "required"},
    },
]


def answer(request: dict) -> dict:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tiny", "version": "1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "crash":
        os._exit(3)
    if method == "tools/call" and params.get("name") == "echo":
        text = str(params.get("arguments", {}).get("text", ""))
        return {"content": [{"type": "text", "text": text}], "isError": False}
    raise LookupError(method)


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    try:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
    except LookupError as missing:
        error = {"code": -32601, "message": f"Method not found: {missing}"}
        reply = {"jsonrpc": "2.0", "id": request["id"], "error": error}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
