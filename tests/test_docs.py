"""The README and docs/ stay true to the code: the CLI reference and the settings table are
what the commands and `seelen.config` say today, every command is described in prose, the
README stays short and holds the test command CI runs, and every relative link lands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from generate_docs import REGENERATE, ROOT, expected, slug, top_level_commands

DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 300  # issue 27: what Seelen is, the two commands, five minutes, links


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def test_generated_docs_match_the_code() -> None:
    stale = [
        path.relative_to(ROOT).as_posix()
        for path, text in expected().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, (
        f"{', '.join(stale)} no longer match the commands or settings: run `{REGENERATE}` "
        "and commit the result"
    )


def test_every_top_level_command_is_described_beyond_the_reference() -> None:
    names = top_level_commands()
    assert {"chat", "ask", "import", "mcp", "db"} <= set(names)
    prose = "\n".join(
        page.read_text(encoding="utf-8") for page in DOCS.glob("*.md") if page.name != "cli.md"
    )
    missing = [name for name in names if not re.search(rf"\bseelen {re.escape(name)}\b", prose)]
    assert not missing, f"no page of docs/ (besides cli.md) mentions `seelen {missing[0]}`"


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    ci_command = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    blocks = re.findall(r"```sh\n(.*?)\n```", text, re.DOTALL)
    # The first two code blocks: install-and-run, then the very command CI runs.
    assert blocks[:2] == ["./install.sh && .venv/bin/seelen", ci_command]


_FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
# [text](target), where the text may hold `code` (as in [`seelen mcp --help`](cli.md#…)).
_LINK = re.compile(r"\[(?:[^\]\n`]|`[^`\n]*`)*\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    """The targets of the Markdown links on `page`, outside fenced code blocks."""
    return _LINK.findall(_FENCED.sub("", page.read_text(encoding="utf-8")))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of `page` (a repeated heading gets -1, -2, …)."""
    seen: dict[str, int] = {}
    out = set()
    text = _FENCED.sub("", page.read_text(encoding="utf-8"))
    for heading in re.findall(r"(?m)^#{1,6} (.+)$", text):
        base = slug(heading)
        out.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return out


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_land(page: Path) -> None:
    targets = [t for t in links(page) if not re.match(r"[a-z]+:", t)]
    assert targets, f"{page.name} links nowhere: the link pattern no longer matches"
    broken = []
    for target in targets:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {', '.join(broken)}"


def test_anchors_are_githubs() -> None:
    assert slug("`seelen mcp` and MCP servers") == "seelen-mcp-and-mcp-servers"
    assert slug("seelen db restore --help") == "seelen-db-restore---help"
    assert slug("What is kept, and where") == "what-is-kept-and-where"
    assert slug("Seelen's own tools and MCP servers") == "seelens-own-tools-and-mcp-servers"
