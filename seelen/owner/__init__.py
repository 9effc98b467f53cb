"""The owner of a profile as a process: its wire protocol, its server, the thin client.

`wire` and `client` import only the standard library, so a client starts in milliseconds.
"""
