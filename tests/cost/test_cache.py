"""Prefix-cache simulators: each rule pinned on small hand-made token sequences, then the cache-shape experiment."""

from __future__ import annotations

import numpy as np
import pytest

from compaction_lab.core.projection import SummaryRequest
from compaction_lab.core.shapes import CallShape
from compaction_lab.core.tokens import counter
from compaction_lab.cost import cache
from compaction_lab.cost.cache import (
    AnthropicCache,
    CacheResult,
    CacheSimulator,
    DeepSeekCache,
    NoCache,
    OpenAICache,
    cache_shape_experiment,
    get_simulator,
    request_layout,
    request_tokens,
)
from compaction_lab.endpoints.prices import load_price_table, price
from compaction_lab.ingest import synthetic
from compaction_lab.strategies.arms.codex import request_messages


def seq(start: int, n: int) -> list[int]:
    """n distinct token ids; sequences from different starts share nothing."""
    return list(range(start, start + n))


# --------------------------------------------------------------------------- OpenAI


def test_openai_caches_nothing_below_1024_tokens():
    sim = OpenAICache()
    short = seq(0, 1000)
    assert sim.send(short) == CacheResult(1000, 0, 0, 0)
    assert sim.send(short).cached_tokens == 0  # identical, but too short
    long = seq(0, 3000)
    sim.send(long)
    # 1,000 shared tokens round down to 896 < 1,024: nothing.
    assert sim.send(seq(0, 1000) + seq(50_000, 2000)).cached_tokens == 0


@pytest.mark.parametrize("common, cached", [(1024, 1024), (1151, 1024), (1152, 1152), (2000, 1920), (2999, 2944)])
def test_openai_hits_in_128_token_steps_up_to_the_first_mismatch(common, cached):
    sim = OpenAICache()
    sim.send(seq(0, 3000))
    r = sim.send(seq(0, common) + seq(50_000, 500))
    assert r.cached_tokens == cached and r.cache_write_tokens == 0 and r.input_tokens == common + 500


def test_openai_identical_request_and_unstored_output():
    sim = OpenAICache()
    prompt, reply = seq(0, 3000), seq(90_000, 400)
    assert sim.send(prompt, reply).output_tokens == 400
    assert sim.send(prompt).cached_tokens == 2944
    # The reply was never sent as input, so only the prompt's prefix is cached.
    assert sim.send(prompt + reply + seq(95_000, 10)).cached_tokens == 2944


def test_openai_ttl_expiry_and_refresh():
    sim = OpenAICache(ttl_seconds=600)
    prompt = seq(0, 2048)
    sim.send(prompt, now=0)
    assert sim.send(prompt, now=600).cached_tokens == 2048  # still alive, and refreshed at 600
    assert sim.send(prompt, now=1100).cached_tokens == 2048  # 500 s after the refresh
    assert sim.send(prompt, now=1701).cached_tokens == 0  # 601 s after the last use: expired
    sim.reset()
    assert sim.send(prompt, now=1702).cached_tokens == 0


# --------------------------------------------------------------------------- DeepSeek


def test_deepseek_hits_whole_units_only():
    sim = DeepSeekCache(unit=64)
    a = seq(0, 100)
    sim.send(a)  # units at 64 (interval) and 100 (end of input)
    # 90 tokens in common: the longest whole unit inside them is 64, not 90.
    assert sim.send(a[:90] + seq(5_000, 30)).cached_tokens == 64
    # A + B then A + B + C: the A + B unit (100 tokens, not a multiple of 64) hits whole.
    assert sim.send(a + seq(6_000, 20)).cached_tokens == 100


def test_deepseek_miss_stores_the_common_prefix_for_a_third_request():
    sim = DeepSeekCache(unit=64)
    a = seq(0, 40)
    sim.send(a + seq(1_000, 30))  # units at 64 and 70, none inside A
    assert sim.send(a + seq(2_000, 30)).cached_tokens == 0  # A + C: no unit fits inside A: miss
    assert sim.send(a + seq(3_000, 30)).cached_tokens == 40  # A + D hits the stored common prefix A


