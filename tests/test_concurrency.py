"""Several real `seelen` processes on one profile: one writer at a time, nothing crossed.

Each process answers in-process here (SEELEN_OWNER=false), so the profile's writer lock is
what keeps them apart; tests/test_owner.py covers questions handed to a warm owner.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers import asked, open_store, run_cli, run_seelen, wait_until
from model_server import ModelServer, Reply

from seelen.models.embed import make_embedder
from seelen.store import ACTIVE
from seelen.vectors import VectorIndex


def _respond(body: dict) -> Reply:
    system = body["messages"][0]["content"] if body["messages"] else ""
    if "finished conversation" in system:
        return Reply(text="They asked many questions.", delay=1.0)  # a slow summary
    if "profile of the user" in system or "self-image" in system:
        return Reply(text="unchanged")
    return Reply(text=f"answer to {asked(body)}")


def _parallel(commands: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda args: run_seelen(*args, timeout=120), commands))


def _check_memory(data_dir: Path, questions: list[str]) -> None:
    """Every question stored once, answered right after, one active session, clean index."""
    store = open_store(data_dir)
    turns = [t for s in store.list_sessions(-1) for t in store.turns(s.session_id)]
    users = [t.text for t in turns if t.role == "user"]
    assert sorted(users) == sorted(questions)
    for question, reply in itertools.pairwise(turns):
        if question.role == "user":
            assert reply.text == f"answer to {question.text}"
    assert len(store.sessions_with_status(ACTIVE)) == 1
    texts = {t.text_id for t in turns if t.role in ("user", "assistant")}
    embedder = make_embedder("local", "", "", "")
    index = VectorIndex(data_dir / "default" / "lancedb", embedder.model_id, embedder.dim)
    if (data_dir / "default" / "lancedb").exists():
        ids = index.text_ids("turns")
        assert ids <= texts  # no orphans
        assert index.count("turns") == len(ids)  # no duplicates


def test_parallel_asks_each_answer_their_own_question(env: ModelServer, data_dir: Path) -> None:
    env.responder = _respond
    questions = [f"parallel question {i}" for i in range(3)]
    results = _parallel([["ask", q] for q in questions])
    for question, result in zip(questions, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {question}\n"
    waited = [r for r in results if "waiting for another `seelen ask`" in r.stderr]
    assert waited, "no ask said it was waiting for the profile"
    _check_memory(data_dir, questions)


def test_asks_during_an_archive_wait_and_the_summary_is_asked_once(
    env: ModelServer, data_dir: Path
) -> None:
    env.responder = _respond
    assert run_cli("ask", "before the archive").returncode == 0
    save = subprocess.Popen(
        [sys.executable, "-m", "seelen", "save"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def summary_asked() -> bool:
        assert save.poll() is None, save.communicate()
        return any("finished conversation" in json.dumps(b) for b in env.chat_requests())

    wait_until(summary_asked, 30, "the save never asked for the summary")
    questions = [f"during the archive {i}" for i in range(2)]
    results = _parallel([["ask", q] for q in questions])
    assert save.wait(60) == 0
    for question, result in zip(questions, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {question}\n"
    summaries = [b for b in env.chat_requests() if "finished conversation" in json.dumps(b)]
    assert len(summaries) == 1
    store = open_store(data_dir)
    assert len(store.sessions_with_status(ACTIVE)) == 1
    active = store.sessions_with_status(ACTIVE)[0]
    assert sorted(t.text for t in store.turns(active.session_id) if t.role == "user") == sorted(
        questions
    )
    _check_memory(data_dir, ["before the archive", *questions])


def test_ephemeral_and_plain_asks_mixed(env: ModelServer, data_dir: Path) -> None:
    env.responder = _respond
    kept = ["keep this"]  # one of each kind is a mix: each process opens the whole app
    dropped = ["drop this"]
    commands = [["ask", q] for q in kept] + [["ask", "--ephemeral", q] for q in dropped]
    results = _parallel(commands)
    for args, result in zip(commands, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {args[-1]}\n"
    _check_memory(data_dir, kept)
    store = open_store(data_dir)
    assert len(store.list_sessions(-1)) == 1  # an ephemeral ask made no session of its own
