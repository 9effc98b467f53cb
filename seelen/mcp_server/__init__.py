"""`seelen mcp`: the profile's memory as an MCP server, for other assistants.

A thin front-end: every tool is a memory call sent to the profile's owner over its socket
(`seelen.owner.client.call`), so the chat, `ask` and every MCP client share one memory with
one writer. Nothing here opens the database or loads a model.
"""