def test_deepseek_stores_the_output_end():
    sim = DeepSeekCache(unit=64)
    prompt, reply = seq(0, 100), seq(9_000, 50)
    r = sim.send(prompt, reply)
    assert r == CacheResult(100, 0, 0, 50)
    # The next turn re-sends prompt + reply: the end-of-output unit (150 tokens) hits.
    assert sim.send(prompt + reply + seq(10_000, 7)).cached_tokens == 150


def test_deepseek_interval_units_inside_long_inputs_and_reset():
    sim = DeepSeekCache(unit=64)
    sim.send(seq(0, 1000))
    assert sim.send(seq(0, 700) + seq(20_000, 300)).cached_tokens == 640
    sim.reset()
    assert sim.send(seq(0, 1000)).cached_tokens == 0


def test_deepseek_long_sequences_are_fast():
    sim = DeepSeekCache()
    big = seq(0, 200_000)
    sim.send(big)
    assert sim.send(big + seq(300_000, 100)).cached_tokens == 200_000


def _conversation(rng_seed: int, turns: int = 6) -> list[tuple[list[int], list[int]]]:
    """Requests of a growing conversation (each re-sends the last with its reply), with branches and a restart."""
    import random

    rng = random.Random(rng_seed)
    out: list[tuple[list[int], list[int]]] = []
    history: list[int] = []
    for t in range(turns):
        history = history + [rng.randrange(50_000) for _ in range(rng.randrange(300, 1500))]
        reply = [rng.randrange(50_000) for _ in range(rng.randrange(0, 120))]
        out.append((list(history), reply))
        if t == 3:  # a compaction: a different, shorter request, then growth from it
            history = history[: rng.randrange(1100, 1500)] + [7] * 90
        else:
            history = history + reply
    return out


