"""ChatBot: one turn = save → fold → recall → assemble → model ⇄ tools → save.

The agent never prints. It yields events that the REPL renders with rich and `ask` renders
as plain text or JSON. The user's turn is committed before any network call; the reply is
committed the moment it is complete, and a reply cut short (Ctrl-C, a dropped stream) keeps
what was shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from seelen.agent.oversize import clipped_question, oversized_files
from seelen.agent.record import Tally, TurnLog
from seelen.agent.warmup import PromptWarmer
from seelen.errors import ModelError
from seelen.memory.clock import Clock
from seelen.memory.context import (
    SHARES,
    PromptParts,
    build_messages,
    dated_passages,
    prefix_messages,
    with_images,
)
from seelen.memory.persona import PersonaFiles
from seelen.memory.prompts import DatedText
from seelen.memory.sessions import Sessions
from seelen.models.chat import ChatModel, Completion, TextChunk
from seelen.protocol.events import (
    Done,
    Event,
    Failed,
    KnowledgeUsed,
    Notice,
    Recalled,
    Saved,
    TextDelta,
    ToolFinished,
    ToolProgressed,
    ToolStarted,
)
from seelen.store import Turn

if TYPE_CHECKING:
    from seelen.knowledge import Knowledge
    from seelen.memory.recall import Recall, RecallResult
    from seelen.protocol.results import NotePassage
    from seelen.tools.base import ToolOutcome, ToolRegistry


NO_VISION = (
    "the model refused the images from a tool; it reads their descriptions instead "
    "(VISION=true or false in .env decides it for good)"
)


class ChatBot:
    """Answers one turn at a time against the memory, the model and the tools."""

    def __init__(
        self,
        sessions: Sessions,
        files: PersonaFiles,
        model: ChatModel,
        clock: Clock,
        *,
        recall: Recall | None = None,
        tools: ToolRegistry | None = None,
        context_tokens: int = 8000,
        max_tool_rounds: int = 6,
        on_saved: Callable[[], None] = lambda: None,
        log_prompt: Callable[[list[dict[str, Any]]], None] | None = None,
        knowledge: Knowledge | None = None,
        vision: str = "auto",
        prefill: bool = False,
        context_apart: bool = False,
    ) -> None:
        self.sessions = sessions
        self.store = sessions.store
        self.files = files
        self.model = model
        self.clock = clock
        self.recall = recall
        self.tools = tools
        self.tools_enabled = True
        self.context_tokens = context_tokens
        self.max_tool_rounds = max_tool_rounds
        self.on_saved = on_saved
        self.log_prompt = log_prompt
        self.last_recall: RecallResult | None = None
        self.knowledge = knowledge
        self.last_passages: Sequence[NotePassage] = ()
        # Whether tools' images go to the model: "true", "false", or "auto" (until the
        # endpoint refuses a request with images; then "false" for the rest of the run).
        self.vision = vision
        self._tool_events: asyncio.Queue[Event] | None = None  # while tools run
        self._told_too_large: set[str] = set()  # files said to be too large, once each
        # `prefill`: the model server's prompt cache is worth filling ahead of a question (a
        # local llama.cpp server, which evaluates a prompt at tens of tokens a second).
        self.warmer = PromptWarmer(model, self._prefix) if prefill else None
        self.context_apart = context_apart  # the context block as a message of its own

    def tool_progress(self, progress: ToolProgressed) -> None:
        """A running tool's progress notification: shown as an event of the current turn."""
        if self._tool_events is not None:
            self._tool_events.put_nowait(progress)

    async def turn(
        self, text: str, *, ephemeral: bool = False, unsaved: list[Turn] | None = None
    ) -> AsyncIterator[Event]:
        """Save the user's words, then answer them. An ephemeral turn writes nothing; its
        turns are appended to `unsaved` (an incognito conversation) when one is given, and the
        earlier ones there are part of its context."""
        if ephemeral:
            log = TurnLog(self.sessions, keep=False)
            question = log.add("user", text)
            live = await asyncio.to_thread(self.sessions.live_turns)
            context = [*live, *(unsaved or ())]
            async for event in self._respond(question, log, context):
                yield event
            if unsaved is not None:
                unsaved.extend(log.turns)
            return
        else:
            # Indexing waits for the reply (`_save_reply` wakes it): embedding this turn now
            # would compete with recall for the same two cores, right when the user waits.
            question = await asyncio.to_thread(self.sessions.add_turn, "user", text)
            yield Saved(text_id=question.text_id)
            log, context = TurnLog(self.sessions, keep=True), None
        async for event in self._respond(question, log, context):
            yield event

    def unanswered(self) -> Turn | None:
        """The user's last turn if no reply followed it (what `/retry` answers)."""
        for turn in reversed(self.sessions.live_turns()):
            if turn.role == "user":
                return turn
            # A reply cut short (dropped stream, Ctrl-C) is kept, but it is not an answer.
            meta = turn.meta
            if (
                turn.role == "assistant"
                and not meta.get("tool_calls")
                and not meta.get("interrupted")
            ):
                return None
        return None

    async def retry(self) -> AsyncIterator[Event]:
        """Answer the last unanswered user turn again, without saving it twice."""
        question = await asyncio.to_thread(self.unanswered)
        if question is None:
            said = self.sessions.current.conv_count  # no I/O: this process's own count
            why = "the last message has an answer" if said else "no message in this session yet"
            yield Notice(message=f"nothing to retry: {why}")
            return
        async for event in self._respond(question, TurnLog(self.sessions, keep=True), None):
            yield event

    async def _respond(
        self, question: Turn, log: TurnLog, context: list[Turn] | None
    ) -> AsyncIterator[Event]:
        """Answer `question`. The prompt holds the live turns up to that question (or
        `context` for an ephemeral one) and what this turn added since: never a turn that
        someone else stored meanwhile."""
        tally = Tally()
        if log.keep:
            try:
                if await self.sessions.maybe_fold():
                    yield Notice(message="folded the oldest turns into this session's summary")
            except ModelError as exc:
                yield Notice(message=f"could not fold old turns yet ({exc}); keeping them live")
        for notice in oversized_files(self.files, self.context_tokens, self._told_too_large):
            yield Notice(message=notice)
        recalled = await self._recall(question.text)
        if recalled is not None:
            if recalled.notice:  # e.g. the vector index is damaged: keywords only
                yield Notice(message=recalled.notice)
            yield Recalled(
                sessions=len(recalled.summaries),
                messages=len(recalled.prompt_turns()),
                tokens=recalled.tokens,
            )
        await self._consult_notes(question.text)
        rounds = 0
        while True:
            offer = self._tool_specs() if rounds < self.max_tool_rounds else []
            live = context
            if live is None:
                live = await asyncio.to_thread(self.sessions.live_turns, question.seq)
            images = log.images if self.vision != "false" else {}
            messages = await asyncio.to_thread(
                self._messages, recalled, [*live, *log.turns], images
            )
            if rounds == 0 and (clipped := clipped_question(question.text, messages)):
                yield Notice(message=clipped)
            if self.log_prompt:
                self.log_prompt(messages)
            completion: Completion | None = None
            shown: list[str] = []
            try:
                async for item in self.model.stream(messages, offer):
                    if isinstance(item, TextChunk):
                        shown.append(item.text)
                        yield TextDelta(text=item.text)
                    else:
                        completion = item
            except ModelError as exc:
                if self._refused_images(exc, images, shown):
                    yield Notice(message=NO_VISION)
                    continue  # the same round again, with the images described in text
                if shown:
                    self._save_reply(log, "".join(shown), tally, interrupted=True)
                yield Failed(message=str(exc), saved=log.keep)
                return
            except (asyncio.CancelledError, GeneratorExit):
                # Ctrl-C (cancelled), or the caller stopped reading (closed): keep what was
                # already said. Closing allows no await, and saving needs none.
                if shown:
                    self._save_reply(log, "".join(shown), tally, interrupted=True)
                raise
            assert completion is not None
            if completion.usage:
                tally.prompt_tokens += completion.usage.prompt_tokens
                tally.completion_tokens += completion.usage.completion_tokens
                tally.cached_tokens += completion.usage.cached_tokens
            if completion.tool_calls and offer:
                async for event in self._run_tools(completion, tally, log):
                    yield event
                rounds += 1
                continue
            self._save_reply(log, completion.text, tally)
            if self.last_passages:
                yield KnowledgeUsed(notes=[p.label() for p in self.last_passages])
            yield tally.usage()
            yield Done(text=completion.text, session_id=question.session_id if log.keep else None)
            return

    async def _recall(self, query: str) -> RecallResult | None:
        if self.recall is None:
            return None
        sid = self.sessions.current.session_id
        self.last_recall = await asyncio.to_thread(self.recall.search, query, sid)
        return self.last_recall

    async def _consult_notes(self, query: str) -> None:
        """The passages of the user's notes for this question, within their budget share."""
        if self.knowledge is None:
            return
        budget = int(self.context_tokens * SHARES["knowledge"])
        self.last_passages = await asyncio.to_thread(self.knowledge.search, query, budget)

    def _refused_images(self, exc: ModelError, images: dict[str, Any], shown: list[str]) -> bool:
        """Whether the endpoint refused a request for its images (VISION=auto): a 400 before
        any word, to a request that carried images. Then images stay out for this run."""
        if self.vision != "auto" or not images or shown or exc.status != 400:
            return False
        self.vision = "false"
        return True

    def _tool_specs(self) -> list[dict[str, Any]]:
        if self.tools is None or not self.tools_enabled:
            return []
        return self.tools.openai_tools()

    def _messages(
        self,
        recalled: RecallResult | None,
        live: Sequence[Turn],
        images: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        parts = PromptParts(
            persona=self.files.persona,
            profile=self.files.profile,
            session_summary=self.sessions.current.rolling_summary,
            related_summaries=self._dated(recalled.summaries if recalled else ()),
            related_passages=dated_passages(recalled.passages, self.clock) if recalled else (),
            live=live,
            now=self.clock.now(),
            notes=[(p.label(), p.text) for p in self.last_passages],
            room=self._room(),
        )
        messages = build_messages(parts, self.context_tokens, apart=self.context_apart)
        return with_images(messages, images) if images else messages

    def _room(self) -> int:
        """The tokens recalled passages and notes may take: their budgets."""
        passages = self.recall.token_budget if self.recall is not None else 0
        notes = int(self.context_tokens * SHARES["knowledge"]) if self.knowledge else 0
        return passages + notes

    def _prefix(self) -> list[dict[str, Any]]:
        """How the next question's prompt begins: the system message and the live turns."""
        parts = PromptParts(
            persona=self.files.persona,
            profile=self.files.profile,
            session_summary=self.sessions.current.rolling_summary,
            related_summaries=(),
            related_passages=(),
            live=self.sessions.live_turns(),
            now=self.clock.now(),
            room=self._room(),
        )
        return prefix_messages(parts, self.context_tokens)

    def keep_prompt_warm(self) -> None:
        """For a chat or an owner that stays open: have the model server read the next
        question's prompt beginning now and after every answer (`PromptWarmer`), so a
        question waits only for its own tokens. Only where `prefill` is on."""
        if self.warmer is not None:
            self.warmer.start()

    async def aclose(self) -> None:
        """Stop background work (a warm-up on its way)."""
        if self.warmer is not None:
            await self.warmer.aclose()

    def _dated(self, items: Sequence[Any]) -> list[DatedText]:
        out = []
        for item in items:
            when = (
                self.clock.fmt_range(item.start_ms, item.end_ms)
                if item.end_ms != item.start_ms
                else self.clock.fmt(item.start_ms)
            )
            out.append(DatedText(when, item.text, item.role))
        return out

    async def _run_tools(
        self, completion: Completion, tally: Tally, log: TurnLog
    ) -> AsyncIterator[Event]:
        assert self.tools is not None
        calls = completion.tool_calls
        meta = {
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        }
        await asyncio.to_thread(log.add, "assistant", completion.text, meta)
        for call in calls:
            yield ToolStarted(call_id=call.id, name=call.name, arguments=call.arguments)
        events: asyncio.Queue[Event] = asyncio.Queue()
        self._tool_events = events  # progress notifications join the outcomes here

        def done(o: ToolOutcome) -> None:
            finished = ToolFinished(
                call_id=o.call_id, name=o.name, ok=o.ok, seconds=o.seconds, content=o.content
            )
            events.put_nowait(finished)

        task = asyncio.create_task(self.tools.run_all(calls, on_done=done))
        try:
            finished = 0
            while finished < len(calls):
                event = await events.get()
                finished += isinstance(event, ToolFinished)
                yield event
            outcomes = await task
        finally:
            self._tool_events = None
            task.cancel()
        tally.tool_calls += len(calls)
        for outcome in outcomes:  # saved in call order, as the API expects
            if outcome.images:  # shown to the model in this answer only, never stored
                log.images[outcome.call_id] = outcome.images
            await asyncio.to_thread(
                log.add,
                "tool",
                outcome.content,
                {"tool_call_id": outcome.call_id, "name": outcome.name, "ok": outcome.ok},
            )

    def _save_reply(
        self, log: TurnLog, text: str, tally: Tally, *, interrupted: bool = False
    ) -> None:
        # Synchronous on purpose: it must also run while the task is being cancelled.
        usage = tally.usage()
        meta: dict[str, Any] = {
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "tool_calls": usage.tool_calls,
                "seconds": usage.seconds,
                "cached_tokens": usage.cached_tokens,
            }
        }
        if interrupted:
            meta["interrupted"] = True
        log.add("assistant", text, meta)
        if log.keep:
            self.on_saved()
            if self.warmer is not None and not interrupted:
                self.warmer.soon()  # the next question's prompt now ends with this reply
