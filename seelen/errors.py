"""The error hierarchy. The CLI turns each into one clear line and an exit code."""


class SeelenError(Exception):
    """Base of every error Seelen reports to the user."""

    exit_code = 1


class ConfigError(SeelenError):
    """A setting is missing or has a bad value."""

    exit_code = 2


class ModelError(SeelenError):
    """The chat or tool model could not answer; `status` is the endpoint's HTTP status, if any."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StoreError(SeelenError):
    """The memory store could not be read or written."""


class ToolError(SeelenError):
    """A tool or MCP server failed."""
