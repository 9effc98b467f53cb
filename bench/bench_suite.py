"""The test suite's CPU: the whole run's, and each test file's, owners started in the background
included.

    .venv/bin/python bench/bench_suite.py [--top 30] [pytest arguments...]

`time` and pytest's own clock miss the warm owners: a client starts one in its own session
and exits, so the owner is no child of anything that waits for it, and its CPU is counted
nowhere. Here this process is a child subreaper (prctl(2)): every orphaned descendant is
handed to it and reaped by it, so RUSAGE_CHILDREN holds the whole tree's CPU. As a pytest
plugin in each worker (`-p bench_suite`), it adds each test's CPU in its worker (its own,
threads included) and that of the processes the test started and reaped, summed per file.
Note the load (printed) beside every number: the machine's other jobs slow even CPU time.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
OUT_ENV = "BENCH_SUITE_OUT"


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Each test's CPU: this worker's own, and its reaped children's."""
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    try:
        return (yield)
    finally:
        line = {
            "file": item.nodeid.split("::")[0],
            "own": _cpu(resource.RUSAGE_SELF) - own,
            "children": _cpu(resource.RUSAGE_CHILDREN) - children,
        }
        if OUT_ENV in os.environ:
            with open(os.environ[OUT_ENV], "a") as out:
                out.write(json.dumps(line) + "\n")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    args = sys.argv[1:]
    top = 30
    if args[:1] == ["--top"]:
        top, args = int(args[1]), args[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "tests.jsonl"
        env = {
            **os.environ,
            OUT_ENV: str(out),
            "PYTHONPATH": os.pathsep.join([str(root / "bench"), os.environ.get("PYTHONPATH", "")]),
        }
        load, start = _load(), time.monotonic()
        pytest_run = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "bench_suite", "-p", "no:cacheprovider", *args],
            cwd=root,
            env=env,
        )
        code = None
        while True:  # reap pytest, then every orphan (owners) until none is left
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            if pid == pytest_run.pid:
                code, wall = os.waitstatus_to_exitcode(status), time.monotonic() - start
        rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    total = _cpu(resource.RUSAGE_CHILDREN)
    print(f"pytest exit {code}, wall {wall:.1f} s, CPU {total:.1f} s (user+sys, every process)")
    print(f"load before {load}, after {_load()}")
    own: collections.Counter[str] = collections.Counter()
    children: collections.Counter[str] = collections.Counter()
    for row in rows:
        own[row["file"]] += row["own"]
        children[row["file"]] += row["children"]
    print(f"in tests: {sum(own.values()):.1f} s in workers, {sum(children.values()):.1f} s reaped")
    print(f"{'worker':>7} {'reaped':>7}  file (owners reaped here are not in 'reaped')")
    for name in sorted(own, key=lambda n: -(own[n] + children[n]))[:top]:
        print(f"{own[name]:7.1f} {children[name]:7.1f}  {name}")
    sys.exit(code)


if __name__ == "__main__":
    main()
