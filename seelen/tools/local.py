"""Local tools: one decorated function each, and the built-in ones.

    @tool
    def shout(text: Annotated[str, "what to shout"], times: int = 1) -> str:
        \"\"\"Repeat a text in capitals.\"\"\"
        return " ".join([text.upper()] * times)

The JSON schema comes from the signature (str, int, float, bool, list[...], Literal[...],
Optional/`X | None`; a default makes an argument optional; `Annotated[T, "text"]` describes
it) and the description from the docstring. Sync functions run in a worker thread.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import (
    Annotated,
    Any,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from seelen.errors import ToolError
from seelen.tools.base import LOCAL, Tool, ToolSpec

JINA_DEEPSEARCH_URL = "https://deepsearch.jina.ai/v1/chat/completions"
JINA_MODEL = "jina-deepsearch-v1"
# DeepSearch searches and reads pages before it answers; "low" effort takes ~20 s.
WEB_SEARCH_TIMEOUT = 90.0

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class LocalTool:
    """A Python function the model can call; build it with `@tool`."""

    spec: ToolSpec
    fn: Callable[..., Any]
    hints: dict[str, Any]

    async def call(self, arguments: dict[str, Any]) -> str:
        """Check the arguments against the signature, run the function, return text."""
        kwargs = _bind(self.spec.parameters, self.hints, arguments)
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(**kwargs)
        else:
            result = await asyncio.to_thread(self.fn, **kwargs)
        return _as_text(result)


@overload
def tool(fn: Callable[..., Any], /) -> LocalTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout: float | None = None
) -> Callable[[Callable[..., Any]], LocalTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> LocalTool | Callable[[Callable[..., Any]], LocalTool]:
    """Turn a typed, documented function into a `LocalTool` (`@tool` or `@tool(name=...)`)."""

    def build(func: Callable[..., Any]) -> LocalTool:
        doc = description if description is not None else inspect.getdoc(func) or ""
        if not doc:
            raise TypeError(f"tool {func.__name__!r} needs a docstring: the model reads it")
        parameters, hints = _schema(func)
        spec = ToolSpec(name or func.__name__, doc, parameters, LOCAL, timeout=timeout)
        return LocalTool(spec, func, hints)

    return build(fn) if fn is not None else build


def _schema(func: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON schema of a function's parameters, and their plain type hints."""
    hints = get_type_hints(func, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    plain: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{func.__name__}: *args and **kwargs cannot be described to a model")
        if param.name not in hints:
            raise TypeError(f"{func.__name__}: parameter {param.name!r} needs a type hint")
        hint, text = _unannotate(hints[param.name])
        properties[param.name] = _type_schema(hint, f"{func.__name__}.{param.name}")
        if text:
            properties[param.name]["description"] = text
        if param.default is param.empty:
            required.append(param.name)
        plain[param.name] = hint
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, plain


def _unannotate(hint: Any) -> tuple[Any, str]:
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        return base, next((x for x in extras if isinstance(x, str)), "")
    return hint, ""


def _optional_base(hint: Any) -> Any | None:
    """`X` for `X | None` / `Optional[X]`, else None."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0]
    return None


def _type_schema(hint: Any, where: str) -> dict[str, Any]:
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if (base := _optional_base(hint)) is not None:
        return {"anyOf": [_type_schema(base, where), {"type": "null"}]}
    origin = get_origin(hint)
    if hint is list or origin is list:
        args = get_args(hint)
        return (
            {"type": "array", "items": _type_schema(args[0], where)} if args else {"type": "array"}
        )
    if origin is Literal:
        values = list(get_args(hint))
        kinds = {_SCALARS.get(type(v)) for v in values}
        if len(kinds) != 1 or None in kinds:
            raise TypeError(f"{where}: Literal values must share one of str/int/float/bool")
        return {"type": kinds.pop(), "enum": values}
    raise TypeError(f"{where}: type {hint!r} is not supported in a tool signature")


def _bind(schema: dict[str, Any], hints: dict[str, Any], arguments: dict[str, Any]) -> dict:
    """Check and lightly coerce the model's arguments (models send "5" for 5 at times)."""
    unknown = sorted(set(arguments) - set(hints))
    if unknown:
        expected = ", ".join(hints) or "none"
        raise ToolError(f"unexpected argument {unknown[0]!r} (expected: {expected})")
    missing = [name for name in schema.get("required", []) if name not in arguments]
    if missing:
        raise ToolError(f"missing required argument {missing[0]!r}")
    return {name: _coerce(value, hints[name], name) for name, value in arguments.items()}


def _coerce(value: Any, hint: Any, name: str) -> Any:
    if (base := _optional_base(hint)) is not None:
        return None if value is None else _coerce(value, base, name)
    origin = get_origin(hint)
    if hint is list or origin is list:
        if not isinstance(value, list):
            raise ToolError(f"argument {name!r} must be a list, got {value!r}")
        item = get_args(hint)[0] if get_args(hint) else Any
        return value if item is Any else [_coerce(v, item, name) for v in value]
    if origin is Literal:
        if value not in get_args(hint):
            allowed = ", ".join(repr(v) for v in get_args(hint))
            raise ToolError(f"argument {name!r} must be one of {allowed}, got {value!r}")
        return value
    return _coerce_scalar(value, hint, name)


def _coerce_scalar(value: Any, hint: Any, name: str) -> Any:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    text = value.strip().lower() if isinstance(value, str) else None
    if hint is str and text is not None:
        return value
    if hint is bool and (isinstance(value, bool) or text in ("true", "false")):
        return value if isinstance(value, bool) else text == "true"
    if hint is int and is_number and float(value).is_integer():
        return int(value)
    if hint is int and text is not None and text.lstrip("-").isdigit():
        return int(text)
    if hint is float and is_number:
        return float(value)
    if hint is float and text is not None:
        try:
            return float(text)
        except ValueError:
            pass
    raise ToolError(f"argument {name!r} must be {_SCALARS.get(hint, hint)}, got {value!r}")


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return "(done, no output)"
    return json.dumps(result, ensure_ascii=False, default=str)


# ---------------------------------------------------------------- built-in tools


def current_time_tool(default_timezone: str = "") -> LocalTool:
    """`current_time`: now, in the configured zone (empty = this machine's) or a given one."""

    @tool
    def current_time(
        timezone: Annotated[str, "IANA zone such as Europe/Berlin; empty = the user's own"] = "",
    ) -> str:
        """The current date, time and weekday, in the user's timezone or another one."""
        zone = timezone.strip() or default_timezone
        try:
            now = datetime.now(ZoneInfo(zone)) if zone else datetime.now().astimezone()
        except (ZoneInfoNotFoundError, ValueError):
            hint = "use an IANA name like Europe/Berlin"
            raise ToolError(f"unknown timezone {zone!r} ({hint})") from None
        label = zone or "local time"
        return f"{now:%A, %Y-%m-%d %H:%M:%S} {now.tzname()} (UTC{now:%z}, {label})"

    return current_time


def web_search_tool(api_key: str, url: str = JINA_DEEPSEARCH_URL) -> LocalTool:
    """`web_search` through Jina DeepSearch (an OpenAI-compatible chat endpoint at `url`)."""

    @tool(timeout=WEB_SEARCH_TIMEOUT)
    async def web_search(query: Annotated[str, "the question to research on the web"]) -> str:
        """Search the web and read pages to answer a question; returns an answer with sources.

        Slow (about 20 s): use it for facts that need current or outside information.
        """
        import httpx2  # openai's HTTP client; imported lazily, only a configured key needs it

        body = {
            "model": JINA_MODEL,
            "messages": [{"role": "user", "content": query}],
            "stream": False,
            "reasoning_effort": "low",
        }
        headers = {"Authorization": f"Bearer {api_key}"}
        async with httpx2.AsyncClient(timeout=WEB_SEARCH_TIMEOUT) as client:
            try:
                response = await client.post(url, json=body, headers=headers)
            except httpx2.HTTPError as exc:
                raise ToolError(f"web search unreachable: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise ToolError(f"web search: HTTP {response.status_code}: {response.text[:200]}")
        try:
            payload = response.json()
        except ValueError:
            raise ToolError(f"web search: reply is not JSON: {response.text[:200]}") from None
        return _deepsearch_answer(payload)

    return web_search


def _deepsearch_answer(payload: dict[str, Any]) -> str:
    """The answer text of a DeepSearch reply, followed by the URLs it cites."""
    try:
        message = payload["choices"][0]["message"]
        answer = str(message["content"] or "")
    except (KeyError, IndexError, TypeError):
        raise ToolError("web search: unexpected reply (no choices[0].message.content)") from None
    urls = [
        a["url_citation"]["url"]
        for a in message.get("annotations") or []
        if isinstance(a, dict) and isinstance(a.get("url_citation"), dict)
    ]
    urls = list(dict.fromkeys(urls or payload.get("readURLs") or []))[:10]
    if urls:
        answer += "\n\nSources:\n" + "\n".join(f"- {u}" for u in urls)
    return answer


SearchFn = Callable[[str, int], "str | Awaitable[str]"]


def memory_search_tool(search_fn: SearchFn) -> LocalTool:
    """`memory_search` over the user's long-term memory, answered by `search_fn(query, limit)`."""

    @tool
    async def memory_search(
        query: Annotated[str, "what to look for, in the user's words"],
        limit: Annotated[int, "how many memories to return (1-20)"] = 5,
    ) -> str:
        """Search the user's own long-term memory (past conversations and summaries)."""
        limit = max(1, min(limit, 20))
        if inspect.iscoroutinefunction(search_fn):
            return await search_fn(query, limit)
        result = await asyncio.to_thread(search_fn, query, limit)
        return await result if inspect.isawaitable(result) else result

    return memory_search


def builtin_tools(
    *,
    timezone: str,
    jina_api_key: str = "",
    jina_url: str = JINA_DEEPSEARCH_URL,
    memory_search: SearchFn | None = None,
) -> list[Tool]:
    """The built-in tools: `current_time` always, `web_search` with a Jina key, `memory_search`
    when a search function is given."""
    tools: list[Tool] = [current_time_tool(timezone)]
    if jina_api_key:
        tools.append(web_search_tool(jina_api_key, jina_url))
    if memory_search is not None:
        tools.append(memory_search_tool(memory_search))
    return tools
