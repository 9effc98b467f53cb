"""The package layout is the architecture: folders by job, imports flowing one way.

Read from the source with `ast`, so every import counts, those inside functions too.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import seelen

ROOT = Path(seelen.__file__).parent

# Top to bottom: a unit may import its own kind and anything below it, never above.
LAYERS: list[set[str]] = [
    {"seelen.__main__", "seelen.cli"},
    {"seelen.chat", "seelen.mcp_server"},
    {"seelen.owner"},
    {"seelen.api"},
    {"seelen.service"},
    {"seelen.runtime"},
    {"seelen.app"},
    {"seelen.agent"},
    {"seelen.knowledge"},
    {"seelen.tools", "seelen.memory"},
    {"seelen.models", "seelen.store", "seelen.vectors"},
    {"seelen.client"},
    {"seelen.protocol"},
    {"seelen.config", "seelen.logs", "seelen.files", "seelen.errors", "seelen.counts"},
    {"seelen.heap", "seelen.deferred", "seelen"},
]
# Units of one layer that must not import each other: the bottom stores stay apart.
APART = [{"seelen.models", "seelen.store", "seelen.vectors"}, {"seelen.tools", "seelen.memory"}]


def module_name(path: Path) -> str:
    parts = ["seelen", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """The layout unit a module belongs to: its folder (each folder is one layer), or the
    loose module itself."""
    return ".".join(module.split(".")[:2])


@functools.cache  # three tests read each module
def imports(path: Path, *, typing_only: bool = True) -> frozenset[str]:
    """Every seelen module `path` imports, at any depth of the file (without those under
    `if TYPE_CHECKING:` when `typing_only` is False: they never run)."""
    tree = ast.parse(path.read_text("utf-8"))
    if not typing_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("seelen"):
            for alias in node.names:  # `from seelen.pkg import module` imports that module
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("seelen"))
    return frozenset(found)


MODULES = {module_name(p) for p in ROOT.rglob("*.py")}


def layer_of(name: str) -> int:
    for number, units in enumerate(LAYERS):
        if name in units:
            return number
    raise AssertionError(f"{name} is in no layer of tests/test_layout.py: place it")


def test_at_most_eight_modules_sit_loose_at_the_top() -> None:
    loose = sorted(
        p.name for p in ROOT.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}
    )
    assert len(loose) <= 8, loose


def test_imports_flow_down_the_layers_only() -> None:
    upward = []
    for path in ROOT.rglob("*.py"):
        me = unit(module_name(path))
        for target in imports(path):
            other = unit(target)
            if other == me:
                continue
            if layer_of(other) < layer_of(me) or any({me, other} <= group for group in APART):
                upward.append(f"{module_name(path)} imports {target}")
    assert upward == []


def test_no_import_cycles_between_modules() -> None:
    """Imports that run (type-only ones excluded), inside functions too."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {name: imports(path, typing_only=False) - {name} for name, path in paths.items()}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> list[str] | None:
        state[name] = 1
        for nxt in sorted(graph[name]):
            if state.get(nxt) == 1:
                return [*trail, name, nxt]
            if nxt not in state and (cycle := visit(nxt, [*trail, name])):
                return cycle
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name, [])
            assert cycle is None, " -> ".join(cycle or [])


def test_no_cycle_between_folders() -> None:
    """The folders (and loose modules) import each other one way only, at any depth."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        me = unit(module_name(path))
        graph.setdefault(me, set()).update(unit(t) for t in imports(path) if unit(t) != me)

    def reach(start: str, node: str, seen: set[str]) -> bool:
        for nxt in graph.get(node, ()):
            if nxt == start or (nxt not in seen and reach(start, nxt, seen | {nxt})):
                return True
        return False

    assert [u for u in sorted(graph) if reach(u, u, {u})] == []


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in ROOT.rglob("*.py")
        if (n := len(p.read_text("utf-8").splitlines())) > 400
    }
    assert long == {}
