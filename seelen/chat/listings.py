"""Memory as a terminal shows it: search hits, note passages, what recall found (/why), the
session list and one session whole. Stored text is data: it goes through `visible` into a
`rich.text.Text` (or `shown` where a markup string is assembled), never taken for markup."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from seelen.chat.render import print_unpadded, shown
from seelen.chat.visible import visible
from seelen.counts import counted
from seelen.memory.context import one_line
from seelen.protocol.results import MemoryItem, NotePassage, SearchResult
from seelen.protocol.text import when

if TYPE_CHECKING:
    from seelen.app import App
    from seelen.memory.recall import RecalledItem, RecallResult
    from seelen.store import Session


# Lines of a hit's text a memory-search table shows: enough to recognise a turn, few enough
# that a screen of 80x24 holds several hits (the whole text: `sessions show`).
HIT_LINES = 3
# Columns left of a hit's text: rank (3), score (6), when/session/id (16) and the gaps
# between the four columns, measured with Rich's SIMPLE_HEAD box without its edge.
HIT_META_WIDTH = 34
# The narrowest text column the table keeps: at 30 characters a line holds five or six
# words; narrower (a terminal under 64 columns), each hit's text goes under its details.
HIT_TEXT_MIN = 30


def render_hits(console: Console, result: SearchResult, limit: int) -> None:
    """A table of the first `limit` ranked turns in the order they were ranked (with the
    score they were ranked by; a result also lists lower ones that chat's prompt holds),
    then the matching sessions' summaries; each hit's date, session and id stacked in one
    column, its text cut to `HIT_LINES` lines, so that it reads at 80 columns (in a narrower
    terminal each text goes under its details)."""
    ranked = [i for i in result.turns if i.rank is not None and i.rank <= limit]
    if not result.summaries and not ranked:
        console.print("[dim]Nothing found.[/dim]")
        return
    if console.width < HIT_META_WIDTH + HIT_TEXT_MIN:
        _stacked_hits(console, [*ranked, *result.summaries])
    else:
        _hit_table(console, [*ranked, *result.summaries])
    print_unpadded(
        console,
        f"[dim]{counted(len(result.summaries), 'summary', 'summaries')}, "
        f"{counted(len(ranked), 'turn')}, "
        f"{result.ms:.0f} ms ({result.mode}); (words): it holds the query's "
        "words, (meaning): close in meaning, maybe with none of them[/dim]",
    )


def _hit_text(item: MemoryItem, width: int) -> Text:
    """A hit's role (or "summary"), which rankers found it, and its text, cut for `width`."""
    return Text.assemble(
        ("summary" if item.kind == "summary" else item.role or "", "bold"),
        (f" ({found_by(item.rankers)})", "dim"),
        ": ",
        visible(one_line(item.text, width * HIT_LINES)),
    )


def _stacked_hits(console: Console, items: list[MemoryItem]) -> None:
    """The hits for a narrow terminal: rank, score and date on a line, session and id on
    the next, then the text, indented."""
    width = max(console.width - 4, 10)
    # "    session 12345678  id 123456789012" is 37 columns: narrower, the id goes below.
    gap = "  " if console.width >= 37 else "\n    "
    for number, item in enumerate(items, start=1):
        console.print(
            Text.assemble(
                (f"{number:>2}", "dim"),
                f"  {item.score or 0.0:.4f}  {when(item.time)}\n",
                (f"    session {item.session_id[:8]}{gap}id {item.text_id[:12]}", "dim"),
            )
        )
        text = _first_lines(console, _hit_text(item, width), width, HIT_LINES)
        print_unpadded(console, text, indent=4)


def _hit_table(console: Console, items: list[MemoryItem]) -> None:
    """The hits as a table: the date, session and id stacked in one column."""
    table = Table(box=box.SIMPLE_HEAD, expand=True, pad_edge=False, show_edge=False)
    table.add_column("#", style="dim", width=3, no_wrap=True, justify="right")
    table.add_column("score", width=6, no_wrap=True)
    table.add_column("when", width=16, no_wrap=True)  # and the session and id below it
    table.add_column("text", ratio=1, no_wrap=True)
    width = max(console.width - HIT_META_WIDTH, 20)
    for number, item in enumerate(items, start=1):
        table.add_row(
            str(number),
            f"{item.score or 0.0:.4f}",
            Text.assemble(
                when(item.time),
                (f"\nsession {item.session_id[:8]}\nid {item.text_id[:12]}", "dim"),
            ),
            _first_lines(console, _hit_text(item, width), width, HIT_LINES),
        )
    print_unpadded(console, table)


def _first_lines(console: Console, text: Text, width: int, lines: int) -> Text:
    """`text` wrapped to `width`, its first `lines` lines, a cut marked with "…"."""
    wrapped = text.wrap(console, width)
    if len(wrapped) <= lines:
        return Text("\n").join(wrapped)
    kept = list(wrapped[:lines])
    kept[-1].truncate(width - 1)
    kept[-1].rstrip()
    kept[-1].append("…")
    return Text("\n").join(kept)


def found_by(sources: Mapping[str, int]) -> str:
    """Which rankers found an item, in words: "words", "meaning" or both ("bm25…" rankers
    match the query's words, "vector…" ones its meaning)."""
    kinds = {"words" if name.startswith("bm25") else "meaning" for name in sources}
    return " + ".join(k for k in ("words", "meaning") if k in kinds)


def render_passages(console: Console, passages: Sequence[NotePassage]) -> None:
    """Note passages best first: each one's rank and "file › heading", then its first words
    on one line. No score: BM25's depends on the folder (in a folder of one note it is 0)."""
    for number, passage in enumerate(passages, start=1):
        label = Text.assemble((f"{number:>2}  ", "dim"), (visible(passage.label()), "bold"))
        console.print(label, soft_wrap=True)
        console.print(Text("    " + visible(one_line(passage.text, 200)), "dim"), soft_wrap=True)


def render_why(console: Console, app: App, result: RecallResult | None) -> None:
    """What was recalled for the last reply as the prompt showed it: the related sessions'
    summaries, then one block per past session (its date, then its turns in conversation
    order), each recalled turn with the rankers that found it, each context turn marked."""
    if result is None:
        console.print("[dim]Nothing was recalled yet in this chat.[/dim]")
        return
    console.print(
        f"Recall for: [italic]{shown(one_line(result.query, 120))}[/italic] "
        f"({result.seconds * 1000:.0f} ms, {result.tokens:,} tokens of past turns)"
    )
    if not result.summaries and not result.passages:
        # Said so, or a new user reads "nothing matched" right after talking about it as a
        # fault: this chat's own turns are in the prompt whole, and recall searches the rest.
        console.print(
            "[dim]No past memory matched: recall searches earlier sessions; this chat's own "
            "turns are in the prompt already.[/dim]"
        )
    for item in result.summaries:
        console.print(
            f"- [bold]summary[/bold] {app.clock.fmt_range(item.start_ms, item.end_ms)} "
            f"(session {item.session_id[:8]}), {_ranks(item)}:"
        )
        print_unpadded(console, Text(visible(one_line(item.text, 200)), "dim"), indent=2)
    for passage in result.passages:
        day = f"{app.clock.at(passage.start_ms):%Y-%m-%d, %A}"
        console.print(f"[bold]{day}[/bold] [dim](session {passage.session_id[:8]})[/dim]")
        for turn, gap in zip(passage.turns, passage.gaps, strict=True):
            if gap:
                console.print("  [dim]…[/dim]")
            why = "context" if turn.context_for else _ranks(turn)
            line = Text(f"{app.clock.at(turn.start_ms):%H:%M} ")
            line.append(f"{turn.role}: ", style="bold")
            line.append(visible(one_line(turn.text, 200)), style="dim" if turn.context_for else "")
            line.append(f"  ({why})", style="dim")
            print_unpadded(console, line, indent=2)  # its wrapped lines too
    if app.index is not None and app.index.error:
        console.print(f"[red]indexing problem:[/red] {shown(app.index.error)}")


def _ranks(item: RecalledItem) -> str:
    """'score 0.0325 from bm25 #1, vector #3'."""
    ranks = ", ".join(f"{name} #{rank}" for name, rank in sorted(item.sources.items()))
    return f"score {item.score:.4f} from {ranks}"


def render_sessions(console: Console, app: App, limit: int, offset: int = 0) -> bool:
    """The newest sessions past the `offset` newest, one line each (id, time, status, turns)
    and the summary below it, whole: in a table the dates left the summary ~15 columns of
    80, which showed "Dad…". Returns whether older sessions follow. A session whose archive
    failed is stored as active until the next start finishes it: shown "archive pending"
    (`Session.shown_status`), as `sessions show`, the model and MCP clients are told."""
    sessions = app.store.list_sessions(limit + 1, offset)
    more = len(sessions) > limit
    if not sessions:
        console.print(
            f"[dim]No session {'past the newest ' + str(offset) if offset else 'yet'}.[/dim]"
        )
    for s in sessions[:limit]:
        summary = app.store.session_summary(s.session_id)
        when = app.clock.fmt_range(s.start_ms, s.end_ms) if s.end_ms else app.clock.fmt(s.start_ms)
        print_unpadded(
            console,
            Text.assemble(
                (s.session_id[:12], "bold"),
                f"  {when}  {s.shown_status}, {counted(s.conv_count, 'turn')}",
            ),
        )
        text = summary.text if summary else s.rolling_summary
        if text:  # indented as a whole, its wrapped lines too
            summary_text = Text(visible(one_line(text, 300)), style="dim")
            print_unpadded(console, Padding(summary_text, (0, 0, 0, 4), expand=False))
    return more


def render_session(console: Console, app: App, session: Session) -> None:
    """One session: its summary and every turn with its time, each on one line however
    long (a terminal wraps it; a pipe or a file keeps the words as they were typed)."""
    console.print(
        f"[bold]Session {session.session_id}[/bold] ({session.shown_status}), "
        f"started {app.clock.fmt(session.start_ms)}"
    )
    summary = app.store.session_summary(session.session_id)
    if summary or session.rolling_summary:
        console.print(
            f"[italic]{shown(summary.text if summary else session.rolling_summary)}[/italic]\n",
            soft_wrap=True,
        )
    for turn in app.store.turns(session.session_id):
        if turn.role == "tool":
            console.print(
                f"[dim]{app.clock.fmt(turn.ts_ms, seconds=True)} tool "
                f"{shown(turn.meta.get('name', ''))}: {shown(one_line(turn.text))}[/dim]",
                soft_wrap=True,
            )
            continue
        console.print(
            f"[dim]{app.clock.fmt(turn.ts_ms, seconds=True)} {turn.text_id[:12]}[/dim] "
            f"[bold]{turn.role}[/bold]: {shown(turn.text)}",
            soft_wrap=True,
        )
