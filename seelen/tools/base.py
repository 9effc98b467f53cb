"""The tool contract and the registry that runs the model's tool calls.

Names: every tool has one exposed name, unique in the registry and valid for OpenAI
(`^[a-zA-Z0-9_-]{1,64}$`). Local tools keep their own name; MCP tools are exposed as
`<server>_<tool>` (see `seelen.tools.mcp`).

Fallback: an MCP tool whose own name on its server (`ToolSpec.origin_name`) equals a local
tool's name *overrides* that local tool. A call to the shared name tries the MCP tool first
and runs the local one only if the MCP call fails (error, timeout, server gone). The model
sees the shared name once, with the local tool's description and schema, so the list it sees
does not change while servers connect or drop; the override's `<server>_<tool>` name is left
out of `openai_tools()` (it stays callable and listed by `tools()`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol, runtime_checkable

from seelen.errors import ToolError
from seelen.models.chat import ModelToolCall as ToolCall  # one tool call as the model sent it

__all__ = [
    "LOCAL",
    "Tool",
    "ToolCall",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSpec",
    "parse_arguments",
]

LOCAL = "local"


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool, plus where the tool comes from.

    `source` is "local" or "mcp:<server>"; `origin_name` is the tool's own name on its MCP
    server ("" for local tools); `timeout` lets a slow tool ask for more seconds than the
    registry's default (never fewer).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    origin_name: str = ""
    timeout: float | None = None


@runtime_checkable
class Tool(Protocol):
    """Anything the model can call: a spec and one async method returning text."""

    # Read-only: a frozen dataclass or a property satisfies it.
    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: dict[str, Any]) -> str:
        """Run the tool; raise (preferably `ToolError`) on failure."""
        ...


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one call, as text for the model.

    `ok` is False for every failure (the content then starts with "error: "); `source` is
    the source of the tool that produced the content ("" when no tool ran).
    """

    call_id: str
    name: str
    content: str
    ok: bool
    seconds: float
    source: str = ""
    # Images in the result, as OpenAI `image_url` content parts (see tools.mcp_content).
    images: tuple[dict[str, Any], ...] = ()


