"""Local tools: one decorated function each, and the built-in ones.

    @tool
    def shout(text: Annotated[str, "what to shout"], times: int = 1) -> str:
        \"\"\"Repeat a text in capitals.\"\"\"
        return " ".join([text.upper()] * times)

pydantic builds the JSON schema from the signature and checks the model's arguments against
it (lax mode: models send "5" for 5 at times). A default makes an argument optional;
`Annotated[T, "text"]` describes it; the docstring describes the tool. Sync functions run in
a worker thread.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    NotRequired,
    Required,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from seelen.errors import ToolError
from seelen.tools.base import LOCAL, Tool, ToolSpec

if TYPE_CHECKING:  # pydantic is imported when the first tool is built
    from pydantic import TypeAdapter
    from pydantic_core import ErrorDetails

JINA_DEEPSEARCH_URL = "https://deepsearch.jina.ai/v1/chat/completions"
JINA_MODEL = "jina-deepsearch-v1"
# DeepSearch searches and reads pages before it answers; "low" effort takes ~20 s.
WEB_SEARCH_TIMEOUT = 90.0


@dataclass(frozen=True)
class LocalTool:
    """A Python function the model can call; build it with `@tool`."""

    spec: ToolSpec
    fn: Callable[..., Any]
    arguments: TypeAdapter[Any]  # of the arguments' TypedDict

    async def call(self, arguments: dict[str, Any]) -> str:
        """Check the arguments against the signature, run the function, return text."""
        kwargs = _validate(self.arguments, arguments, list(self.spec.parameters["properties"]))
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
        adapter, parameters = _arguments(func)
        spec = ToolSpec(name or func.__name__, doc, parameters, LOCAL, timeout=timeout)
        return LocalTool(spec, func, adapter)

    return build(fn) if fn is not None else build


def _arguments(func: Callable[..., Any]) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    """A pydantic adapter for a function's arguments, and their JSON schema for the model.

    The arguments form a TypedDict (not a model) so that any parameter name works, even
    ones a pydantic model reserves (`schema`, `model_*`).
    """
    from pydantic import ConfigDict, Field, PydanticSchemaGenerationError, TypeAdapter
    from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

    hints = get_type_hints(func, include_extras=True)
    fields: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{func.__name__}: *args and **kwargs cannot be described to a model")
        if param.name not in hints:
            raise TypeError(f"{func.__name__}: parameter {param.name!r} needs a type hint")
        hint, text = _unannotate(hints[param.name])
        if text:
            hint = Annotated[hint, Field(description=text)]
        if param.default is param.empty:
            fields[param.name] = Required[hint]
        else:
            fields[param.name] = NotRequired[hint]
            defaults[param.name] = param.default
    shape = TypedDict(f"{func.__name__}_arguments", fields)  # type: ignore[misc]  # built at run time
    shape.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    try:
        adapter = TypeAdapter(shape)
        schema = adapter.json_schema()
    except (PydanticSchemaGenerationError, TypeError) as exc:
        where = f"{func.__name__}: a type in the signature is not supported"
        raise TypeError(f"{where}: {exc}".splitlines()[0]) from None
    return adapter, _model_schema(schema, defaults)


def _unannotate(hint: object) -> tuple[Any, str]:
    """`(T, "text")` for `Annotated[T, "text"]`; a plain hint comes back with no text."""
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        return base, next((x for x in extras if isinstance(x, str)), "")
    return hint, ""


def _model_schema(schema: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema without its titles (noise to a model), with JSON-able defaults."""
    schema = _untitled(schema)
    schema.pop("additionalProperties", None)  # checked by us; some endpoints reject the key
    for name, value in defaults.items():
        if value is None or isinstance(value, str | int | float | bool):
            schema["properties"][name]["default"] = value
    return schema


def _untitled(node: object) -> Any:  # Any: JSON of the shape it was given
    if isinstance(node, dict):
        # A property named "title" maps to a dict; pydantic's own titles are strings.
        return {
            k: _untitled(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    return node


def _validate(
    adapter: TypeAdapter[Any], arguments: dict[str, Any], names: list[str]
) -> dict[str, Any]:
    """The arguments, checked and coerced; a mismatch is one `ToolError` naming each problem."""
    from pydantic import ValidationError

    try:
        return dict(adapter.validate_python(arguments))
    except ValidationError as exc:
        problems = [_problem(e) for e in exc.errors()]
        if any(p.startswith("unexpected") for p in problems):
            problems.append(f"expected: {', '.join(names) or 'no arguments'}")
        raise ToolError("; ".join(problems)) from None


def _problem(error: ErrorDetails) -> str:
    """One pydantic error as a line the model can act on."""
    where = ".".join(str(part) for part in error["loc"])
    name = str(error["loc"][0]) if error["loc"] else ""
    if error["type"] == "missing":
        return f"missing required argument {name!r}"
    if error["type"] == "extra_forbidden":
        return f"unexpected argument {name!r}"
    got = json.dumps(error.get("input"), ensure_ascii=False, default=str)[:80]
    return f"argument {where!r}: {error['msg']}, got {got}"


def _as_text(result: object) -> str:
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
        result: str | Awaitable[str]
        if inspect.iscoroutinefunction(search_fn):
            result = search_fn(query, limit)
        else:
            result = await asyncio.to_thread(search_fn, query, limit)
        return result if isinstance(result, str) else await result

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
