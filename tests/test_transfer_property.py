"""Property: any text (control characters, NUL, CJK, emoji, RTL…) survives
store → recall → export → import unchanged, and stays findable by an exact word."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seelen.memory.clock import Clock
from seelen.memory.persona import PersonaFiles
from seelen.memory.recall import Recall
from seelen.memory.transfer import import_export, render_export
from seelen.store import Store

# Plain random text, plus runs drawn from the scripts and characters that break things.
TRICKY = st.sampled_from(
    ["\x00", "\x1b[31m", "\r\n", "\t", "\u200f", "\u202e", "שלום", "مرحبا", "我的猫叫小花",
     "🐱‍👤", "e\u0301", "\ufeff", '"', "\\", "<memory-quote>", "NEAR(", "*", "'"]
)  # fmt: skip
TEXT = st.lists(st.one_of(st.text(max_size=20), TRICKY), max_size=6).map("".join)
MARKER = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=6, max_size=10).map(lambda s: "q" + s)
META = st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=10), st.integers()))


def _letters(n: int) -> str:
    """A number written in letters, so it stays part of one FTS word."""
    return "".join("bcdfghjklm"[int(d)] for d in str(n))


def open_profile(directory: Path) -> tuple[Store, PersonaFiles, Clock]:
    files = PersonaFiles(directory)
    files.ensure()
    return Store(directory / "chat_sessions.db"), files, Clock("Europe/Berlin")


def test_any_text_survives_the_round_trip(tmp_path: Path) -> None:
    """One pair of profiles for all examples: each adds a session, and every export of the
    growing memory must import into the second profile and export identically again."""
    store, files, clock = open_profile(tmp_path / "a")
    store2, files2, _ = open_profile(tmp_path / "b")
    serial = itertools.count()

    @settings(
        max_examples=30,
        deadline=None,  # the first example pays for SQLite's start-up; no flaky timing
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        turns=st.lists(
            st.tuples(TEXT, MARKER, TEXT, st.sampled_from(["user", "assistant"]), META),
            min_size=1,
            max_size=4,
        ),
        summary=TEXT,
        # 1970 … 2100 in ms, and often one shared instant: ties must keep their order too.
        stamp=st.one_of(st.just(1_700_000_000_123), st.integers(0, 4_102_444_800_000)),
    )
    def check(turns: list[tuple[str, str, str, str, dict]], summary: str, stamp: int) -> None:
        session = store.create_session(start_ms=stamp)
        # Markers are made unique across examples (hypothesis repeats its simplest ones), so a
        # marker matches one turn only and no other turn's BM25 score can push it out.
        turns = [(b, f"{m}x{_letters(next(serial))}", a, r, meta) for b, m, a, r, meta in turns]
        texts = [f"{before} {marker} {after}" for before, marker, after, _, _ in turns]
        rows = [(role, text, meta, stamp + i) for i, (text, (*_, role, meta)) in enumerate(
            zip(texts, turns, strict=True))]  # fmt: skip
        stored = store.add_turns(session.session_id, rows)
        if summary:
            store.add_summary(session.session_id, summary, stamp, stamp + len(rows))
        store.mark_archived(session.session_id)

        recall = Recall(store, None, None, conv_num=50)
        for turn, (_, marker, *_) in zip(stored, turns, strict=True):
            found = recall.search(marker, None, "bm25").turns
            assert turn.text_id in [item.text_id for item in found], (marker, turn.text)
            assert store.get_turns([turn.text_id])[turn.text_id].text == turn.text

        exported = render_export(store, files, clock, "json")
        import_export(store2, files2, clock, exported)
        again = store2.turns(session.session_id)
        assert [(t.text_id, t.ts_ms, t.role, t.text, t.meta) for t in again] == [
            (t.text_id, t.ts_ms, t.role, t.text, t.meta) for t in stored
        ]
        kept = store2.session_summary(session.session_id)
        assert (kept.text if kept else "") == summary
        assert render_export(store2, files2, clock, "json") == exported
        session_data = next(
            s for s in json.loads(exported)["sessions"] if s["session_id"] == session.session_id
        )
        assert [t["text"] for t in session_data["turns"]] == texts

    check()
