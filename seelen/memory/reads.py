"""One recall's reads of stored turns: each turn, and each turn's spoken neighbours, read once.

The stages of a recall read the same turns again and again: the answers' lift the ten best,
the ranking the sixty best, the second round the thirty best and the turns it found, the
passages the neighbours of every ranked turn. Read through one `TurnReads`, a turn already
read is not read again (100k turns: about 200 rows a question were read, 1.5 ms of CPU).
Made anew for each recall, so it never serves a turn changed before the recall began.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seelen.store import Store, Turn

Around = tuple[str | None, str | None]  # (previous, next) spoken turn id in its session


class TurnReads:
    """`Store.get_turns` and `Store.spoken_around` for one recall, each id read at most once
    (an id found missing is remembered as missing). Not shared between threads."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._turns: dict[str, Turn | None] = {}
        self._around: dict[str, Around | None] = {}

    def get_turns(self, text_ids: Iterable[str]) -> dict[str, Turn]:
        """Turns by text id, in the order asked (missing ids are simply absent)."""
        ids = list(dict.fromkeys(text_ids))
        if missing := [i for i in ids if i not in self._turns]:
            found = self.store.get_turns(missing)
            self._turns.update((i, found.get(i)) for i in missing)
        return {i: t for i in ids if (t := self._turns[i]) is not None}

    def spoken_around(self, text_ids: Iterable[str]) -> dict[str, Around]:
        """(previous, next) spoken turn id of each given turn (`Store.spoken_around`), in the
        order asked; an id that is no stored turn is absent."""
        ids = list(dict.fromkeys(text_ids))
        if missing := [i for i in ids if i not in self._around]:
            found = self.store.spoken_around(missing)
            self._around.update((i, found.get(i)) for i in missing)
        return {i: a for i in ids if (a := self._around[i]) is not None}
