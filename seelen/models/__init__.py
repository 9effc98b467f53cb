"""The models: the chat model client, embedders, the local llama.cpp server, which to use."""

from seelen.deferred import OPENAI_TYPES, defer_init

# Every use of openai is inside this package, and each imports it late; from here on, its
# types for APIs Seelen never calls are not loaded with it (seelen/deferred.py).
for _package in OPENAI_TYPES:
    defer_init(_package)
