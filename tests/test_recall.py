"""Recall's ranking after fusion, on a real Store, a real LanceDB index and the local model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from seelen.memory.clock import Clock
from seelen.memory.indexer import Indexer
from seelen.memory.passages import HEADING_TOKENS, context_of, turn_tokens
from seelen.memory.recall import RRF_K, Recall, RecalledItem
from seelen.memory.whole import sessions_by_words
from seelen.models.embed import LocalEmbedder
from seelen.store import Store
from seelen.vectors import VectorIndex

DAY_MS = 86_400_000
T0 = 1_736_150_400_000  # 2025-01-06


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()  # loaded once: the model is the slow part


@pytest.fixture
def memory(tmp_path: Path, embedder: LocalEmbedder) -> Iterator[Memory]:
    mem = Memory(tmp_path, embedder)
    yield mem
    mem.store.close()


class FixedClock(Clock):
    """A clock stopped at `now_ms` (UTC), so dates named in questions are stable."""

    def __init__(self, now_ms: int) -> None:
        super().__init__("UTC")
        self.now_ms = now_ms

    def now(self) -> datetime:
        """The stopped time."""
        return self.at(self.now_ms)


class Memory:
    """Archived sessions in a real Store and VectorIndex, and an empty current session."""

    def __init__(self, directory: Path, embedder: LocalEmbedder) -> None:
        self.store = Store(directory / "chat.db")
        self.index = VectorIndex(directory / "lancedb", embedder.model_id, embedder.dim)
        self.embedder = embedder
        self.day = 0

    def session(self, turns: Sequence[str | tuple[str, str]], summary: str = "") -> list[str]:
        """One archived session on its own day, of user turns or (role, text) pairs; returns
        the turns' text ids."""
        self.day += 1
        start = T0 + self.day * DAY_MS
        sid = self.store.create_session(status="active", start_ms=start).session_id
        said = [t if isinstance(t, tuple) else ("user", t) for t in turns]
        added = self.store.add_turns(
            sid, [(role, text, None, start + i * 60_000) for i, (role, text) in enumerate(said)]
        )
        if summary:
            self.store.add_summary(sid, summary, start, start + len(turns) * 60_000)
        self.store.mark_archived(sid)
        return [t.text_id for t in added]

    def recall(self, **kwargs: int) -> tuple[Recall, str]:
        """Index everything, then a Recall and the id of a new, empty current session."""
        Indexer(self.store, self.index, self.embedder).index_all()
        current = self.store.create_session(start_ms=T0 + 400 * DAY_MS).session_id
        clock = FixedClock(T0 + 30 * DAY_MS)  # a month after the first session
        return Recall(self.store, self.index, self.embedder, clock=clock, **kwargs), current


def test_turns_come_in_ranked_order_with_the_score_they_were_ranked_by(memory: Memory) -> None:
    memory.session(["We planted tomatoes in the garden", "The tomatoes need more sun"])
    memory.session(["My garden shed leaks", "Rain again all week"])
    recall, current = memory.recall()
    turns = recall.search("tomatoes in my garden", current).turns
    scores = [t.score for t in turns]
    assert len(turns) >= 3 and scores == sorted(scores, reverse=True)
    shares = memory.store.word_shares("tomatoes in my garden", [t.text_id for t in turns])
    for t in turns:  # the shown score is exactly the fused score of the ranks listed
        weights = {name: recall.weights.get(name, 1.0) for name in t.sources}
        share = {n: shares[t.text_id] if n.startswith("bm25") else 1.0 for n in t.sources}
        fused = sum(weights[n] * share[n] / (RRF_K + rank) for n, rank in t.sources.items())
        assert t.score == pytest.approx(fused)