class ToolRegistry:
    """All tools the model may call, and the concurrent runner of its calls."""

    def __init__(
        self, *, timeout: float = 30.0, result_chars: int = 8000, disabled: Sequence[str] = ()
    ) -> None:
        self.timeout = timeout
        self.result_chars = result_chars
        self.disabled = tuple(disabled)  # DISABLED_TOOLS: exposed names or fnmatch patterns
        self._tools: dict[str, Tool] = {}

    def add(self, tool: Tool) -> bool:
        """Register a tool; False when DISABLED_TOOLS hides it. A taken name raises `ToolError`."""
        name = tool.spec.name
        if name in self._tools:
            raise ToolError(f"a tool named {name!r} is already registered")
        if any(fnmatchcase(name, pattern) for pattern in self.disabled):
            return False
        self._tools[name] = tool
        return True

    def remove_source(self, source: str) -> None:
        """Remove every tool from one source, e.g. "mcp:time" when that server drops."""
        self._tools = {n: t for n, t in self._tools.items() if t.spec.source != source}

    def names(self) -> set[str]:
        """Every exposed name currently taken."""
        return set(self._tools)

    def tools(self) -> list[ToolSpec]:
        """Every registered tool, overrides included: local ones first, then MCP ones by server.

        The order does not depend on which server connected first, so the tool list sent to
        the model stays the same from run to run (and provider-side prompt caches keep hitting).
        """
        specs = [tool.spec for tool in self._tools.values()]
        return sorted(
            specs, key=lambda s: (s.source != LOCAL, "" if s.source == LOCAL else s.source)
        )

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tool list for an OpenAI chat request (overrides appear under the local name)."""
        return [
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                },
            }
            for spec in self.tools()
            if not self._is_override(spec)
        ]

    def route(self, name: str) -> list[ToolSpec]:
        """The tools a call to `name` tries, in order: MCP overrides, then the tool itself."""
        return [tool.spec for tool in self._chain(name)]

    async def run_all(
        self,
        calls: Sequence[ToolCall],
        on_done: Callable[[ToolOutcome], None] | None = None,
    ) -> list[ToolOutcome]:
        """Run the calls concurrently; return one outcome per call, in call order.

        Tool failures become error outcomes, never exceptions. `on_done` sees each outcome
        as soon as it is ready (completion order); an exception it raises is not caught.
        """

        async def run(call: ToolCall) -> ToolOutcome:
            outcome = await self._run_one(call)
            if on_done is not None:
                on_done(outcome)
            return outcome

        return list(await asyncio.gather(*(run(call) for call in calls)))

    def _is_override(self, spec: ToolSpec) -> bool:
        local = self._tools.get(spec.origin_name) if spec.origin_name else None
        return local is not None and local.spec.source == LOCAL and spec.source != LOCAL

    def _chain(self, name: str) -> list[Tool]:
        tool = self._tools.get(name)
        if tool is None:
            return []
        if tool.spec.source != LOCAL:
            return [tool]
        overrides = [
            t for t in self._tools.values() if t.spec.source != LOCAL and t.spec.origin_name == name
        ]
        overrides.sort(key=lambda t: (t.spec.source, t.spec.name))
        return [*overrides, tool]

    async def _run_one(self, call: ToolCall) -> ToolOutcome:
        started = time.perf_counter()

        def outcome(content: str, ok: bool, source: str = "") -> ToolOutcome:
            seconds = time.perf_counter() - started
            images = getattr(content, "images", ())  # a ToolText keeps them past the cut
            return ToolOutcome(call.id, call.name, self._cut(content), ok, seconds, source, images)

        chain = self._chain(call.name)
        if not chain:
            known = ", ".join(sorted(s.name for s in self.tools() if not self._is_override(s)))
            return outcome(
                f"error: unknown tool {call.name!r} (available: {known or 'none'})", False
            )
        try:
            arguments = parse_arguments(call.arguments)
        except ToolError as exc:
            return outcome(f"error: {exc}", False)
        failures: list[str] = []
        for tool in chain:
            try:
                content = await self._attempt(tool, arguments)
            except ToolError as exc:
                failures.append(f"{tool.spec.source}: {exc}" if len(chain) > 1 else str(exc))
                continue
            return outcome(content, True, tool.spec.source)
        joined = "; then ".join(failures)
        return outcome(f"error: {joined}", False, chain[-1].spec.source)

    async def _attempt(self, tool: Tool, arguments: dict[str, Any]) -> str:
        """One tool, one try, under its timeout; every failure comes out as `ToolError`."""
        timeout = max(self.timeout, tool.spec.timeout or 0.0)
        name = tool.spec.name
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                result = await tool.call(dict(arguments))
        except TimeoutError as exc:
            if not deadline.expired():  # the tool's own timeout (e.g. HTTP), not ours
                raise ToolError(f"tool {name!r} failed: TimeoutError: {exc}") from exc
            raise ToolError(f"tool {name!r} timed out after {timeout:g} s") from None
        except ToolError:
            raise
        except Exception as exc:  # a crashing tool must not end the turn: report it instead
            raise ToolError(f"tool {name!r} failed: {type(exc).__name__}: {exc}") from exc
        return result if isinstance(result, str) else str(result)

    def _cut(self, content: str) -> str:
        extra = len(content) - self.result_chars
        if extra <= 0:
            return content
        return f"{content[: self.result_chars]}\n… [cut: {extra:,} more characters]"


def parse_arguments(raw: str) -> dict[str, Any]:
    """Decode the model's JSON arguments; an empty string means no arguments."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ToolError("arguments are nested too deeply to read") from None
    if not isinstance(value, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value
