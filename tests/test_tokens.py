import subprocess
import sys
import textwrap

import pytest

from compaction_lab import tokens


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
    assert c.misses == 2  # duplicates in one batch are encoded once
    c.count_many(["alpha beta", "gamma"])
    assert c.hits == 2 and c.misses == 2


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
        from compaction_lab import tokens
        print(tokens.count_tokens("offline tokenizer works"))
        """
    )
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) > 0
