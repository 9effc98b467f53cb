"""Knowledge folders at scale: a generated folder of 10,000 notes (~50 MB).

Prints: first index time, a warm catch-up (nothing changed), search latency (p50/p95),
update latency after an edit, a new file and a deletion (watcher running), and the memory
of a process that only keeps the folder watched. Run by hand on a quiet machine:

    .venv/bin/python bench/bench_knowledge.py [--files 10000] [--dir /tmp/kb]

Goals (issue 13): search p95 < 200 ms, update < 1 s, watcher < 50 MB.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from seelen.knowledge import Knowledge

SYLLABLES = "ka lo mi ne ru sa to vi da fe gu ha jo ki lu ma no pe ri se ta vo we ya zu".split()
ZH_CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过"
    "子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体"
    "制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内"
    "数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提"
)
# Names as in life: a common surname, then one or two characters chosen for their meaning.
ZH_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
ZH_GIVEN = "伟芳娜秀敏静丽强磊军洋艳勇杰娟涛明超霞平刚桂英华玉兰萍红鹏飞雪梅琳晨宇浩然欣怡雨轩"


def word(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts))


def build_world(rng: random.Random) -> dict[str, list[str]]:
    """A vocabulary with a Zipf-like spread, 500 characters, 200 places, 300 Chinese names."""
    vocab = list(dict.fromkeys(word(rng, rng.randint(1, 4)) for _ in range(30_000)))
    people = [f"{word(rng, 2).title()} {word(rng, 3).title()}" for _ in range(500)]
    places = [f"{word(rng, 2).title()}{rng.choice(['port', 'ford', 'holm'])}" for _ in range(200)]
    zh_people = list(
        dict.fromkeys(
            rng.choice(ZH_SURNAMES) + "".join(rng.choices(ZH_GIVEN, k=rng.randint(1, 2)))
            for _ in range(300)
        )
    )
    return {"vocab": vocab, "people": people, "places": places, "zh_people": zh_people}


def write_folder(root: Path, files: int, rng: random.Random) -> dict[str, list[str]]:
    """`files` notes in 100 subfolders; one in ten is Chinese. Returns the world."""
    world = build_world(rng)
    vocab = world["vocab"]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    cum = list(_accumulate(weights))
    for n in range(files):
        folder = root / f"part-{n % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        if n % 10 == 9:
            text = _zh_note(n, world, rng)
            (folder / f"zh-{n:05d}.txt").write_text(text, encoding="utf-8")
            continue
        people = rng.sample(world["people"], 3)
        place = rng.choice(world["places"])
        lines = [f"# {people[0]} at {place}\n"]
        for section in range(4):
            lines.append(f"## Part {section + 1}: {rng.choice(people)}\n")
            for _ in range(3):
                words = rng.choices(vocab, cum_weights=cum, k=60)
                words.insert(rng.randrange(60), rng.choice(people))
                words.insert(rng.randrange(60), place)
                lines.append(" ".join(words).capitalize() + ".\n")
        (folder / f"note-{n:05d}.md").write_text("\n".join(lines), encoding="utf-8")
    world["zh_people"] = list(dict.fromkeys(world["zh_used"]))  # ask only about those in it
    return world


def _accumulate(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


_ZH_CUM = _accumulate([1 / (rank + 1) for rank in range(len(ZH_CHARS))])


def _zh_note(n: int, world: dict[str, list[str]], rng: random.Random) -> str:
    person = rng.choice(world["zh_people"])
    world.setdefault("zh_used", []).append(person)
    body = []
    for _ in range(12):
        chars = rng.choices(ZH_CHARS, cum_weights=_ZH_CUM, k=130)
        chars.insert(rng.randrange(130), person)
        body.append("".join(chars) + "。")
    return f"第{n}篇 {person}\n\n" + "\n\n".join(body) + "\n"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def queries(
    world: dict[str, list[str]], rng: random.Random, count: int
) -> list[tuple[str, str, str]]:
    """(kind, question, the name the first passage should mention)."""
    out = []
    for i in range(count):
        person, place = rng.choice(world["people"]), rng.choice(world["places"])
        kind = i % 4
        if kind == 0:
            out.append(("name+place", f"What did {person} do at {place}?", person))
        elif kind == 1:
            out.append(("name", f"Tell me about {person}", person))
        elif kind == 2:  # two letters of the last name swapped
            first, last = person.split()
            typo = f"{first} {last[:-2] + last[-1]}{last[-2]}"
            out.append(("typo", f"where is {typo} now", person))
        else:
            zh = rng.choice(world["zh_people"])
            out.append(("chinese", f"{zh}后来怎么样了？", zh))
    return out


def bench_search(k: Knowledge, world: dict[str, list[str]], rng: random.Random) -> None:
    qs = queries(world, rng, 200)
    for _, q, _ in qs[:5]:
        k.search(q, 1200)  # warm the page cache
    times, empty, right = [], 0, {}
    for kind, q, name in qs:
        start = time.perf_counter()
        found = k.search(q, 1200)
        times.append(time.perf_counter() - start)
        empty += not found
        hit = bool(found) and name in found[0].text
        right[kind] = right.get(kind, 0) + hit
    print(
        f"search ({len(qs)} questions, budget 1200 tokens): p50 "
        f"{statistics.median(times) * 1000:.1f} ms, p95 {percentile(times, 0.95) * 1000:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms; {empty} answered nothing"
    )
    share = ", ".join(f"{kind} {n / (len(qs) / 4):.0%}" for kind, n in right.items())
    print(f"first passage mentions the asked name: {share}")


def wait_for(k: Knowledge, query: str, present: bool, limit: float = 10.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        found = any(query in p.text for p in k.search(query, 400))
        if found == present:
            return time.perf_counter() - start
        time.sleep(0.005)
    return float("inf")


def bench_updates(k: Knowledge, root: Path, rng: random.Random) -> None:
    edits, news, deletes = [], [], []
    for i in range(15):
        target = root / f"part-{i:02d}" / f"note-{i:05d}.md"
        token = f"zyxwv{i}q"
        with open(target, "a", encoding="utf-8") as f:
            f.write(f"\nA new line about {token}.\n")
        edits.append(wait_for(k, token, True))
        fresh = root / f"part-{i:02d}" / f"fresh-{i}.md"
        fresh.write_text(f"# Fresh\n\nThe {token}x arrived.\n")
        news.append(wait_for(k, f"{token}x", True))
        fresh.unlink()
        deletes.append(wait_for(k, f"{token}x", False))
    for name, values in (("edit", edits), ("new file", news), ("deletion", deletes)):
        print(
            f"update latency, {name} ({len(values)}x): p50 {statistics.median(values) * 1000:.0f}"
            f" ms, max {max(values) * 1000:.0f} ms"
        )


WATCH_ONLY = """
import sys, time
from pathlib import Path
from seelen.knowledge import Knowledge
k = Knowledge([sys.argv[1]], Path(sys.argv[2]))
k.start()
k.wait_ready()
time.sleep(1)
k.search("Tell me about the harbour", 1200)
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print(status["VmRSS"].strip(), status["VmHWM"].strip())
k.close()
"""

BASELINE = """
import sqlite3, watchdog.observers, seelen.knowledge
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print(status["VmRSS"].strip())
"""


def bench_memory(root: Path, state: Path) -> None:
    base = subprocess.run([sys.executable, "-c", BASELINE], capture_output=True, text=True)
    out = subprocess.run(
        [sys.executable, "-c", WATCH_ONLY, str(root), str(state)], capture_output=True, text=True
    )
    print(f"memory of a process that only watches (warm index): RSS, peak = {out.stdout.strip()}")
    print(f"  the same process before opening the folder (imports only): {base.stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--dir", default="")
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="seelen-kb-"))
    root, state = work / "notes", work / "state"
    shutil.rmtree(work, ignore_errors=True)
    rng = random.Random(13)
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    start = time.perf_counter()
    world = write_folder(root, args.files, rng)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(
        f"generated {args.files} notes, {size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s"
    )

    k = Knowledge([str(root)], state)
    start = time.perf_counter()
    progress = k.catch_up()
    took = time.perf_counter() - start
    db = sum(p.stat().st_size for p in state.iterdir())
    print(f"first index: {took:.1f} s for {progress.indexed} notes; index {db / 1e6:.0f} MB")
    k.close()

    k = Knowledge([str(root)], state)
    start = time.perf_counter()
    progress = k.catch_up()
    print(
        f"warm catch-up (nothing changed): {(time.perf_counter() - start) * 1000:.0f} ms, "
        f"{progress.checked} checked, {progress.indexed} re-read"
    )
    k.close()

    k = Knowledge([str(root)], state)
    k.start()
    k.wait_ready()
    bench_search(k, world, rng)
    bench_updates(k, root, rng)
    k.close()
    bench_memory(root, state)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
