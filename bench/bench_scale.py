"""A lifetime of conversations: import throughput, and every data command at 100k and 1M turns.

Usage:
    .venv/bin/python bench/bench_scale.py [--rows import,search,owner,ask,mcp,recall,scale]
        [--seelen PATH] [--import-turns 20014] [--data-dir DIR] [--sizes 100000,1000000]
        [--cache /tmp/seelen-scale] [--owner-quiet 60] [--llm /tmp/llmvenv/bin/llm]

Import row: a ChatGPT export (bench_import.py's generator: MemoryBank's real English
exchanges, ten a conversation, 20,014 turns in 1,001 conversations) goes through `seelen
import FILE` in a fresh data dir, as a user runs it; timed until every text has its vector,
with the command's CPU seconds and peak RSS (wait4). On 2 shared cores the wall time moves
with the load; texts per CPU-second x 2 is what the same run gives two idle cores.

Scale rows: a profile of N turns (sessions of 20, one summary each, five years of days) is
written through the import writer, so SQLite and its FTS index hold every row. Embedding a
million texts would take hours, so a pool of real MiniLM vectors (MemoryBank texts) is
embedded once and each row borrows one, as bench_recall.py does; LanceDB holds every row
with its ANN index built as the indexer builds it. Built once per size and kept under
--cache (1M: under 5 minutes here, at load 8), then each command runs as a process of its own, timed
with wait4: wall, CPU, peak RSS. `memory reindex` embeds for real: it is timed on the
import profile (21,015 texts) and on each scale profile for --reindex-seconds, then
stopped; its rate gives the whole. `ask` runs against tests/model_server.py's server,
in-process (SEELEN_OWNER=false) and through a warm owner (SEELEN_OWNER=true).

The issue's other rows (scale_rows.py), on the import profile: `memory search --json --batch`
of bench_recall.py's 200 speed questions (each one's `ms`), the owner's RSS after one `ask`
and after --owner-quiet seconds, `seelen ask` against simonw/llm (bench_ask.py), `seelen mcp`
from its start to tools/list (bench_mcp_server.py); and bench_recall.py --speed at 100k turns.
The same batch search runs on each scale profile. `--rows` picks rows: import, reindex (the
import profile embedded again), search, owner, ask, mcp, recall, scale (the 100k / 1M
command rows). `--seelen PATH` measures another install (a worktree of an older commit with
its own venv): every row goes through that command, the recall row through that tree's own
bench_recall.py and Python; what it cannot do prints "n/a" and why. Time a row takes at load
3.5-7: import 4 min (1.5 on a quiet machine), reindex as long, search 15-20 s, owner
--owner-quiet + 5 s, ask ~30 s, mcp ~10 s, recall 2-4 min, scale ~3 min at 100k (plus the
build once: ~2 min), ~20 min at 1M (plus ~25 min once).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import bench_import
import scale_rows
from scale_rows import QUESTION, environment, load

SEELEN = str(Path(sys.executable).with_name("seelen"))
TIME = "/usr/bin/time"  # GNU time: the command's own peak RSS
DAY_MS = 86_400_000
TURNS_PER_SESSION = 20
POOL = 2000  # distinct real vectors the scale rows borrow


def timed(cmd: list[str], env: dict[str, str], *, limit: float | None = None) -> dict[str, float]:
    """Wall, CPU and peak RSS (MiB) of one command, through GNU time (wait4 here would count
    the pages this process shares with a forked child); stopped after `limit` seconds."""
    report = tempfile.NamedTemporaryFile("r", suffix=".time")  # noqa: SIM115
    start = time.perf_counter()
    proc = subprocess.Popen(
        [TIME, "-q", "-o", report.name, "-f", "%e %U %S %M", *cmd],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        proc.wait(limit)
    except subprocess.TimeoutExpired:  # stop the command, not GNU time: it still reports
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for child in children:
            os.kill(int(child), signal.SIGTERM)
        proc.wait()
    wall = time.perf_counter() - start
    stopped = limit is not None and wall >= limit
    if proc.returncode != 0 and not stopped:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise RuntimeError(f"{' '.join(cmd[1:4])} failed: {err[-800:]}")
    line = (report.read().strip().splitlines() or ["0 0 0 0"])[-1].split()
    report.close()
    user, system, rss = (float(x) for x in line[1:4]) if len(line) >= 4 else (0.0, 0.0, 0.0)
    return {"wall": wall, "cpu": user + system, "rss": rss / 1024, "stopped": float(stopped)}


def counts(data_dir: Path) -> tuple[int, int]:
    """(texts that belong in the index, texts marked indexed) of the default profile."""
    import sqlite3

    db = sqlite3.connect(data_dir / "default" / "chat_sessions.db")
    with db:
        rows = [
            db.execute(f"SELECT count(*), coalesce(sum(indexed), 0) FROM {t}").fetchone()
            for t in ("conversation", "summary")
        ]
    db.close()
    return sum(r[0] for r in rows), sum(r[1] for r in rows)


# -- the import row ------------------------------------------------------------------------


def import_row(turns: int, workdir: Path, *, shown: bool = True) -> Path:
    """Import a ChatGPT export of `turns` turns into a fresh data dir under `workdir` (the
    row printed when `shown`); returns the data dir (the quick rows and reindex use it)."""
    bench_import.EXCHANGES_PER_CONVERSATION = 10
    pairs = bench_import.exchanges(bench_import.DATA, long=False)
    export = workdir / "conversations.json"
    export.write_text(json.dumps(bench_import.chatgpt_export(turns, pairs)), "utf-8")
    data_dir = workdir / "import"
    before = load()
    # In this process (SEELEN_OWNER=false): the whole import, embedding included, is the
    # command's own, so wait4 sees its CPU and peak; through an owner the same work runs
    # there, and the command returns once keyword search finds everything.
    result = timed([SEELEN, "import", str(export)], environment(data_dir, SEELEN_OWNER="false"))
    texts, indexed = counts(data_dir)
    assert texts == indexed, f"{texts - indexed} texts without a vector"
    if shown:
        print(
            f"| import until every text has its vector ({texts:,} texts) | {result['wall']:.1f} "
            f"s ({texts / result['wall']:.0f} texts/s) | CPU {result['cpu']:.1f} s: "
            f"{2 * texts / result['cpu']:.0f} texts/s on two idle cores | load {before} |"
        )
        print(f"| import peak RSS | {result['rss']:.0f} MiB | | load {load()} |", flush=True)
    return data_dir


# -- the scale profiles --------------------------------------------------------------------


def conversations(size: int, pairs: list[tuple[str, str]]) -> Iterator[object]:
    """`size` turns as ChatGPT conversations of 20 turns, one a day or so over five years."""
    from seelen.memory.imports.conversation import Conversation, Message

    sessions = size // TURNS_PER_SESSION
    now = int(time.time() * 1000)
    step = 5 * 365 * DAY_MS // max(1, sessions)
    for s in range(sessions):
        start = now - 5 * 365 * DAY_MS + s * step
        messages = []
        for k in range(TURNS_PER_SESSION // 2):
            question, answer = pairs[(s * 7 + k) % len(pairs)]
            ts = start + k * 120_000
            messages.append(Message(f"{s}-{k}-q", "user", question, ts))
            messages.append(Message(f"{s}-{k}-a", "assistant", answer, ts + 60_000))
        yield Conversation("chatgpt", f"scale-{s:07d}", f"Chat {s}", tuple(messages), start)


def build(size: int, cache: Path) -> Path:
    """The data dir of a profile of `size` turns, built once and kept under `cache`."""
    data_dir = cache / str(size)
    if (data_dir / "built").exists():
        return data_dir
    shutil.rmtree(data_dir, ignore_errors=True)
    profile = data_dir / "default"
    profile.mkdir(parents=True, mode=0o700)
    started, cpu0 = time.perf_counter(), bench_import.cpu()
    pairs = bench_import.exchanges(bench_import.DATA, long=False)
    from seelen.memory.clock import Clock
    from seelen.memory.imports.writer import write_history
    from seelen.store import Store

    store = Store(profile / "chat_sessions.db")
    write_history(store, conversations(size, pairs), Clock("UTC"))  # type: ignore[arg-type]
    store.close()
    written = time.perf_counter() - started
    borrow_vectors(profile, pool_vectors(pairs))
    (data_dir / "built").write_text(f"{size}\n")
    print(
        f"built {size:,} turns in {time.perf_counter() - started:.0f} s (SQLite and FTS "
        f"{written:.0f} s), {bench_import.cpu() - cpu0:.0f} s CPU, load {load()}",
        flush=True,
    )
    return data_dir


def pool_vectors(pairs: list[tuple[str, str]]) -> object:
    """POOL real MiniLM vectors of distinct MemoryBank texts."""
    from seelen.models.embed import LocalEmbedder

    texts = list(dict.fromkeys(t for pair in pairs for t in pair))[:POOL]
    return LocalEmbedder().embed(texts)


def borrow_vectors(profile: Path, pool: object) -> None:
    """Every text of the profile into LanceDB with a pooled vector, in large appends, then
    the tables' upkeep once (indices built as the indexer builds them); all marked indexed."""
    import sqlite3

    import numpy as np

    from seelen.models.embed import LOCAL_DIM, LOCAL_MODEL
    from seelen.store.records import INDEXABLE_TURN
    from seelen.vectors import VectorIndex, VectorRow
    from seelen.vectors import tables as tb

    vectors = np.asarray(pool)
    index = VectorIndex(profile / "lancedb", f"local:{LOCAL_MODEL}", LOCAL_DIM)
    index.reset()
    db = sqlite3.connect(profile / "chat_sessions.db")
    queries = {
        "turns": f"SELECT text_id, session_id, timestamp FROM conversation WHERE {INDEXABLE_TURN}",
        "summaries": "SELECT text_id, session_id, start_timestamp FROM summary",
    }
    lance = tb.connect(profile / "lancedb")
    for kind, sql in queries.items():
        table = lance.create_table(kind, schema=tb.schema(LOCAL_DIM))
        cursor = db.execute(sql)
        while rows := cursor.fetchmany(50_000):
            made = [VectorRow(t, s, ts, vectors[hash(t) % len(vectors)]) for t, s, ts in rows]
            table.add(tb.to_arrow(made, LOCAL_DIM))
    VectorIndex(profile / "lancedb", f"local:{LOCAL_MODEL}", LOCAL_DIM).maintain()
    with db:
        db.execute(f"UPDATE conversation SET indexed = 1 WHERE {INDEXABLE_TURN}")
        db.execute("UPDATE summary SET indexed = 1")
    db.close()


