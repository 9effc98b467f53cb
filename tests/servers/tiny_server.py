"""A minimal stdio MCP server in plain Python: it starts in milliseconds.

It speaks the handshake-era protocol (initialize, tools/list, tools/call, ping) and answers
anything else "method not found", which is how a client learns to skip the newer
`server/discover`. Tools: `echo(text)`, `crash()`, which ends the process at once,
`later`, which says it runs only as a task, `picture`, which returns a PNG, and `slow`,
which reports progress three times, 0.2 s apart. With `TINY_MARKER` set, each start appends
the process id to that file (how tests see whether a server was started at all).
"""

import base64
import json
import os
import sys
import time

if os.environ.get("TINY_MARKER"):
    with open(os.environ["TINY_MARKER"], "a") as marker:
        marker.write(f"{os.getpid()}\n")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"tiny" * 10).decode()

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
    {"name": "picture", "description": "A tiny picture.", "inputSchema": {"type": "object"}},
    {"name": "slow", "description": "Work in three steps.", "inputSchema": {"type": "object"}},
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def slow(params: dict) -> dict:
    token = (params.get("_meta") or {}).get("progressToken")
    for step in (1, 2, 3):
        time.sleep(0.2)
        if token is not None:
            progress = {"progressToken": token, "progress": step, "total": 3}
            progress["message"] = f"step {step}"
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    return {"content": [{"type": "text", "text": "slow work done"}], "isError": False}


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
    if method == "tools/call" and params.get("name") == "slow":
        return slow(params)
    if method == "tools/call" and params.get("name") == "picture":
        image = {"type": "image", "data": PNG, "mimeType": "image/png"}
        return {"content": [{"type": "text", "text": "a tiny picture:"}, image]}
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
    send(reply)
