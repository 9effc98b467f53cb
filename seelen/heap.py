"""The memory of a Seelen process: fewer malloc arenas, freed memory given back, the
libraries' pages let go while idle, and the garbage collector held while modules load.

glibc's malloc gives each new thread that meets a busy arena an arena of its own, up to
8 per core, and keeps what is freed in each of them. LanceDB's and onnxruntime's threads
then hold on to the peaks of earlier work: a 20,014-turn import peaked at 669 MiB with the
default and at 566 MiB with two arenas (MALLOC_ARENA_MAX=2, same code, load 5-8), and
adding 40,000 vectors to LanceDB alone ended at 675 MiB against 377. Elsewhere than glibc
(macOS, musl) these calls do nothing.
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
MADV_DONTNEED = 4  # madvise's advice number, from Linux's mman-common.h
# One arena per core: threads on two cores rarely wait for each other's malloc.
ARENAS = max(2, os.cpu_count() or 2)
_done = threading.Event()
# How long a process's start holds the cyclic garbage collector (`hold_collector`): a `seelen`
# command loads its modules within 1-2 s of CPU, an owner opens its profile within 3 s at
# 20,014 turns; what loads later is collected as usual.
START_SECONDS = 3.0


def _glibc() -> ctypes.CDLL | None:
    if os.uname().sysname != "Linux":
        return None
    libc = ctypes.CDLL(None)  # the symbols the process has loaded: its C library's
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_libc = _glibc()


def limit_arenas() -> None:
    """Cap malloc arenas; MALLOC_ARENA_MAX in the environment, if set, wins. glibc fixes the
    cap when a second thread first needs an arena, so this is called as a process starts
    (the `seelen` command, the owner), and again before LanceDB or onnxruntime start
    threads, for processes that use Seelen as a library."""
    if _libc is None or _done.is_set() or "MALLOC_ARENA_MAX" in os.environ:
        return
    _libc.mallopt(M_ARENA_MAX, ARENAS)
    _done.set()


def give_back() -> None:
    """Return the heap's free pages to the system (after a large, short-lived allocation)."""
    if _libc is not None:
        _libc.malloc_trim(0)


def page_out_files() -> int:
    """Let go of the pages this process maps from files and has never written: the code and
    read-only data of its libraries (LanceDB's, onnxruntime's, pyarrow's) and read-only maps
    such as the HNSW graphs. They stay in the kernel's page cache while it has room, and a
    page is mapped again from there (or read again from its file) when next used, as after
    the kernel's own reclaim; only the resident set changes. A mapping with any page of its
    own (written once, as a library's relocated tables are) is left whole. Returns how many
    mappings were let go; 0 off Linux.

    Why: an owner idle after one question held 249 MiB on a new profile, 149 of it these
    pages, and 380-404 MiB at 20,014 turns; let go, 137-149 MiB stayed there, and the next
    question mapped back what it used for ~0.01 s of CPU (bench/bench_owner.py, load 3-5).
    MADV_DONTNEED rather than MADV_PAGEOUT: PAGEOUT also drops the page cache's copy, and
    the next question read it from disk (an embed and a search: 34 ms against 4).
    """
    if _libc is None or not hasattr(_libc, "madvise"):
        return 0
    madvise = _libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    for start, end in _clean_file_maps():
        advised += madvise(start, end - start, MADV_DONTNEED) == 0
    return advised


def _clean_file_maps() -> list[tuple[int, int]]:
    """The address ranges of this process's read-only file mappings holding no page of their
    own, from /proc/self/smaps (empty where it cannot be read)."""
    found: list[tuple[int, int]] = []
    candidate: tuple[int, int] | None = None
    try:
        with open("/proc/self/smaps", encoding="utf-8") as smaps:
            for line in smaps:
                fields = line.split(maxsplit=5)
                if fields[0].endswith(":"):  # one of the current mapping's counters
                    if fields[0] == "Anonymous:" and candidate is not None:
                        if fields[1] == "0":
                            found.append(candidate)
                        candidate = None
                    continue
                # A mapping: address range, permissions, offset, device, inode, path.
                readonly = len(fields) == 6 and "w" not in fields[1] and "s" not in fields[1]
                if readonly and fields[5].startswith("/"):
                    start, end = fields[0].split("-")
                    candidate = (int(start, 16), int(end, 16))
                else:
                    candidate = None
    except OSError:
        return []
    return found


def hold_collector(seconds: float = START_SECONDS) -> None:
    """Keep Python's cyclic garbage collector from running while the process loads its
    modules; after `seconds`, freeze what is loaded by then and let it run again.

    Loading LanceDB, openai, onnxruntime and Seelen makes over a million objects, hardly any
    of them garbage, and the collector walked them again and again meanwhile: those imports
    took 2.06 s of CPU held against 2.47 s (4 runs each, load 4.5), and the test suite, whose
    `seelen` processes start held, 190 s of CPU against 203. Frozen, they are skipped by every
    later full collection (one in a recall bench: 58 ms, 0.6 ms frozen). Only an entry point
    calls this, first thing: a program that imports Seelen keeps its collector as it is.
    """
    limit_arenas()  # before the timer's thread, or any other
    if not gc.isenabled():
        return  # held already, or turned off by the program: not ours to turn on
    gc.disable()
    timer = threading.Timer(seconds, _release_collector)
    timer.daemon = True
    timer.start()


def _release_collector() -> None:
    gc.freeze()
    gc.enable()