def test_recall_fills_a_token_budget_not_a_count(memory: Memory) -> None:
    long = "The sailing trip to the islands was long. " + "Waves and wind all day. " * 60
    ids = memory.session(
        [long, "The sailing club meets on Fridays at the harbour", "Sailing lessons are fun, truly"]
    )
    recall, current = memory.recall(conv_num=10, token_budget=60)
    result = recall.search("sailing", current)
    assert 0 < result.tokens <= 60
    assert result.tokens == HEADING_TOKENS + sum(turn_tokens(t) for t in result.prompt_turns())
    # The long turn does not fit, so the shorter ones below it are recalled instead.
    assert {t.text_id for t in result.turns} == set(ids[1:])
    # Asked for more (memory search --limit), it lists them, marking what chat would show.
    listed = recall.search("sailing", current, conv_num=3).turns
    assert {t.text_id for t in listed} == set(ids)
    assert {t.text_id for t in listed if t.in_prompt} == set(ids[1:])
    recall.token_budget, recall.conv_num = 10_000, 2
    assert len(recall.search("sailing", current).prompt_turns()) == 2  # the upper bound


def test_a_newer_similar_turn_never_pushes_a_stronger_match_down(memory: Memory) -> None:
    (berlin,) = memory.session(["I live in Berlin, in a flat in Kreuzberg"])
    (munich,) = memory.session(["I live in Munich now"])
    recall, current = memory.recall()
    ids = [t.text_id for t in recall.search("my flat in Kreuzberg, Berlin", current).turns]
    assert ids.index(berlin) < ids.index(munich)  # the newer turn stays below; dates tell


def test_a_matching_summary_does_not_flood_the_turns(memory: Memory) -> None:
    memory.session(
        [f"Cooking pasta for dinner, day {i}, with garlic and oil" for i in range(8)],
        summary="They cooked pasta with garlic for dinner every day of the week.",
    )
    (answer,) = memory.session(["My pasta machine is a red Imperia with garlic stains"])
    recall, current = memory.recall(session_num=1)
    result = recall.search("red Imperia pasta machine garlic", current)
    assert result.summaries and result.summaries[0].session_id != result.turns[0].session_id
    assert result.turns[0].text_id == answer  # both rankers' first stays first


def test_a_named_time_lifts_the_turn_of_that_day_over_equal_matches(memory: Memory) -> None:
    ids = [memory.session([f"I made {dish} tonight"])[0] for dish in ("soup", "curry", "pie")]
    recall, current = memory.recall()
    day = memory.store.get_turns([ids[1]])[ids[1]].ts_ms
    asked = datetime.fromtimestamp(day / 1000, UTC).strftime("%B %-d")
    turns = recall.search(f"What did I make on {asked}?", current).turns
    assert turns[0].text_id == ids[1] and turns[0].sources.get("time") == 1
    first = recall.search("What did I make first?", current).turns
    assert first[0].text_id == ids[0]


def test_a_named_day_is_searched_even_when_its_turn_is_no_candidate(memory: Memory) -> None:
    dishes = ("soup", "curry", "pie", "stew", "risotto", "ramen", "tacos", "paella")
    ids = [memory.session([f"Dinner was {dish}, made from scratch"])[0] for dish in dishes]
    recall, current = memory.recall(candidates=2)  # the direct searches see 2 of 8 dinners
    for target in (ids[2], ids[5]):
        day = memory.store.get_turns([target])[target].ts_ms
        asked = datetime.fromtimestamp(day / 1000, UTC).strftime("%B %-d")
        first = recall.search(f"What did I cook on {asked}?", current).turns[0]
        assert first.text_id == target
        assert {"bm25_in_time", "vector_in_time"} & set(first.sources)  # found inside that day


def test_asked_what_it_recommended_recall_puts_the_answer_first(memory: Memory) -> None:
    request, answer = memory.session(
        [
            ("user", "Can you suggest a board game for four people?"),
            ("assistant", "Try Wingspan: it plays well with four and nobody gets shouted at."),
        ]
    )
    memory.session(["We played a board game with the neighbours, it was chaos"])
    recall, current = memory.recall()
    turns = recall.search("Which board game did you recommend?", current).turns
    assert turns[0].text_id == answer and turns[0].sources.get("you") == 1
    # Asked about what the user said, the same memory ranks the user's words first.
    mine = recall.search("Which board game did I play with the neighbours?", current).turns
    assert mine[0].role == "user" and "you" not in mine[0].sources
    assert request in [t.text_id for t in turns]