@pytest.mark.parametrize("name", ["deepseek", "openai", "anthropic"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_key_chains_reused_from_earlier_requests_serve_identically(name, seed):
    # A request's key chain starts from a recent chain over its prefix (`prefix_keys`); the simulator must
    # serve exactly as with chains computed from scratch.
    conv = _conversation(seed)

    def served(reuse: bool) -> list[CacheResult]:
        sim = cache.get_simulator(name)
        out = []
        for tokens, reply in conv:
            if not reuse:
                cache._RECENT.clear()
            out.append(sim.send(tokens, reply, breakpoints=[len(tokens)]))
        return out

    assert served(reuse=True) == served(reuse=False)
    assert any(r.cached_tokens for r in served(reuse=True))  # the conversation does hit


def test_a_key_chain_extended_from_a_prefix_equals_one_from_scratch():
    tokens = seq(0, 1000)
    base = cache._PrefixKeys(tokens[:300], 64)
    fresh, extended = cache._PrefixKeys(tokens, 64), cache._PrefixKeys(tokens, 64, base)
    assert extended.chain == fresh.chain and len(fresh.chain) == 1000 // 64 + 1
    assert extended.key(777) == fresh.key(777)
    cache._RECENT.clear()
    cache.prefix_keys(tokens[:300], 64)
    assert cache._longest_known_prefix(cache._as_array(tokens), 64).n == 300
    assert cache._longest_known_prefix(cache._as_array(seq(5, 1000)), 64) is None  # not a prefix
    assert cache._longest_known_prefix(cache._as_array(tokens), 128) is None  # another chunk


def test_deepseek_trie_insert_skips_only_what_is_stored():
    # The trie after sends that skip the stored run equals the trie of inserting every chunk.
    sim = DeepSeekCache(unit=64)
    conv = _conversation(9)
    for tokens, reply in conv:
        sim.send(tokens, reply)
    full: dict[bytes, set[bytes]] = {b"": set()}
    for tokens, reply in conv:
        keys = cache._PrefixKeys(tokens + reply, 64)
        for m in range(len(keys.chain)):
            nxt = keys.raw[m * 64 * 8 : (m + 1) * 64 * 8]
            full.setdefault(keys.chain[m], set())
            if nxt:
                full[keys.chain[m]].add(nxt)
    assert sim._children == full
    expected = sorted({k for tokens, reply in conv for k in range(64, len(tokens) + len(reply) + 1, 64)})
    assert [k for k in sim._lengths if k % 64 == 0] == expected


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_writes_then_reads_at_breakpoints():
    sim = AnthropicCache()
    prefix, rest = seq(0, 1500), seq(10_000, 1500)
    r = sim.send(prefix + rest, breakpoints=[1500, 3000])
    assert r == CacheResult(3000, 0, 3000, 0)  # written up to the furthest breakpoint
    r = sim.send(prefix + rest, breakpoints=[1500, 3000])
    assert (r.cached_tokens, r.cache_write_tokens) == (3000, 0)
    # Same prefix, new rest: the 1,500-token breakpoint prefix is read, the rest written.
    r = sim.send(prefix + seq(20_000, 1500), breakpoints=[1500, 3000])
    assert (r.cached_tokens, r.cache_write_tokens) == (1500, 1500)
    # A longer conversation finds the earlier end-of-messages prefix.
    r = sim.send(prefix + rest + seq(30_000, 500), breakpoints=[1500, 3500])
    assert (r.cached_tokens, r.cache_write_tokens) == (3000, 500)


def test_anthropic_no_breakpoints_no_caching():
    sim = AnthropicCache()
    tokens = seq(0, 3000)
    assert sim.send(tokens) == CacheResult(3000, 0, 0, 0)
    assert sim.send(tokens) == CacheResult(3000, 0, 0, 0)
    # Nothing was written, so a later request with breakpoints reads nothing either.
    assert sim.send(tokens, breakpoints=[3000]).cached_tokens == 0


def test_anthropic_min_length_and_at_most_four_breakpoints():
    sim = AnthropicCache(min_tokens=1024)
    tokens = seq(0, 800)
    assert sim.send(tokens, breakpoints=[500, 800]).cache_write_tokens == 0  # below the minimum
    assert sim.send(tokens, breakpoints=[500, 800]).cached_tokens == 0
    long = seq(0, 5000)
    assert sim.send(long, breakpoints=[1000, 2000, 3000, 5000]).cache_write_tokens == 5000
    with pytest.raises(ValueError, match="at most 4"):
        sim.send(long, breakpoints=[1000, 2000, 3000, 4000, 5000])
    with pytest.raises(ValueError, match="breakpoints must lie"):
        sim.send(long, breakpoints=[6000])


def test_anthropic_ttl_and_the_write_premium_in_price():
    five = AnthropicCache(ttl="5m")
    tokens = seq(0, 2000)
    five.send(tokens, breakpoints=[2000], now=0)
    assert five.send(tokens, breakpoints=[2000], now=300).cached_tokens == 2000
    r = five.send(tokens, breakpoints=[2000], now=601)  # 301 s after the last read
    assert (r.cached_tokens, r.cache_write_tokens) == (0, 2000)
    hour = AnthropicCache(ttl="1h")
    first = hour.send(tokens, breakpoints=[2000], now=0)
    assert hour.send(tokens, breakpoints=[2000], now=3000).cached_tokens == 2000
    table = load_price_table("claude-sonnet-4-6")
    cost = price(
        table,
        input_tokens=first.input_tokens,
        cached_tokens=first.cached_tokens,
        cache_write_tokens=first.cache_write_tokens,
        output_tokens=0,
        ttl=hour.ttl,
    )
    assert cost == pytest.approx(2000 * 6.00 / 1e6)
    with pytest.raises(ValueError, match="ttl"):
        AnthropicCache(ttl="10m")


# --------------------------------------------------------------------------- none, registry


def test_nocache_misses_everything():
    sim = NoCache()
    tokens = seq(0, 5000)
    for _ in range(2):
        assert sim.send(tokens, seq(9_000, 10), breakpoints=[5000]) == CacheResult(5000, 0, 0, 10)


def test_registry_and_tables():
    assert cache.SIMULATORS == ("deepseek", "openai", "anthropic", "none")
    for name in cache.SIMULATORS:
        sim = get_simulator(name)
        assert sim.name == name and isinstance(sim, CacheSimulator)
    assert get_simulator("deepseek", unit=128).unit == 128
    with pytest.raises(ValueError, match="deepseek"):
        get_simulator("gemini")


# --------------------------------------------------------------------------- the request


def test_request_tokens_order_and_prefix():
    call_shape = CallShape.default()
    enc = counter()
    msgs = [{"role": "user", "content": "Run the tests."}, {"role": "assistant", "content": "All 12 pass."}]
    tokens = request_tokens(call_shape.system_prompt, call_shape.tools, msgs)
    expected = (
        enc.encode(call_shape.system_prompt)
        + enc.encode(call_shape.tools_text())
        + enc.encode("user: Run the tests.")
        + enc.encode("assistant: All 12 pass.")
    )
    assert tokens == expected
    head = request_tokens(call_shape.system_prompt, call_shape.tools, [])
    assert tokens[: len(head)] == head  # the request without messages is an exact prefix
    assert request_tokens("sys", [], msgs) == enc.encode("sys") + expected[len(head) :]  # no tools: nothing
    lay = request_layout(call_shape.system_prompt, call_shape.tools, msgs)
    assert lay.breakpoints() == (len(enc.encode(call_shape.system_prompt)), len(head), len(tokens))
    assert lay.message_ends[-1] == len(tokens)
    req = SummaryRequest(
        strategy="s",
        shape="prefix-shared",
        system=call_shape.system_prompt,
        tools=call_shape.tools,
        messages=tuple(msgs),
        template="t",
        max_output_tokens=100,
    )
    assert cache.request_tokens_from_summary_request(req) == tokens


# --------------------------------------------------------------------------- the cache-shape experiment


@pytest.fixture(scope="module")
def session_request():
    call_shape = CallShape.default()
    chain = synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=1, window_tokens=8_000))[0]
    return call_shape, request_messages(list(chain.session.records), call_shape.system_prompt)


