"""Typed boundaries: a bare `Any` annotation is rare in seelen/, and each one says why.

Counted from the source with `ast`: a parameter, return or attribute annotated `Any` (or
`Any | None`). `Any` inside a type (`dict[str, Any]` for JSON) is not counted. The reason is
a `# Any: …` comment on the annotation's line or the line above it. mypy checks the rest
(`[tool.mypy]` in pyproject.toml).
"""

from __future__ import annotations

import ast
from pathlib import Path

import seelen

ROOT = Path(seelen.__file__).parent
MAX_BARE_ANY = 15


def _is_any(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        return _is_any(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = (node.left, node.right)
        is_none = [isinstance(s, ast.Constant) and s.value is None for s in sides]
        return any(_is_any(s) for s in sides) and all(
            _is_any(s) or none for s, none in zip(sides, is_none, strict=True)
        )
    return False


def bare_any(source: str) -> list[int]:
    """The lines of `source` where a parameter, a return or an attribute is typed `Any`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            annotations += [p.annotation for p in params if p is not None]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        lines += [ann.lineno for ann in annotations if ann is not None and _is_any(ann)]
    return sorted(lines)


def test_the_count_sees_bare_any_and_only_that() -> None:
    source = (
        "def f(a: Any, *rest: 'Any', b: dict[str, Any], **kw: Any | None) -> typing.Any:\n"
        "    x: Any = 1\n"
        "    y: list[Any] = []\n"
    )
    assert bare_any(source) == [1, 1, 1, 1, 2]


def test_bare_any_is_rare_and_each_one_says_why() -> None:
    found: list[str] = []
    unexplained: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text("utf-8")
        lines = text.splitlines()
        for line in bare_any(text):
            where = f"{path.relative_to(ROOT.parent)}:{line}"
            found.append(where)
            if not any("# Any:" in lines[n - 1] for n in (line, line - 1) if n > 0):
                unexplained.append(where)
    assert unexplained == [], "say why with a '# Any: …' comment, or give the real type"
    assert len(found) <= MAX_BARE_ANY, found
