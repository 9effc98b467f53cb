"""What a model's own second, differently worded memory search adds to chat's recall.

    .venv/bin/python bench/bench_second_search.py [--embedder local|multilingual]

A model that can call tools may call `memory_search` (in Seelen's chat) or `search_memory`
(over `seelen mcp`) after the prompt's own recall: a second search in its own words. No
capable tool-calling model runs offline here, so the model's rewording is taken from the
synthetic set (bench/recall_data.py), which asks each planted and each changed fact twice in
different words (one question shares a word with the fact, the other none). For each question
as the user's, the other stands for the model's rewording:
- one search: the answering turn is among the turns chat puts in the prompt (recall with
  chat's defaults: RECALL_CONV_NUM and RECALL_TOKENS);
- two searches: ... or among the top 5 of the second search (the tool's default `limit`).
A mechanical rewording (the question's content words only) is shown as a floor. This is an
upper bound of sorts: a model does not know the stored words, and the set's second wording
was written by someone who did.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recall import BenchClock, load_avg, open_memory
from recall_data import BenchQuery, build

from seelen.app import recall_tokens
from seelen.config import load_settings
from seelen.memory.indexer import Indexer
from seelen.memory.recall import Recall
from seelen.models.embed import make_embedder

TOOL_LIMIT = 5  # memory_search's default `limit`
STOP = set(
    "a an the is are am was were do does did i me my we our you your to of in on at for "
    "what which who where when how why with this that these those it its be been have has "
    "had can could should would will from by about up out into as or and but not no so "
    "again now these days right moment".split()
)


def pairs(queries: list[BenchQuery]) -> list[tuple[BenchQuery, BenchQuery]]:
    """Questions about the same answering turn, two by two (both directions)."""
    by_answer: dict[tuple[str, int], list[BenchQuery]] = defaultdict(list)
    for q in queries:
        if q.kind in ("planted", "paraphrase-hard", "changed"):
            by_answer[(q.session_key, q.turn_index)].append(q)
    out = []
    for group in by_answer.values():
        if len(group) == 2:
            out += [(group[0], group[1]), (group[1], group[0])]
    return out


def content_words(question: str) -> str:
    words = re.findall(r"[\w']+", question.lower())
    return " ".join(w for w in words if w not in STOP) or question


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="local", choices=("local", "multilingual"))
    args = parser.parse_args()
    settings = load_settings({"SEELEN_PROFILE": "bench"})
    data = build()
    embedder = make_embedder(args.embedder, "", "", "")
    with tempfile.TemporaryDirectory(prefix="seelen-bench-") as tmp:
        memory = open_memory(Path(tmp), data.sessions, embedder.dim, embedder.model_id)
        Indexer(memory.store, memory.index, embedder).index_all()
        recall = Recall(
            memory.store,
            memory.index,
            embedder,
            session_num=settings.recall_session_num,
            conv_num=settings.recall_conv_num,
            token_budget=recall_tokens(settings),
            clock=BenchClock(memory.store.get_session(memory.current).start_ms),
        )
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for asked, reworded in pairs(data.queries):
            answer = memory.turn_ids[(asked.session_key, asked.turn_index)]
            shown = {t.text_id for t in recall.search(asked.question, memory.current).turns}
            second = recall.search(reworded.question, memory.current, conv_num=TOOL_LIMIT)
            naive = recall.search(
                content_words(asked.question), memory.current, conv_num=TOOL_LIMIT
            )
            row = tally[f"{asked.kind} → {reworded.kind}"]
            row[0] += 1
            row[1] += answer in shown
            row[2] += answer in shown or answer in {t.text_id for t in second.turns}
            row[3] += answer in shown or answer in {t.text_id for t in naive.turns}
        memory.store.close()
    print(f"{'the user asks → the model rewords':<36}{'n':>4}{'one search':>12}", end="")
    print(f"{'+ reworded':>12}{'+ words only':>14}")
    total = [0, 0, 0, 0]
    for name, (n, one, two, words) in sorted(tally.items()):
        total = [a + b for a, b in zip(total, (n, one, two, words), strict=True)]
        print(f"{name:<36}{n:>4}{one / n:>12.2f}{two / n:>12.2f}{words / n:>14.2f}")
    n, one, two, words = total
    print(f"{'all':<36}{n:>4}{one / n:>12.2f}{two / n:>12.2f}{words / n:>14.2f}")
    print(f"{args.embedder}, {load_avg()}")


if __name__ == "__main__":
    main()