def test_the_multilingual_embedder_finds_meaning_across_languages() -> None:
    from seelen.models.embed import E5Embedder, LocalEmbedder, embed_query

    e5 = E5Embedder()
    assert e5.model_id != LocalEmbedder().model_id  # switching models re-indexes everything
    texts = e5.embed(["我的猫叫小花，她最喜欢吃金枪鱼。", "今天天气很好，我们去公园散步了。"])
    assert texts.shape == (2, e5.dim) and np.allclose(np.linalg.norm(texts, axis=1), 1.0)
    for question in ("我的猫叫什么名字？", "What is my cat called?"):
        scores = texts @ embed_query(e5, question)
        assert scores[0] > scores[1]


def test_a_short_reply_is_found_through_the_turn_it_answers(memory: Memory) -> None:
    (brother,) = memory.session(["My brother moved to Berlin for work"])
    _, reply = memory.session(["Where did your sister move after university?", "Porto, in May."])
    memory.session(["Is the new flat nice?", "Yes, really nice!"])
    recall, current = memory.recall()
    turns = recall.search("where did my sister move?", current, mode="vector").turns
    ids = [t.text_id for t in turns]
    assert ids.index(reply) < ids.index(brother)  # its question makes the reply about a sister
    assert memory.store.get_turns([reply])[reply].text == "Porto, in May."  # stored as said


def test_a_recalled_turn_brings_the_turns_that_make_it_understandable(memory: Memory) -> None:
    ask, twice, _, _ = memory.session(
        [
            ("assistant", "Have you ever been skiing in Norway?"),
            ("user", "Yes, twice!"),
            ("assistant", "Lovely. What else is new?"),
            ("user", "My cousin bought a red tractor for the farm."),
        ]
    )
    recall, current = memory.recall()
    recall.near_share = 0.0  # the answer is not lifted into the ranking: the passage brings it
    result = recall.search("skiing in Norway", current, mode="bm25")  # finds the question only
    (passage,) = [p for p in result.passages if ask in {t.text_id for t in p.turns}]
    shown = {t.text_id: t for t in passage.turns}
    # The question found brings its answer, marked as context for it.
    assert shown[twice].context_for == ask and shown[ask].context_for == ""
    assert shown[twice].in_prompt and [t.text_id for t in passage.turns][:2] == [ask, twice]
    # A short reply found by itself brings the question it answers.
    reply = next(t for t in recall.search("yes twice", current, mode="bm25").prompt_turns())
    assert reply.text_id == ask and reply.context_for == twice


def test_passages_merge_and_group_by_session_in_ranked_order(memory: Memory) -> None:
    first = memory.session(
        [
            "I started pottery classes on Mondays.",
            "The teacher is a retired sculptor.",
            "We glazed our first bowls in pottery today.",
            "Then we had pizza.",
        ]
    )
    memory.session(["My pottery bowl cracked in the kiln, so much for pottery."])
    recall, current = memory.recall()
    result = recall.search("pottery bowl", current)
    sessions = [p.session_id for p in result.passages]
    assert len(sessions) == len(set(sessions))  # one block per session
    best = result.turns[0]
    assert sessions[0] == best.session_id  # blocks in the order of their best turn
    session = memory.store.get_turns([first[0]])[first[0]].session_id
    block = next(p for p in result.passages if p.session_id == session)
    assert len(block.turns) >= 2  # both pottery turns, and the teacher's between them or a gap
    ids = [t.text_id for t in block.turns]
    assert ids == sorted(ids, key=first.index)  # conversation order inside a block
    # A turn left out between two shown ones is marked as a gap.
    for i, turn in enumerate(block.turns[1:], start=1):
        adjacent = first.index(turn.text_id) == first.index(block.turns[i - 1].text_id) + 1
        assert block.gaps[i] == (not adjacent)
    assert result.tokens == sum(p.tokens for p in result.passages) <= recall.token_budget


