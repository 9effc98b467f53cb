"""How the rankers' lists become one ranking: BM25 votes by the share of the question a turn
holds, and questions about what the assistant said (recall's own use: test_recall.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seelen.memory.fusion import (
    HALF_VOTE,
    RRF_K,
    asks_assistant,
    fuse,
    lift_replies,
    spread_to_neighbours,
)
from seelen.store import Store


def test_a_bm25_vote_counts_the_share_of_the_question_the_turn_holds() -> None:
    lists = {"bm25": ["incidental", "answer"], "vector": ["answer", "incidental"]}
    plain = fuse(lists)
    assert plain[0][0] == "incidental"  # rank by rank, BM25's first place wins the tie-break
    shared = fuse(lists, shares={"incidental": 0.2, "answer": 0.9})
    assert [i for i, _, _ in shared] == ["answer", "incidental"]
    scores = {i: s for i, s, _ in shared}
    assert scores["answer"] == pytest.approx(0.9 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert scores["incidental"] == pytest.approx(0.2 / (RRF_K + 1) + 1 / (RRF_K + 2))
    # Only BM25 lists are scaled; an id with no share counts nothing there.
    alone = fuse({"bm25": ["x"], "vector_in_time": ["y"]}, shares={})
    assert {i: s for i, s, _ in alone} == {"x": 0.0, "y": pytest.approx(1 / (RRF_K + 1))}


def test_word_shares_weigh_rare_words_over_common_ones(tmp_path: Path) -> None:
    store = Store(tmp_path / "chat.db")
    try:
        sid = store.create_session().session_id
        texts = [
            "I am allergic to cashews, found out at a wedding",
            "The wedding was lovely",
            "Another wedding this summer",
            "My cousin's wedding is in May",
            "Nothing to do with it",
        ]
        ids = [t.text_id for t in store.add_turns(sid, [("user", t, None, None) for t in texts])]
        shares = store.word_shares("cashews at the wedding?", ids)
        assert shares[ids[0]] == pytest.approx(1.0)  # holds both of the question's words
        assert 0 < shares[ids[1]] < 0.5 < shares[ids[0]]  # "wedding" is common: a small share
        assert shares[ids[4]] == 0.0
        # A word the memory never holds weighs nothing, so it takes no share from the rest.
        assert store.word_shares("cashews at the wedding, zanzibar?", ids) == shares
        assert store.word_shares("", ids) == dict.fromkeys(ids, 0.0)
    finally:
        store.close()


@pytest.mark.parametrize(
    "question",
    [
        "Which board game did you recommend?",
        "What advice have you given me about sleep?",
        "You once recommended a film to me, which one?",
        "What names did you come up with for my fish?",
        "你给我推荐过哪些书？",
        "关于如何放松，你给了我什么建议？",
        "你曾经跟我分享过什么菜谱？",
    ],
)
def test_questions_about_what_the_assistant_said(question: str) -> None:
    assert asks_assistant(question)


@pytest.mark.parametrize(
    "question",
    [
        "Do you remember me saying what I saw there?",
        "I recommended a science fiction movie before, what was it?",
        "What did I tell you about my bike?",
        "我曾经和你推荐过一部科幻电影，它的名字是？",
        "我的猫叫什么名字？",
    ],
)
def test_questions_about_what_the_user_said(question: str) -> None:
    assert not asks_assistant(question)


def test_a_reply_ranks_with_the_request_it_answers() -> None:
    fused = [("request", 0.030, {"bm25": 1}), ("other", 0.020, {"vector": 1})]
    lifted = lift_replies(fused, {"request": "reply"}, assistant={"reply"})
    assert [i for i, _, _ in lifted] == ["reply", "request", "other"]
    scores = {i: s for i, s, _ in lifted}
    assert scores["reply"] == pytest.approx(0.030 + HALF_VOTE)
    assert lifted[0][2] == {"reply": 1, "you": 1}
    # A reply already ranked higher keeps its own score (plus the lift).
    ahead = lift_replies([("reply", 0.04, {}), *fused], {"request": "reply"}, {"reply"})
    assert ahead[0] == ("reply", pytest.approx(0.04 + HALF_VOTE), {"you": 1})


def test_a_turn_passes_a_share_of_its_score_to_its_neighbours() -> None:
    fused = [("question", 0.04, {"bm25": 1}), ("other", 0.03, {"vector": 1})]
    spread = spread_to_neighbours(fused, {"question": (None, "answer")}, 0.5)
    scores = {i: s for i, s, _ in spread}
    assert scores == {"question": 0.04, "other": 0.03, "answer": pytest.approx(0.02)}
    assert dict(spread[-1][2]) == {"near": 1}  # found by no ranker: joins, said why
    # A neighbour already ranked gains on top of its own score, the most it is offered.
    both = spread_to_neighbours(fused, {"question": (None, "other"), "x": (None, "other")}, 0.5)
    assert both[0] == ("other", pytest.approx(0.05), {"vector": 1, "near": 1})
