"""Tokenizer backends: bpe-openai must give tiktoken's ids exactly, and the choice between them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction_lab.core import tokens
from compaction_lab.ingest import load_sessions
from tests.helpers import FIXTURES

HYPOTHESIS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def fresh_check():
    """The self-check re-run by the test, and re-run again afterwards for whoever comes next."""
    tokens._bpe_problem.cache_clear()
    yield
    tokens._bpe_problem.cache_clear()


@pytest.fixture
def no_default(monkeypatch):
    """No process default set, so the environment decides (restored after the test)."""
    monkeypatch.setattr(tokens, "_DEFAULT_TOKENIZER", None)
    monkeypatch.delenv(tokens.TOKENIZER_ENV, raising=False)


def _pair() -> tuple[tokens.TokenCounter, tokens.TokenCounter]:
    return tokens.TokenCounter(tokenizer="tiktoken"), tokens.TokenCounter(tokenizer="bpe-openai")


# --------------------------------------------------------------------------- identical ids

# Fragments a real record mixes: any character but a lone surrogate, and the runs the pre-tokenizer
# treats specially (whitespace, digits, emoji sequences, CJK, special-token strings as plain text).
_ANY = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_WHITESPACE = st.text(st.sampled_from(" \t\n\r\x0b\x0c\u00a0\u2003\u3000\u2028\x85"), min_size=1, max_size=12)
_EMOJI = st.lists(
    st.sampled_from(["😀", "👍🏽", "👨\u200d👩\u200d👧", "🏳️\u200d🌈", "🇫🇷", "1️⃣", "❤️", "\u200d", "\ufe0f", "💩"]),
    min_size=1,
    max_size=6,
).map("".join)
_CJK = st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=20)
_DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=15)
_SPECIAL = st.sampled_from(["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"])
_WORDS = st.sampled_from(["hello", " world", "it's", "'re", "'t", "def", "    return", "{", '"key":', "é", "ß"])
_FRAGMENT = st.one_of(_ANY, _WHITESPACE, _EMOJI, _CJK, _DIGITS, _SPECIAL, _WORDS)
_TEXT = st.lists(_FRAGMENT, max_size=30).map("".join)


@pytest.mark.slow
@settings(HYPOTHESIS, max_examples=400)
@given(text=_TEXT)
def test_bpe_openai_gives_tiktokens_ids_on_random_text(text):
    tik, bpe = _pair()
    assert bpe.encode(text) == tik.encode(text)


@settings(HYPOTHESIS, max_examples=12)
@given(parts=st.lists(_FRAGMENT, min_size=1, max_size=20), filler=_FRAGMENT)
def test_counts_agree_past_a_piece(parts, filler):
    """Texts longer than one `split_for_count` piece count the same with both backends."""
    unit = "".join(parts) + filler + "\n"
    text = unit * (tokens.COUNT_CHUNK_CHARS // len(unit) + 2)
    assert len(text) > tokens.COUNT_CHUNK_CHARS
    tik, bpe = _pair()
    assert bpe.count(text) == tik.count(text)


def test_counts_agree_on_blobs_cut_blindly():
    """A letter blob is cut blindly; both backends get the same pieces, so the same count."""
    import random

    letters = "".join(random.Random(5).choices("abcdefghijklmnopqrstuvwxyz", k=300_000))
    tik, bpe = _pair()
    assert bpe.count(letters) == tik.count(letters)


def test_a_piece_past_bpe_openais_token_limit_still_counts():
    """65,536 rare astral characters make ~260,000 tokens, over bpe-openai's 200,000 per call."""
    text = "".join(chr(0xF0000 + i * 7 % 60000) for i in range(150_000))
    tik, bpe = _pair()
    assert bpe.count(text) == tik.count(text) == len(tik.encoding.encode_ordinary(text))
    assert bpe.encode(text) == tik.encode(text)


def test_lone_surrogates_get_tiktokens_ids():
    tik, bpe = _pair()
    for text in ["a\ud800b", "\udfff", "x \ud83d\ude00 \ud83d y"]:
        assert bpe.encode(text) == tik.encode(text)
        assert bpe.count(text) == tik.count(text)


def _fixture_texts() -> list[str]:
    return [r.text for s in load_sessions(FIXTURES) for r in s.records]  # public/ included


def test_identical_ids_on_every_fixture_record():
    texts = _fixture_texts()
    assert len(texts) > 500  # the suite's fixtures and the shared sessions, not an empty glob
    tik, bpe = _pair()
    for text in texts:
        assert bpe.encode(text) == tik.encode(text), repr(text[:200])
    assert bpe.count_many(texts) == tik.count_many(texts)


def test_self_check_corpus_is_pinned_and_passes():
    assert 40 <= len(tokens.SELF_CHECK_TEXTS) <= 80
    assert any("<|endoftext|>" in t for t in tokens.SELF_CHECK_TEXTS)
    assert any("\u200d" in t for t in tokens.SELF_CHECK_TEXTS)
    assert tokens._bpe_problem(tokens.DEFAULT_ENCODING) is None