def test_which_neighbours_make_a_turn_understandable() -> None:
    def turn(text: str, role: str = "user") -> RecalledItem:
        return RecalledItem(text, "s", "turn", text, role, 0, 0, 0.0)

    ask, yes = turn("Have you been to Norway?", "assistant"), turn("Yes, twice!")
    long = turn("We drove from Oslo to Bergen and stopped at every fjord on the way.")
    after = turn("That sounds wonderful.", "assistant")
    assert context_of(ask, None, yes, "question") == [yes]  # a question brings its answer
    assert context_of(yes, ask, after, "question") == []
    assert context_of(yes, ask, after, "brief") == [ask]  # "Yes, twice!" brings its question
    assert context_of(long, ask, after, "brief") == []  # a statement stands on its own
    assert context_of(long, ask, after, "around") == [ask, after]
    assert context_of(ask, None, yes, "none") == []


def test_the_answer_to_a_matching_question_joins_the_ranking(memory: Memory) -> None:
    said = (
        "Pumpkin with a little brown butter and crispy leaves on top, the recipe my "
        "grandmother wrote on the back of an envelope years ago."
    )
    ask, answer = memory.session([("assistant", "Which soup did you make for the party?"), said])
    # The user asking: the assistant's advice is no answer to a later question about the user.
    _, advice = memory.session(
        [
            "Which soup should I make for the party next year?",
            ("assistant", "Lentils with cumin and a squeeze of lemon travel well in a big pot."),
        ]
    )
    for dish in ("curry", "pie", "stew", "salad", "cake"):
        memory.session([f"The party food was {dish}, everyone loved it"])
    recall, current = memory.recall()
    question = "What soup did I make for the party?"
    found = recall.search(question, current, mode="bm25").turns  # words find the question only
    ids = [t.text_id for t in found]
    assert ids.index(ask) < ids.index(answer) <= 2  # lifted by the question it answers
    assert found[ids.index(answer)].sources == {"near": ids.index(ask) + 1}
    assert advice not in ids
    recall.near_share = 0.0
    assert answer not in [t.text_id for t in recall.search(question, current, mode="bm25").turns]


def test_asked_about_now_the_newer_version_of_a_fact_ranks_first(memory: Memory) -> None:
    (berlin,) = memory.session(["My commute to work is forty minutes on the tram."])
    for line in ("The tram drivers are on strike tomorrow.", "Getting to the airport takes ages."):
        memory.session([line])
    (bike,) = memory.session(["Since the move my commute to work is ten minutes by bike."])
    recall, current = memory.recall()
    now = recall.search("How long is my commute to work on the tram now?", current).turns
    assert now[0].text_id == bike and now[0].sources.get("newer")
    assert [t.text_id for t in now].index(berlin) == 1  # the old one right below
    # Without the change, the rankers' own order: the old statement matches better.
    recall.supersede = False
    plain = recall.search("How long is my commute to work on the tram now?", current).turns
    assert plain[0].text_id == berlin and "newer" not in plain[0].sources


def test_asked_about_now_a_newer_version_the_rankers_missed_is_found_by_meaning(
    memory: Memory,
) -> None:
    (bear,) = memory.session(["I am hooked on The Bear, watching an episode every night."])
    for line in ("The cooking show on TV last night was silly.", "Are you seeing any films?"):
        memory.session([line])
    (severance,) = memory.session(["I finished The Bear, now I am obsessed with Severance."])
    recall, current = memory.recall()
    recall.candidates = 1  # each ranker hands on one turn, as in a memory of thousands
    question = "Which show am I watching every night now?"
    found = recall.search(question, current, conv_num=5).turns
    assert found[0].text_id == severance  # near the old statement, not the question
    assert found[0].sources == {"later": found[0].sources["later"], "newer": 1}
    assert found[1].text_id == bear
    recall.supersede = False
    assert severance not in [t.text_id for t in recall.search(question, current, conv_num=5).turns]


def test_asked_about_a_past_month_the_version_that_held_then_ranks_first(
    memory: Memory,
) -> None:
    (berlin,) = memory.session(["I live in Berlin, in a small flat."])  # January 7
    memory.day = 120  # May
    (munich,) = memory.session(["We finally moved: the city I live in now is Munich."])
    recall, current = memory.recall()
    recall.clock = FixedClock(T0 + 200 * DAY_MS)
    question = "Which city did I live in, in February 2025?"
    found = recall.search(question, current, conv_num=5).turns
    assert [t.text_id for t in found][:2] == [berlin, munich]
    assert found[0].sources.get("then") == 1
    recall.supersede = False  # the rankers' own order: the newer one matches the words better
    assert recall.search(question, current, conv_num=5).turns[0].text_id == munich


