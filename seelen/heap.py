"""The C heap of a Seelen process: fewer malloc arenas, and freed memory given back.

glibc's malloc gives each new thread that meets a busy arena an arena of its own, up to
8 per core, and keeps what is freed in each of them. LanceDB's and onnxruntime's threads
then hold on to the peaks of earlier work: a 20,014-turn import peaked at 669 MiB with the
default and at 566 MiB with two arenas (MALLOC_ARENA_MAX=2, same code, load 5-8), and
adding 40,000 vectors to LanceDB alone ended at 675 MiB against 377. Elsewhere than glibc
(macOS, musl) these calls do nothing.
"""

from __future__ import annotations

import ctypes
import os
import threading

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
# One arena per core: threads on two cores rarely wait for each other's malloc.
ARENAS = max(2, os.cpu_count() or 2)
_done = threading.Event()


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