# -- the commands at scale -----------------------------------------------------------------


def row(label: str, size: int, result: dict[str, float], note: str = "") -> None:
    print(
        f"| {label} at {size:,} turns | {result['wall']:.2f} s | CPU {result['cpu']:.2f} s | "
        f"{result['rss']:.0f} MiB | load {load()} |{' ' + note if note else ''}",
        flush=True,
    )


def command_rows(size: int, data_dir: Path, server_url: str, reindex_seconds: float) -> None:
    """Each data command once on the profile of `size` turns, as its own process."""
    env = environment(data_dir)
    ask_env = scale_rows.ask_environment(data_dir, server_url)
    out = data_dir / "export.json"
    # First, while no owner runs: after the asks the warm owner embeds and adds their turns
    # to the graph (seconds at a million rows), and the searches would share the cores with
    # it (1M: median / p95 97 / 149 ms so, 32 / 49 alone, load 1.1-1.4).
    scale_rows.search_row(SEELEN, data_dir, size)
    commands = [
        (
            "`memory search` (one question, JSON)",
            [SEELEN, "memory", "search", "--json", QUESTION],
            env,
        ),
        ("`db stats`", [SEELEN, "db", "stats"], env),
        ("`db check`", [SEELEN, "db", "check"], env),
        ("`db backup`", [SEELEN, "db", "backup"], env),
        ("`export` (JSON, to a file)", [SEELEN, "export", "-o", str(out)], env),
        (
            "`ask`, SEELEN_OWNER=false",
            [SEELEN, "ask", QUESTION],
            {**ask_env, "SEELEN_OWNER": "false"},
        ),
        ("`ask`, first: starts the owner", [SEELEN, "ask", QUESTION], ask_env),
        ("`ask`, warm owner", [SEELEN, "ask", QUESTION], ask_env),
    ]
    for label, cmd, command_env in commands:
        try:
            row(label, size, timed(cmd, command_env))
        except RuntimeError as exc:  # another install that cannot read this profile
            scale_rows.na(f"{label} at {size:,} turns", str(exc).splitlines()[-1][:200])
    owner_rss(size, ask_env)
    subprocess.run([SEELEN, "server", "stop"], env=ask_env, capture_output=True, check=False)
    out.unlink(missing_ok=True)
    shutil.rmtree(data_dir / "default" / "backups", ignore_errors=True)
    reindex_row(size, data_dir, env, reindex_seconds)