# --------------------------------------------------------------------------- choosing a backend


def test_resolve_tokenizer_names():
    assert tokens.TOKENIZERS == ("auto", "tiktoken", "bpe-openai")
    assert tokens.resolve_tokenizer() == "bpe-openai"  # installed here, and it passes the check
    assert tokens.resolve_tokenizer("auto", "cl100k_base") == "bpe-openai"
    assert tokens.resolve_tokenizer("tiktoken") == "tiktoken"
    assert tokens.resolve_tokenizer("bpe-openai") == "bpe-openai"


def test_unknown_tokenizer_name_is_a_clear_error():
    with pytest.raises(
        ValueError, match=r"tokenizer must be one of 'auto', 'tiktoken', 'bpe-openai'; got 'sentencepiece'"
    ):
        tokens.resolve_tokenizer("sentencepiece")
    with pytest.raises(ValueError, match="tokenizer"):
        tokens.TokenCounter(tokenizer="fast")
    with pytest.raises(ValueError, match="tokenizer"):
        tokens.set_default_tokenizer("Auto")


def test_auto_on_an_encoding_without_offline_copy_falls_back(fresh_check):
    # bpe-openai knows o200k_base but there is no tiktoken reference offline to check it against.
    assert tokens.resolve_tokenizer("auto", "o200k_base") == "tiktoken"
    with pytest.raises(tokens.EncodingUnavailable, match="no tiktoken reference"):
        tokens.resolve_tokenizer("bpe-openai", "o200k_base")
    with pytest.raises(tokens.EncodingUnavailable, match="bpe-openai has no encoding"):
        tokens.resolve_tokenizer("bpe-openai", "no_such_encoding")
    assert tokens.resolve_tokenizer("auto", "no_such_encoding") == "tiktoken"


def test_not_installed_is_reported(monkeypatch, fresh_check):
    def missing(encoding):
        raise ModuleNotFoundError("No module named 'bpe_openai'")

    monkeypatch.setattr(tokens, "_bpe_encoding", missing)
    assert tokens.resolve_tokenizer("auto") == "tiktoken"
    with pytest.raises(tokens.EncodingUnavailable, match="not installed"):
        tokens.resolve_tokenizer("bpe-openai")


class _WrongOn:
    """The real bpe-openai encoding, except one text gets wrong ids (a negative control)."""

    def __init__(self, enc, bad: str):
        self.enc, self.bad = enc, bad

    def encode_ordinary(self, text):
        ids = self.enc.encode_ordinary(text)
        return [*ids, 0] if text == self.bad else ids


def test_a_backend_that_differs_on_one_corpus_text_is_refused(monkeypatch, fresh_check, no_default):
    bad = "family 👨\u200d👩\u200d👧\u200d👦 and 🏳️\u200d🌈 ZWJ sequences"
    assert bad in tokens.SELF_CHECK_TEXTS
    real = tokens._bpe_encoding(tokens.DEFAULT_ENCODING)
    monkeypatch.setattr(tokens, "_bpe_encoding", lambda encoding: _WrongOn(real, bad))
    assert tokens.resolve_tokenizer("auto") == "tiktoken"
    assert tokens.TokenCounter().tokenizer == "tiktoken"
    with pytest.raises(tokens.EncodingUnavailable, match="self-check") as err:
        tokens.resolve_tokenizer("bpe-openai")
    assert repr(bad)[:40] in str(err.value)  # the differing text is named
    with pytest.raises(tokens.EncodingUnavailable):
        tokens.TokenCounter(tokenizer="bpe-openai")


def test_a_backend_that_raises_is_refused(monkeypatch, fresh_check):
    class Raising:
        def encode_ordinary(self, text):
            raise RuntimeError("boom")

    monkeypatch.setattr(tokens, "_bpe_encoding", lambda encoding: Raising())
    assert tokens.resolve_tokenizer("auto") == "tiktoken"
    with pytest.raises(tokens.EncodingUnavailable, match="RuntimeError: boom"):
        tokens.resolve_tokenizer("bpe-openai")


def test_self_check_runs_once_per_encoding(monkeypatch, fresh_check):
    calls = []
    real = tokens._bpe_encoding

    def spy(encoding):
        calls.append(encoding)
        return real(encoding)

    monkeypatch.setattr(tokens, "_bpe_encoding", spy)
    for _ in range(3):
        tokens.resolve_tokenizer("auto")
        tokens.resolve_tokenizer("bpe-openai")
    assert calls == ["cl100k_base"]


# --------------------------------------------------------------------------- the process default


def test_default_is_auto_and_settable(monkeypatch, no_default):
    assert tokens.default_tokenizer() == "auto"
    tokens.set_default_tokenizer("tiktoken")
    assert tokens.default_tokenizer() == "tiktoken"
    assert tokens.TokenCounter().tokenizer == "tiktoken"
    assert tokens.counter().tokenizer == "tiktoken"
    tokens.set_default_tokenizer(None)
    assert tokens.default_tokenizer() == "auto"


