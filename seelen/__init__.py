"""Seelen: a terminal chatbot with layered long-term memory."""

__version__ = "0.1.0"

import logging as _logging
import os as _os

# A library's records go nowhere unless DEBUG_MODE attaches a file (seelen.logs): never to
# stderr, where they would land in the middle of the chat.
_logging.getLogger("seelen").addHandler(_logging.NullHandler())

# numpy's OpenBLAS splits even a small matrix product over every core, and on a busy
# machine its threads wait for each other: scoring 5,000 recent vectors (5,000 x 384) took
# 11.9 ms with the default threads and 0.08 ms with one, at load 4 on 2 cores
# (bench/bench_turn.py: recall 42 ms -> 15 ms). Seelen's products are this small, so one
# thread is the right size. Read once, when numpy loads, so it is set before any import of
# numpy; a value the user set wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# onnxruntime (the local embedder) keeps Microsoft's telemetry on by default on Linux too: on
# every run it wrote ~/.cache/Microsoft/DeveloperTools/.onnxruntime/deviceid and a
# telemetry store (onnxruntime.db) there, outside the data dir. ORT_DISABLE_TELEMETRY=1,
# read when its environment is created, stops both (measured with onnxruntime 1.32).
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
