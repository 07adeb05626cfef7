"""``aider``: the race that discards Aider's background summary, replicated, and tied to the arm.

A replica of Aider's control flow at Aider-AI/aider @ 5dc9490bb35f9729ef2c95d00a19ccd30c26339c,
``aider/coders/base_coder.py:1002-1046`` (``summarize_start``, ``summarize_worker``, ``summarize_end``,
``move_back_cur_messages``), written from the upstream code with a real `threading.Thread`, and
``format_chat_chunks``' use of it (:1278-1279: ``summarize_end()``, then ``chunks.done = done_messages``).
``move_back_cur_messages`` moves the exchange to ``done_messages``, starts the worker, and only then
appends the commit message and ``"Ok."`` to the same list in place (:1041-1045); the worker's first
statement copies ``done_messages`` (:1015), so its copy predates the append and ``summarize_end``,
which applies the summary only when ``summarizing_messages == done_messages`` (:1031), discards it.
The message is never falsy at the pin (:1589-1594 falls back to ``files_content_gpt_edits_no_repo``,
base_prompts.py:6; architect_coder.py:46 passes a constant). Aider issue #2003 (a chat history four
times the configured limit) is consistent with this. Counts are of runs, never of timing: the
discarded share is asserted under 5 %, not zero.
"""

from __future__ import annotations

import threading
from typing import Any

from compaction_lab import strategies
from compaction_lab.strategies.arms import aider as ad
from compaction_lab.strategies.base import CompactionContext
from tests.helpers import FakeSummarizer, make_session

RUNS = 300
#: What :1594 passes when the repository is absent (base_prompts.py:6); a commit gives a longer text.
COMMIT_MESSAGE = "I updated the files."


class ReplicaCoder:
    """The attributes and methods of ``Coder`` the summary's lifecycle uses (base_coder.py:510-517, 1002-1046)."""

    def __init__(self, summarizer: Any, done: list[Any], cur: list[Any], message_factory: Any = None) -> None:
        self.summarizer = summarizer
        self.done_messages = done
        self.cur_messages = cur
        self.summarizer_thread: threading.Thread | None = None
        self.summarized_done_messages: list[Any] = []
        self.summarizing_messages: list[Any] | None = None
        self.warnings: list[str] = []
        # dict(role=..., content=...) upstream; the arm's `Msg` when the replica runs on the arm's messages
        self.message = message_factory or (lambda role, content: dict(role=role, content=content))

    def summarize_start(self) -> None:  # :1002-1012
        if not self.summarizer.too_big(self.done_messages):
            return
        self.summarize_end()
        self.summarizer_thread = threading.Thread(target=self.summarize_worker)
        self.summarizer_thread.start()

    def summarize_worker(self) -> None:  # :1014-1022
        self.summarizing_messages = list(self.done_messages)
        try:
            self.summarized_done_messages = self.summarizer.summarize(self.summarizing_messages)
        except ValueError as err:
            self.warnings.append(err.args[0])

    def summarize_end(self) -> None:  # :1024-1034
        if self.summarizer_thread is None:
            return
        self.summarizer_thread.join()
        self.summarizer_thread = None
        if self.summarizing_messages == self.done_messages:
            self.done_messages = self.summarized_done_messages
        self.summarizing_messages = None
        self.summarized_done_messages = []

    def move_back_cur_messages(self, message: str | None) -> None:  # :1036-1046
        self.done_messages += self.cur_messages
        self.summarize_start()
        if message:
            self.done_messages += [self.message("user", message), self.message("assistant", "Ok.")]
        self.cur_messages = []

    def next_request_history(self) -> list[Any]:
        """``format_chat_chunks``: ``summarize_end()``, then done before cur (:1278-1279, chat_chunks.py:16-26)."""
        self.summarize_end()
        return self.done_messages + self.cur_messages