def test_the_best_sessions_other_turns_follow_the_ranking(memory: Memory) -> None:
    first, view = memory.session(
        ["We went hiking up the mountain trail on Saturday", "Yes, and the view was unreal!"]
    )
    for place in ("the lake", "the canyon", "the forest", "the coast"):
        memory.session([f"I hiked the mountain trail by {place} on Sunday"])
    # Two candidates per search: the direct searches rank the other hikes above the reply.
    recall, current = memory.recall(candidates=2)
    recall.best_sessions, recall.whole_sessions = 1, 0  # this second round alone
    question = "Where did we go hiking on the mountain trail?"
    turns = recall.search(question, current).turns
    ids = [t.text_id for t in turns]
    assert ids[0] == first and ids[-1] == view  # searched again inside the best session
    assert turns[-1].sources == {"vector_in_best": 2}
    assert turns[-1].score < min(t.score for t in turns[:-1])  # after every direct find
    # Searched only once the ranking ran out: not when a prompt of 20 tokens is full before
    # the three ranked turns are in, nor for a listing of three; for a listing of four, yes.
    searched: list[list[str]] = []  # the sessions of each search limited to some
    search = memory.index.search

    def counted(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("only_sessions"):
            searched.append(kwargs["only_sessions"])
        return search(*args, **kwargs)

    memory.index.search = counted  # type: ignore[method-assign]
    recall.token_budget = 20
    recall.search(question, current)
    assert view not in [t.text_id for t in recall.search(question, current, conv_num=3).turns]
    assert searched == []
    assert view in [t.text_id for t in recall.search(question, current, conv_num=4).turns]
    assert searched == [[turns[0].session_id]]
    recall.best_sessions = 0
    assert view not in [t.text_id for t in recall.search(question, current, conv_num=4).turns]


def test_the_sessions_best_as_wholes_lift_their_turns(memory: Memory) -> None:
    said, _, answer = memory.session(
        [
            "Evan and I drove up to Glacier park for the hiking weekend",
            "My sister called about her new job",
            "The food was great.",  # indexed with the turn before it: the sister's job
        ]
    )
    for place in ("river", "canyon", "forest", "coast"):
        memory.session([f"Evan liked the long hike by the {place}", "Evan liked that weekend"])
    # Three candidates per direct search: the other hikes rank above the reply, which shares
    # no word with the question; inside its session it is one of three.
    recall, current = memory.recall(candidates=3)
    # No second round: only the whole-session route can find it, in the best session.
    recall.best_sessions, recall.whole_sessions = 0, 1
    question = "How did Evan like the hiking weekend at Glacier park?"
    assert sessions_by_words(memory.store, question, 1, current) == [
        memory.store.get_turns([said])[said].session_id
    ]
    turns = recall.search(question, current, conv_num=10).turns
    found = {t.text_id: t for t in turns}
    assert answer in found and found[answer].sources.keys() <= {"vector_in_whole", "near"}
    recall.whole_sessions = 0
    assert answer not in [t.text_id for t in recall.search(question, current, conv_num=10).turns]


def test_a_summarised_session_is_left_to_its_summary(memory: Memory) -> None:
    memory.session(["Evan drove up to Glacier park", "The food was great."], summary="A trip.")
    (plain, _) = memory.session(["Glacier park is far from here", "It is."])
    _, current = memory.recall()
    ranked = sessions_by_words(memory.store, "Glacier park", 3, current)
    assert ranked == [memory.store.get_turns([plain])[plain].session_id]
    # A session added since is counted too (the store reads the turns added since), first:
    # both of its turns hold the words.
    (later, _) = memory.session(["Glacier park again", "Glacier park, always Glacier park"])
    ranked = sessions_by_words(memory.store, "Glacier park", 3, current)
    assert ranked == [memory.store.get_turns([t])[t].session_id for t in (later, plain)]
