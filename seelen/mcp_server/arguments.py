"""A tool call's arguments checked against the tool's input schema, as the SDK's server checks
them (pydantic's lax mode, and its words): for the stdio server, which does without the SDK.

Only what Seelen's tools use: strings, integers with bounds, optional strings, defaults,
required names. Arguments the schema does not name are ignored, as pydantic ignores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Any: JSON values, as the client sent them and as the schema describes them.
Values = dict[str, Any]


def check_arguments(schema: Mapping[str, Any], given: object) -> tuple[Values, str]:
    """The arguments with defaults filled in, and "" ; or the first problem, in one
    sentence naming the argument ("limit: input should be a valid integer")."""
    if not isinstance(given, dict):
        return {}, "the arguments: input should be an object"
    values: Values = {}
    required = set(schema.get("required", ()))
    for name, spec in schema.get("properties", {}).items():
        if name not in given:
            if name in required:
                return {}, f"{name} is required"
            if "default" in spec:
                values[name] = spec["default"]
            continue
        value, problem = _fit(given[name], spec)
        if problem:
            return {}, f"{name}: {problem}"
        values[name] = value
    return values, ""


def _fit(value: object, spec: Mapping[str, Any]) -> tuple[object, str]:
    """`value` as `spec` wants it, or why it does not fit."""
    if "anyOf" in spec:
        problems = []
        for arm in spec["anyOf"]:
            fitted, problem = _fit(value, arm)
            if not problem:
                return fitted, ""
            problems.append(problem)
        return None, problems[0]
    kind = spec.get("type")
    if kind == "null":
        return (None, "") if value is None else (None, "input should be None")
    if kind == "string":
        return (value, "") if isinstance(value, str) else (None, "input should be a valid string")
    if kind == "integer":
        number, problem = _integer(value)
        return (number, problem or _bounds(number, spec)) if not problem else (None, problem)
    return value, ""


def _integer(value: object) -> tuple[int, str]:
    """An integer as pydantic's lax mode reads one: 7, 7.0 or "7" (never True)."""
    if isinstance(value, bool):
        return 0, "input should be a valid integer"
    if isinstance(value, int):
        return value, ""
    if isinstance(value, float) and value.is_integer():
        return int(value), ""
    if isinstance(value, str):
        try:
            return int(value.strip()), ""
        except ValueError:
            return 0, "input should be a valid integer, unable to parse string as an integer"
    return 0, "input should be a valid integer"


def _bounds(number: int, spec: Mapping[str, Any]) -> str:
    if "minimum" in spec and number < spec["minimum"]:
        return f"input should be greater than or equal to {spec['minimum']}"
    if "maximum" in spec and number > spec["maximum"]:
        return f"input should be less than or equal to {spec['maximum']}"
    return ""
