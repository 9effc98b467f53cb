"""The `seelen` command line: every typer command, thin over the runtime and the owner."""