def _ratios(df):
    return {(r.variant, r.simulator): r.hit_ratio for r in df.itertuples()}


def test_cache_shape_experiment_on_a_realistic_request(session_request):
    call_shape, msgs = session_request
    df = cache_shape_experiment(call_shape.system_prompt, call_shape.tools, msgs)
    assert list(df.columns[:5]) == ["variant", "simulator", "input_tokens", "cached_tokens", "hit_ratio"]
    assert len(df) == len(cache.CACHE_SHAPE_VARIANTS) * len(cache.SIMULATORS)
    assert df["input_tokens"].min() > 5_000
    ratios = _ratios(df)
    for sim in ("deepseek", "openai", "anthropic"):
        assert ratios[("identical", sim)] > 0.9
        for variant in ("system_substituted", "tools_dropped", "line_added_at_top"):
            assert ratios[(variant, sim)] == 0, (variant, sim)
    assert all(ratios[(v, "none")] == 0 for v in cache.CACHE_SHAPE_VARIANTS)


def test_cache_shape_experiment_request_order_decides_tools_dropped(session_request):
    call_shape, msgs = session_request
    # A ~1,500-token system prompt before the tools: dropping the tools keeps it cacheable.
    system = "\n".join([call_shape.system_prompt] * 26)
    n_sys = len(counter().encode(system))
    assert 1_300 < n_sys < 1_700
    df = cache_shape_experiment(system, call_shape.tools, msgs, simulators=["deepseek", "openai", "anthropic"])
    cached = {(r.variant, r.simulator): r.cached_tokens for r in df.itertuples()}
    assert cached[("tools_dropped", "openai")] == n_sys // 128 * 128
    assert cached[("tools_dropped", "anthropic")] == n_sys  # the end-of-system breakpoint
    assert cached[("tools_dropped", "deepseek")] == n_sys // 64 * 64
    for sim in ("deepseek", "openai", "anthropic"):
        assert cached[("system_substituted", sim)] == 0 and cached[("line_added_at_top", sim)] == 0
    # Anthropic's documented order (tools, then system): dropping the tools misses from token 0.
    first = cache_shape_experiment(
        system, call_shape.tools, msgs, simulators=["deepseek", "openai", "anthropic"], tools_first=True
    )
    assert (first.loc[first.variant == "tools_dropped", "cached_tokens"] == 0).all()