def owner_rss(size: int, env: dict[str, str]) -> None:
    """The warm owner's RSS after the asks (its peak, and what it holds now), found in /proc
    whatever the install's version."""
    pids = scale_rows.owner_pids(Path(env["SEELEN_DATA_DIR"]))
    if not pids:
        return
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pids[0]}/status").read_text().splitlines()
    )
    rss, peak = (int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    label = f"the owner after the asks, at {size:,} turns"
    print(f"| {label} | | | {rss:.0f} MiB now, {peak:.0f} MiB peak | load {load()} |")


def reindex_row(size: int, data_dir: Path, env: dict[str, str], seconds: float) -> None:
    """`memory reindex` for `seconds` (or to the end): texts embedded per second, RSS."""
    from seelen.models.embed import LOCAL_DIM, LOCAL_MODEL
    from seelen.vectors import VectorIndex
    from seelen.vectors.folders import staging_path

    texts, _ = counts(data_dir)
    result = timed([SEELEN, "memory", "reindex"], env, limit=seconds)
    lancedb = data_dir / "default" / "lancedb"
    if result["stopped"]:
        staged = VectorIndex(
            staging_path(lancedb), f"local:{LOCAL_MODEL}", LOCAL_DIM, read_only=True
        )
        done = staged.count("turns") + staged.count("summaries")
        shutil.rmtree(staging_path(lancedb), ignore_errors=True)
        whole = texts / done * result["wall"] if done else float("nan")
        note = (
            f"stopped after {done:,} of {texts:,} texts: {done / result['wall']:.0f} texts/s, "
            f"the whole ~{whole / 60:.0f} min"
        )
    else:
        note = f"{texts:,} texts, {texts / result['wall']:.0f} texts/s"
    row("`memory reindex`", size, result, note)


ROWS = ("import", "reindex", "search", "owner", "ask", "mcp", "recall", "scale")


def main() -> None:
    global SEELEN
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"of {', '.join(ROWS)}")
    parser.add_argument("--seelen", default=SEELEN, help="the `seelen` command measured")
    parser.add_argument("--import-turns", type=int, default=20014)
    parser.add_argument("--data-dir", type=Path, help="a data dir this install imported")
    parser.add_argument("--skip-import", action="store_true", help="the same as no import row")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/seelen-scale"))
    parser.add_argument("--reindex-seconds", type=float, default=60.0)
    parser.add_argument("--owner-quiet", type=float, default=60.0, help="seconds")
    parser.add_argument("--llm", default="/tmp/llmvenv/bin/llm")
    parser.add_argument("--ask-runs", type=int, default=6)
    parser.add_argument("--mcp-starts", type=int, default=5)
    args = parser.parse_args()
    rows = [r for r in args.rows.split(",") if r and not (r == "import" and args.skip_import)]
    if unknown := set(rows) - set(ROWS):
        raise SystemExit(f"--rows: unknown {sorted(unknown)}, not of {ROWS}")
    SEELEN = str(Path(args.seelen).resolve())
    from model_server import ModelServer, Reply

    print(f"`seelen`: {SEELEN}; load before: {load()} (2 cores)\n")
    print("| measure | wall | CPU | peak RSS | load |\n| --- | --- | --- | --- | --- |")
    with (
        tempfile.TemporaryDirectory() as tmp,
        ModelServer(responder=lambda body: Reply(text="ok")) as server,
    ):
        quick_rows(rows, args, Path(tmp), server.url)
        if "recall" in rows:
            scale_rows.recall_row(SEELEN, 100_000)
        if "scale" in rows:
            for size in (int(s) for s in args.sizes.split(",") if s):
                command_rows(size, build(size, args.cache), server.url, args.reindex_seconds)


def quick_rows(rows: list[str], args: argparse.Namespace, tmp: Path, url: str) -> None:
    """The rows measured on a profile of `--import-turns` imported turns (imported here by
    the install measured, unless `--data-dir` names one it imported)."""
    if not {"import", "reindex", "search", "owner", "ask", "mcp"} & set(rows):
        return
    data_dir = args.data_dir
    if "import" in rows or data_dir is None:
        data_dir = import_row(args.import_turns, tmp, shown="import" in rows)
    if "reindex" in rows:
        reindex_row(args.import_turns, data_dir, environment(data_dir), 10_000)
    turns = args.import_turns
    if "search" in rows:
        scale_rows.search_row(SEELEN, data_dir, turns)
    if "owner" in rows:
        scale_rows.owner_row(SEELEN, data_dir, url, args.owner_quiet)
    if "ask" in rows:
        scale_rows.ask_row(SEELEN, data_dir, url, args.llm, args.ask_runs)
    if "mcp" in rows:
        scale_rows.mcp_row(SEELEN, data_dir, url, args.mcp_starts)
    scale_rows.stop_owner(SEELEN, environment(data_dir))


if __name__ == "__main__":
    main()
