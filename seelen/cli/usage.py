"""A usage error (a wrong flag, value or argument) as the one line every failure is."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer


def usage_error(exc: typer.TyperException) -> NoReturn:
    """A wrong flag, value or argument as one line naming the command and its usage (click
    printed four: usage, a hint, a blank, the error); a help page asked for by a bare group
    (`seelen memory`) is shown whole."""
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    if not isinstance(exc, UsageError) or isinstance(exc, NoArgsIsHelpError):
        show = getattr(exc, "show", None)
        if show is None:
            raise exc
        show()
        sys.exit(getattr(exc, "exit_code", 2))
    message = exc.format_message().rstrip(".")
    line = f"{message[:1].lower()}{message[1:]}"
    if exc.ctx is None:  # an option of the command line itself, before any command
        print(f"seelen: {line}", file=sys.stderr)
    else:
        usage = exc.ctx.get_usage().removeprefix("Usage: ")
        print(f"{exc.ctx.command_path}: {line}; usage: {usage}", file=sys.stderr)
    sys.exit(exc.exit_code)