class CountingSummarizer:
    """A fake ``ChatSummary``: too big past `limit` messages; the summary is one user message and ``Ok.``."""

    def __init__(self, limit: int = 4) -> None:
        self.limit = limit

    def too_big(self, messages: list[dict[str, str]]) -> bool:
        return len(messages) > self.limit

    def summarize(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        return [dict(role="user", content=f"SUMMARY of {len(messages)}"), dict(role="assistant", content="Ok.")]


class FailingSummarizer(CountingSummarizer):
    def summarize(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        raise ValueError("summarizer unexpectedly failed for all models")


def exchange(i: int) -> list[dict[str, str]]:
    return [dict(role="user", content=f"u{i}"), dict(role="assistant", content=f"a{i}")]


def one_move(message: str | None, summarizer: Any = None) -> tuple[bool, list[dict[str, str]], ReplicaCoder]:
    """Three finished exchanges, a fourth moved back with `message`: (applied?, next request's history)."""
    coder = ReplicaCoder(summarizer or CountingSummarizer(), exchange(0) + exchange(1) + exchange(2), exchange(3))
    coder.move_back_cur_messages(message)
    coder.cur_messages = [dict(role="user", content="next question")]
    sent = coder.next_request_history()
    return sent[0]["content"].startswith("SUMMARY"), sent, coder


def test_summary_discarded_when_the_move_appends_its_message():
    """:1036-1046 with a truthy message (every caller at the pin): the worker's copy predates the append."""
    outcomes = [one_move(COMMIT_MESSAGE) for _ in range(RUNS)]
    applied = sum(a for a, _, _ in outcomes)
    assert applied < 0.05 * RUNS, f"summary applied in {applied} of {RUNS} runs"
    discarded = next(sent for a, sent, _ in outcomes if not a)
    # the next request carries the whole history, the commit message and "Ok." included
    assert discarded == [
        *exchange(0),
        *exchange(1),
        *exchange(2),
        *exchange(3),
        dict(role="user", content=COMMIT_MESSAGE),
        dict(role="assistant", content="Ok."),
        dict(role="user", content="next question"),
    ]


def test_summary_applied_every_time_without_a_message():
    """A falsy message appends nothing: the copy equals ``done_messages`` at ``summarize_end`` (:1031)."""
    outcomes = [one_move(None) for _ in range(RUNS)]
    assert all(a for a, _, _ in outcomes)
    assert outcomes[0][1] == [
        dict(role="user", content="SUMMARY of 8"),
        dict(role="assistant", content="Ok."),
        dict(role="user", content="next question"),
    ]


def test_failed_summary_is_discarded_too_when_the_move_appends():
    """The worker only warns (:1018-1019); ``summarize_end`` keeps ``done_messages``, as for a summary (:1031)
    -- with no append it would replace them by the empty result (the applied failure, ``done_dropped``)."""
    kept = [one_move(COMMIT_MESSAGE, FailingSummarizer()) for _ in range(RUNS)]
    assert sum(len(sent) == 1 for _, sent, _ in kept) < 0.05 * RUNS  # [next question] alone: the history dropped
    assert all(c.warnings for _, _, c in kept)
    _, dropped, _ = one_move(None, FailingSummarizer())
    assert dropped == [dict(role="user", content="next question")]


def test_summary_applied_when_no_move_follows_the_start():
    """The restore path (:519-523) starts a summary with nothing appended after it: the first request applies it."""
    for _ in range(RUNS):
        coder = ReplicaCoder(CountingSummarizer(), exchange(0) + exchange(1) + exchange(2), [])
        coder.summarize_start()
        assert coder.next_request_history()[0]["content"] == "SUMMARY of 6"


# =========================================================================== the replica and the arm


def chat(turns: int = 40, size: int = 100):
    items: list[tuple[str, str]] = []
    for i in range(turns):
        items += [("user", f"u{i}:" + " word" * size), ("assistant", f"a{i}:" + " word" * size)]
    items += [("user", "final question"), ("assistant", "working on it")]
    return make_session(items)


def _replica_on_our_strategy(session, ctx: CompactionContext, message: str | None) -> list[dict[str, str]]:
    """Run the replica on the arm's own messages and summariser (`ChatSummary`, the model answering "S").

    The last finished exchange is ``cur_messages`` when its reply's edits are applied; it is moved back with
    `message`; the next request carries the done history (commit pair removed: no log holds it) and the
    arm's exchange in progress.
    """
    done, cur = ad.split_current(ad.to_messages(ad.live_history(session, len(session.records), ctx), ctx), ctx)
    last = max(i for i, m in enumerate(done) if m.real_user)
    summ = ad.ChatSummary(
        ad.max_chat_history_tokens(ctx),
        lambda m: ad.message_tokens(m, ctx),
        lambda ms: ad.messages_tokens(ms, ctx),
        [lambda content, head: "S"],
        ctx.input_limit or ctx.window,
    )
    coder = ReplicaCoder(
        summ, list(done[:last]), list(done[last:]), lambda role, text: ad.Msg(role, [("tail", text, None, None)])
    )
    coder.move_back_cur_messages(message)
    coder.cur_messages = list(cur)
    sent = coder.next_request_history()
    pair = [coder.message("user", message), coder.message("assistant", "Ok.")] if message else []
    return [m.as_dict() for m in sent if m not in pair]


def _arm(session, **params):
    ctx = CompactionContext(summarizer=FakeSummarizer("S"), params=params)
    p = strategies.compact(session, "aider", None, ctx)
    return p, p.messages()[1:]  # after the system message (the tools go with the call shape)


def test_the_arms_default_is_the_replicas_outcome():
    """Mode "auto" (the background summary): where the replica discards, the default projection is the
    unsummarised history; where it applies (no message), ``aider_summary="applied"`` is its result."""
    s = chat()
    ctx = CompactionContext(summarizer=FakeSummarizer("S"))
    discarded = [_replica_on_our_strategy(s, ctx, COMMIT_MESSAGE) for _ in range(100)]
    p, sent = _arm(s)
    assert p.notes["compaction_failed"] == ad.SUMMARY_DISCARDED and not p.notes["summary_applied"]
    assert sum(d != sent for d in discarded) < 5
    assert len(sent) == 82 and sent[0]["content"].startswith("u0:")  # every message, the first kept
    applied, sent_applied = _arm(s, aider_summary="applied")
    assert _replica_on_our_strategy(s, ctx, None) == sent_applied
    assert sent_applied[0]["content"] == ad.SUMMARY_PREFIX + "S" and applied.notes["summary_applied"]


def test_the_switch_path_is_applied_in_both_settings():
    """base_coder.py:155-168: ``summarize_all`` runs in the calling thread, nothing races: applied."""
    s = chat()
    default, sent = _arm(s, mode="switch")
    applied, sent_applied = _arm(s, mode="switch", aider_summary="applied")
    assert sent == sent_applied and default.segments == applied.segments
    assert sent[0]["content"] == ad.SUMMARY_PREFIX + "S" and default.notes["summary_applied"]
    assert "compaction_failed" not in default.notes