def test_default_comes_from_the_environment(monkeypatch, no_default):
    monkeypatch.setenv(tokens.TOKENIZER_ENV, "tiktoken")
    assert tokens.default_tokenizer() == "tiktoken"
    assert tokens.counter().tokenizer == "tiktoken"
    monkeypatch.setenv(tokens.TOKENIZER_ENV, "bpe-openai")
    assert tokens.counter().tokenizer == "bpe-openai"
    tokens.set_default_tokenizer("tiktoken")  # an explicit setting wins over the environment
    assert tokens.default_tokenizer() == "tiktoken"


def test_an_invalid_environment_value_names_the_variable(monkeypatch, no_default):
    monkeypatch.setenv(tokens.TOKENIZER_ENV, "turbo")
    with pytest.raises(ValueError, match="COMPACTION_LAB_TOKENIZER.*'turbo'"):
        tokens.default_tokenizer()
    with pytest.raises(ValueError, match="COMPACTION_LAB_TOKENIZER"):
        tokens.TokenCounter()


# --------------------------------------------------------------------------- shared counters


def test_counter_is_shared_per_encoding_and_resolved_backend(no_default):
    assert tokens.counter() is tokens.counter("cl100k_base") is tokens.counter(tokenizer="auto")
    assert tokens.counter().requested == "auto"
    bpe = tokens.counter(tokenizer="bpe-openai")
    assert bpe is not tokens.counter() and bpe.tokenizer == "bpe-openai"
    tik = tokens.counter(tokenizer="tiktoken")
    assert tik is not tokens.counter() and tik is tokens.counter("cl100k_base", "tiktoken")
    assert tik.tokenizer == "tiktoken"
    assert tokens.count_tokens("hello world", tokenizer="tiktoken") == tokens.count_tokens("hello world") == 2


def test_bpe_counter_uses_one_thread_and_counts_hits():
    c = tokens.TokenCounter(threads=4, tokenizer="bpe-openai")
    assert c.tokenizer == "bpe-openai" and c.threads == 1
    assert tokens.TokenCounter(threads=3, tokenizer="tiktoken").threads == 3
    c.count_many(["alpha beta", "alpha beta", "gamma"])
    c.count_many(["alpha beta"])
    assert (c.hits, c.misses) == (2, 2)  # the batch's second "alpha beta" and the later one
    assert c._pool is None


def test_auto_moves_to_bpe_openai_only_for_a_large_workload(monkeypatch, no_default):
    """A few texts (a notebook's) never pay bpe-openai's load; a tally's worth of text moves to it, same counts."""
    monkeypatch.setattr(tokens, "AUTO_BPE_AFTER_CHARS", 10_000)
    c = tokens.TokenCounter(tokenizer="auto")
    assert (c.requested, c.tokenizer, c._count) == ("auto", "tiktoken", None)
    small = ["alpha beta", "gamma"]
    assert c.count_many(small) == [2, 1] and c.tokenizer == "tiktoken"
    big = [f"line {i}: " + "lorem ipsum dolor sit amet " * 20 for i in range(40)]
    expected = [len(tokens.get_encoding().encode_ordinary(t)) for t in big]
    assert c.count_many(big) == expected and c.tokenizer == "bpe-openai" and c.threads == 1


def test_auto_stays_on_tiktoken_when_bpe_openai_fails_its_check(monkeypatch, no_default):
    monkeypatch.setattr(tokens, "AUTO_BPE_AFTER_CHARS", 10)
    monkeypatch.setattr(tokens, "_bpe_problem", lambda encoding: "refused for the test")
    c = tokens.TokenCounter(tokenizer="auto")
    assert c.count_many(["a fairly long text of words"]) == [6] and c.tokenizer == "tiktoken"


def test_the_pinned_self_check_ids_are_tiktokens():
    reference = tokens.get_encoding(tokens.DEFAULT_ENCODING)
    assert tokens.self_check_ids_sha256(reference) == tokens.SELF_CHECK_IDS_SHA256[tokens.DEFAULT_ENCODING]


def test_the_self_check_and_counting_need_no_tiktoken_encoding(monkeypatch, fresh_check):
    """bpe-openai matching the pinned ids is checked, and counts, without tiktoken's encoding built (~0.2 s)."""

    texts = ["hello world", "a line of text, 42 words\n" * 5000]  # the second one counted in pieces
    expected = [len(tokens.get_encoding().encode_ordinary(t)) for t in texts]

    def not_built(name=tokens.DEFAULT_ENCODING):
        raise AssertionError("tiktoken's encoding was built")

    monkeypatch.setattr(tokens, "get_encoding", not_built)
    assert tokens._bpe_problem(tokens.DEFAULT_ENCODING) is None
    c = tokens.TokenCounter(tokenizer="bpe-openai")
    assert c.count_many(texts) == expected
    with pytest.raises(AssertionError, match="built"):
        c.encoding  # noqa: B018  # built when asked for, not before