def test_divergence_names_the_parts_at_the_first_difference():
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file " * 20}}]
    msgs = [{"role": "user", "content": "fix the parser"}, {"role": "assistant", "content": "done"}]
    prev = cache.request_layout("You are a coding agent.", tools, msgs)
    same = cache.request_layout("You are a coding agent.", tools, msgs + [{"role": "user", "content": "summarize"}])
    d = cache.divergence(prev, same)
    assert d["shared_tokens"] == len(prev.tokens) and d["previous_part"] == "end" and d["diverges_in"] == "message 3"
    no_tools = cache.request_layout("You are a coding agent.", [], msgs)
    d = cache.divergence(prev, no_tools)
    assert d["shared_tokens"] == prev.system_end
    assert (d["previous_part"], d["diverges_in"]) == ("tool definitions", "message 1")
    other = cache.request_layout("You are a reviewer.", tools, msgs)
    d = cache.divergence(prev, other)
    assert d["diverges_in"] == d["previous_part"] == "system prompt" and d["shared_tokens"] < prev.system_end
    assert cache.shared_prefix([1, 2, 3], [1, 2, 3]) == 3 and cache.shared_prefix([], [1]) == 0
    assert cache.part_at(prev, len(prev.tokens)) == "end"


def test_a_request_series_gives_exactly_the_ids_of_each_request_built_alone():
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    msgs = [
        {"role": "user", "content": "read the config"},
        {"role": "assistant", "content": [{"type": "text", "text": "reading"}]},
        {"role": "tool", "content": "port = 8080\nhost = example.org"},
        {"role": "assistant", "content": "the port is 8080"},
    ]
    grown = {**msgs[3], "content": msgs[3]["content"] + "\n\nand the host example.org"}
    series = cache.RequestSeries("You are terse.", tools)
    # growing, a last message that grew (an entry's next block joins it), shrinking, then a fork
    for seq in (msgs[:1], msgs[:3], msgs, [*msgs[:3], grown], msgs[:2], [msgs[0], msgs[2]], []):
        ids = series.array(seq)
        want = cache.request_array("You are terse.", tools, seq)
        assert ids.dtype == np.int64 and not ids.flags.writeable
        assert ids.tolist() == want.tolist()
    assert (series.system_end, series.tools_end) == (
        len(cache.request_array("You are terse.", [], [])),
        len(cache.request_array("You are terse.", tools, [])),
    )


def test_measured_replay_sends_the_uncompacted_request_of_every_recorded_call():
    from compaction_lab.cost import model as cost
    from compaction_lab.ingest import sources
    from compaction_lab.strategies import calibration
    from tests.helpers import PUBLIC_FIXTURES

    (session,) = [
        s
        for s in sources.gather([str(PUBLIC_FIXTURES / "claude-code")], progress=False).sessions
        if s.id.startswith("c64")
    ]
    df = cost.measured_vs_simulated(session)
    shape = CallShape.default().for_session(session)
    sim = cache.get_simulator("anthropic")
    want = []
    for _, cut, _ in calibration.usage_requests(session):
        tokens, prefix = cost.uncompacted_request(session, cut, shape, "cl100k_base")
        r = sim.send(tokens, [], breakpoints=[b for b in (prefix, len(tokens)) if 0 < b <= len(tokens)])
        want.append((r.input_tokens, r.cached_tokens))
    assert len(want) > 3 and list(zip(df["simulated_input"], df["simulated_cached"], strict=True)) == want
