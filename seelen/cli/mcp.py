"""`seelen mcp`: the profile's memory as an MCP server for other assistants, and its token."""

from __future__ import annotations

from typing import Annotated

import typer

from seelen.cli.common import DataOpt, ProfileOpt, settings_from
from seelen.errors import SeelenError

mcp_app = typer.Typer(
    help="Serve your Seelen memory to other assistants (Claude, Cursor, VS Code…) over MCP.\n\n"
    "Without options it speaks MCP on stdio, as MCP clients start it: "
    '"command": "seelen", "args": ["mcp"]. It talks to the profile\'s background process '
    "(started if needed), so the chat, `seelen ask` and every client share one memory.",
)


@mcp_app.callback(invoke_without_command=True)
def mcp(
    ctx: typer.Context,
    http: Annotated[
        bool, typer.Option("--http", help="serve streamable HTTP at http://HOST:PORT/mcp")
    ] = False,
    host: Annotated[str, typer.Option(help="with --http: the address to listen on")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="with --http: the port", min=1, max=65535, metavar="PORT")
    ] = 7335,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="offer no tool that writes (no remember, forget)")
    ] = False,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Serve the memory over MCP (stdio, or --http with a bearer token)."""
    if ctx.invoked_subcommand is not None:
        return
    from seelen.mcp_server.run import serve

    settings = settings_from(profile, None, data_dir)
    serve(settings, http=http, host=host, port=port, read_only=read_only)


@mcp_app.command("token")
def token(
    rotate: Annotated[
        bool, typer.Option("--rotate", help="replace it: clients with the old one get 401")
    ] = False,
    profile: ProfileOpt = None,
    data_dir: DataOpt = None,
) -> None:
    """Print the bearer token that `seelen mcp --http` requires (made on first use)."""
    from seelen.mcp_server.profiles import missing_profile
    from seelen.mcp_server.token import TokenFile

    settings = settings_from(profile, None, data_dir)
    problem = missing_profile(settings)
    if problem is not None:
        raise SeelenError(problem)
    tokens = TokenFile(settings.profile_dir)
    print(tokens.rotate() if rotate else tokens.get())
