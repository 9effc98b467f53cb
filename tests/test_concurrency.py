"""Several real `seelen` processes on one profile: one writer at a time, nothing crossed.

Each process answers in-process here (SEELEN_OWNER=false), so the profile's writer lock is
what keeps them apart; tests/test_owner.py covers questions handed to a warm owner. Two
processes show it: one `seelen` process started here, and the test's own process running
the other command (`run_cli`), which holds or waits for the same lock as any other.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

from helpers import CliResult, asked, open_store, run_cli, wait_until
from model_server import ModelServer, Reply

from seelen.models.embed import make_embedder
from seelen.store import ACTIVE
from seelen.vectors import VectorIndex

# A question starting so is answered only after this long: time enough for the other
# command, run in the test's process, to reach the profile's lock (a few tens of ms) while
# the slow one still holds it, on a busy machine too.
SLOW, SLOW_SECONDS = "slow", 1.0


def _respond(body: dict) -> Reply:
    system = body["messages"][0]["content"] if body["messages"] else ""
    if "finished conversation" in system:
        return Reply(text="They asked many questions.", delay=1.0)  # a slow summary
    if "profile of the user" in system or "self-image" in system:
        return Reply(text="unchanged")
    question = asked(body)
    return Reply(text=f"answer to {question}", delay=SLOW_SECONDS * question.startswith(SLOW))


def _started(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "seelen", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished(process: subprocess.Popen[str]) -> CliResult:
    out, err = process.communicate(timeout=120)
    return CliResult(process.returncode, out, err)


def _beside(env: ModelServer, first: list[str], second: list[str]) -> list[CliResult]:
    """`seelen FIRST` (a question starting with SLOW) as a process of its own, and, once
    its question is at the model (its process holds the profile), `seelen SECOND` in this
    process; what each did."""
    process = _started(first)

    def at_the_model() -> bool:
        assert process.poll() is None, process.communicate()
        return any(asked(b) == first[-1] for b in env.chat_requests())

    wait_until(at_the_model, 60, "the first question never reached the model")
    second_result = run_cli(*second)
    return [_finished(process), second_result]


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
    questions = [f"{SLOW} parallel question", "parallel question"]
    results = _beside(env, ["ask", questions[0]], ["ask", questions[1]])
    for question, result in zip(questions, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {question}\n"
    assert "waiting for another `seelen ask`" in results[1].stderr, results[1].stderr
    _check_memory(data_dir, questions)


def test_an_ask_during_an_archive_waits_and_the_summary_is_asked_once(
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
    # The save holds the profile a second more (its summary is slow): the ask waits for it.
    questions = ["during the archive"]
    asked_now = run_cli("ask", questions[0])
    assert save.wait(60) == 0
    assert asked_now.returncode == 0, asked_now.stderr
    assert asked_now.stdout == f"answer to {questions[0]}\n"
    assert "waiting for another `seelen save`" in asked_now.stderr, asked_now.stderr
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
    kept = [f"{SLOW} keep this"]  # one of each kind is a mix: each process opens the whole app
    dropped = ["drop this"]
    commands = [["ask", q] for q in kept] + [["ask", "--ephemeral", q] for q in dropped]
    results = _beside(env, *commands)
    for args, result in zip(commands, results, strict=True):
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"answer to {args[-1]}\n"
    _check_memory(data_dir, kept)
    store = open_store(data_dir)
    assert len(store.list_sessions(-1)) == 1  # an ephemeral ask made no session of its own
