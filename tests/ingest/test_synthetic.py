"""Tests of the synthetic chain generator: determinism, manifest, planting guarantees, realism."""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
from collections import Counter

import pytest

from compaction_lab.core import tokens
from compaction_lab.core.session import POINTER_OF_KIND, Session
from compaction_lab.ingest import synthetic as syn
from compaction_lab.ingest.synthetic import (
    CATEGORIES,
    DEFAULT_MANIFEST_PATH,
    PlantedFact,
    SyntheticChain,
    SyntheticSpec,
    build_manifest,
    chain_digest,
    generate_chain,
    generate_chains,
    read_manifest,
    write_chains,
    write_manifest,
)

SMALL = SyntheticSpec(window_tokens=4000, n_chains=2)
# Four chains so the four project themes are all exercised; 30k tokens keeps it quick.
MID = SyntheticSpec(window_tokens=30_000, n_chains=4)

FOLLOWUP_CUES = (
    "earlier",
    "before",
    "you said",
    "you mentioned",
    "remind me",
    "what was",
    "last time",
    "previously",
    "again",
)


@pytest.fixture(scope="module")
def small_chains() -> list[SyntheticChain]:
    return generate_chains(SMALL)


@pytest.fixture(scope="module")
def mid_chains() -> list[SyntheticChain]:
    return generate_chains(MID)


@pytest.fixture(scope="module")
def default_chains() -> list[SyntheticChain]:
    return generate_chains(SyntheticSpec())


def _joined(chain: SyntheticChain) -> str:
    return "\n\x00\n".join(r.text for r in chain.session.records)


def _facts_jsonable(chain: SyntheticChain) -> list[dict]:
    return [dataclasses.asdict(f) for f in (*chain.facts, *chain.decoys)]


# -- determinism and the manifest ---------------------------------------------------------


def test_same_profile_gives_identical_bytes_and_facts():
    a, b = generate_chains(SMALL), generate_chains(SMALL)
    assert [c.session.to_jsonl() for c in a] == [c.session.to_jsonl() for c in b]
    assert [_facts_jsonable(c) for c in a] == [_facts_jsonable(c) for c in b]
    assert [chain_digest(c) for c in a] == [chain_digest(c) for c in b]


def test_different_seed_gives_different_chains():
    a = generate_chains(SMALL)
    b = generate_chains(dataclasses.replace(SMALL, seed=SMALL.seed + 1))
    for x, y in zip(a, b, strict=False):
        assert x.session.to_jsonl() != y.session.to_jsonl()
        assert chain_digest(x) != chain_digest(y)


def test_a_chain_does_not_depend_on_the_others():
    alone = generate_chain(SMALL, 1)
    assert alone.session.to_jsonl() == generate_chains(SMALL)[1].session.to_jsonl()
    assert alone.session.id == f"syn-{SMALL.seed}-1"


def test_committed_manifest_matches_fresh_regeneration(default_chains):
    committed = read_manifest(DEFAULT_MANIFEST_PATH)
    fresh = build_manifest(SyntheticSpec(), default_chains)
    assert committed == fresh
    assert committed["generator_version"] == syn.GENERATOR_VERSION
    assert committed["profile"] == dataclasses.asdict(SyntheticSpec())
    assert list(committed["chains"]) == [f"syn-7-{i}" for i in range(6)]


def test_manifest_round_trip(tmp_path, small_chains):
    m = build_manifest(SMALL, small_chains)
    path = write_manifest(m, tmp_path / "m" / "manifest.json")
    assert read_manifest(path) == m
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in m["chains"].values())


def test_write_chains_round_trip(tmp_path, small_chains):
    paths = write_chains(small_chains, tmp_path)
    assert [p.name for p in paths] == [f"{c.session.id}.jsonl" for c in small_chains] + ["facts.jsonl"]
    for c, p in zip(small_chains, paths, strict=False):
        assert p.read_bytes() == c.session.to_jsonl()
        assert Session.from_jsonl(p.read_bytes()).to_jsonl() == c.session.to_jsonl()
    lines = paths[-1].read_text(encoding="utf-8").splitlines()
    rows = [json.loads(ln) for ln in lines]
    assert len(rows) == sum(len(c.facts) + len(c.decoys) for c in small_chains)
    assert {r["fact_id"] for r in rows} == {f.fact_id for c in small_chains for f in (*c.facts, *c.decoys)}


def test_from_mapping_ignores_unknown_keys():
    p = SyntheticSpec.from_mapping(
        {
            "seed": "11",
            "window_tokens": 5000,
            "n_chains": 3,
            "encoding": "cl100k_base",
            "reader": "verbatim",
            "strategies": ["codex"],
            "pointer_mix": {"user": 0.1},
        }
    )
    assert p == SyntheticSpec(seed=11, n_chains=3, window_tokens=5000)
    assert SyntheticSpec.from_mapping({}) == SyntheticSpec()


def test_profile_rejects_nonsense():
    with pytest.raises(ValueError):
        SyntheticSpec(window_tokens=0)
    with pytest.raises(ValueError):
        SyntheticSpec(n_chains=-1)


# -- structure ----------------------------------------------------------------------------


def test_session_metadata_records_generator_params(small_chains):
    for i, c in enumerate(small_chains):
        s = c.session
        assert s.id == f"syn-{SMALL.seed}-{i}"
        assert s.source_format == "synthetic" and s.source_path is None
        md = s.metadata
        assert (md["seed"], md["index"], md["window_tokens"], md["encoding"]) == (SMALL.seed, i, 4000, "cl100k_base")
        assert md["generator"] == syn.GENERATOR_VERSION


def test_small_chains_grow_to_the_window_and_stop(small_chains):
    counter = tokens.counter(SMALL.encoding)
    for c in small_chains:
        recs = c.session.records
        counts = counter.count_many([r.text for r in recs])
        assert sum(counts) >= SMALL.window_tokens
        assert recs[-1].kind != "tool_call"
        # The chain stops at the first record that reaches the window; the only records after
        # it are the outputs of tool calls already open at that point.
        running, cross = 0, None
        for i, n in enumerate(counts):
            running += n
            if running >= SMALL.window_tokens:
                cross = i
                break
        assert cross is not None
        open_calls = set()
        for r in recs[: cross + 1]:
            if r.kind == "tool_call":
                open_calls.add(r.call_id)
            elif r.kind == "tool_output":
                open_calls.discard(r.call_id)
        for r in recs[cross + 1 :]:
            assert r.kind == "tool_output" and r.call_id in open_calls
            open_calls.discard(r.call_id)
        assert not open_calls


def test_records_are_strictly_ordered_with_entries_and_timestamps(mid_chains):
    for c in mid_chains:
        recs = c.session.records
        assert [r.source_order for r in recs] == list(range(len(recs)))
        assert recs[0].kind == "system" and 200 <= len(recs[0].text) <= 1500
        stamps = [r.timestamp for r in recs]
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t) for t in stamps)
        assert stamps == sorted(stamps)
        blocks: dict[str, list] = {}
        for r in recs:
            blocks.setdefault(r.entry_id, []).append(r)
        for _entry, rs in blocks.items():
            assert [r.block_index for r in rs] == list(range(len(rs)))
            # An entry's records are contiguous.
            assert rs[-1].source_order - rs[0].source_order == len(rs) - 1
            if rs[0].kind in ("user", "tool_output", "system"):
                assert len(rs) == 1
            else:
                assert {r.kind for r in rs} <= {"assistant", "reasoning", "tool_call"}


def test_every_tool_output_answers_an_earlier_call(mid_chains, small_chains):
    for c in (*mid_chains, *small_chains):
        calls = {}
        answered = set()
        for r in c.session.records:
            if r.kind == "tool_call":
                assert r.call_id and r.call_id not in calls
                assert r.text.startswith(f"{r.tool} {{")
                json.loads(r.text[len(r.tool) + 1 :])  # arguments are JSON
                calls[r.call_id] = r
            elif r.kind == "tool_output":
                call = calls.get(r.call_id)
                assert call is not None, f"output {r.entry_id} has no earlier call"
                assert (call.tool, call.target) == (r.tool, r.target)
                assert r.call_id not in answered
                answered.add(r.call_id)
        assert answered == set(calls), "every call is answered"


# -- planted facts and decoys -------------------------------------------------------------


def test_planted_values_occur_exactly_once_inside_their_entry(mid_chains, small_chains):
    for c in (*mid_chains, *small_chains):
        text = _joined(c)
        by_order = {r.source_order: r for r in c.session.records}
        for f in c.facts:
            assert not f.is_decoy
            assert text.count(f.value) == 1, f
            rec = by_order[f.source_order]
            assert rec.entry_id == f.entry_id and f.value in rec.text
            assert f.pointer == POINTER_OF_KIND[rec.kind]
            assert f.category in CATEGORIES
            assert f.session_id == c.session.id


def test_values_are_unguessable_and_questions_do_not_leak_them(mid_chains):
    for c in mid_chains:
        for f in (*c.facts, *c.decoys):
            assert f.value.lower() not in f.question.lower()
            assert f.question.endswith("?")
            # Enough entropy: at least six letters/digits, at least one digit.
            assert len(re.sub(r"[^0-9A-Za-z]", "", f.value)) >= 6 and re.search(r"\d", f.value), f.value
        qs = [f.question for f in (*c.facts, *c.decoys)]
        assert len(qs) == len(set(qs)), "questions are unambiguous within a chain"
        ids = [f.fact_id for f in (*c.facts, *c.decoys)]
        assert len(ids) == len(set(ids))


def test_decoys_occur_in_no_chain(mid_chains):
    texts = [_joined(c) for c in mid_chains]
    for c in mid_chains:
        assert len(c.decoys) == MID.decoys_per_chain
        for d in c.decoys:
            assert d.is_decoy and d.entry_id == "" and d.source_order == -1
            assert d.category in CATEGORIES and d.pointer in ("user", "assistant", "tool")
            assert all(d.value not in t for t in texts)


def test_verification_rejects_broken_guarantees(small_chains):
    c = small_chains[0]
    f = c.facts[0]
    present = c.session.records[0].text[:40]
    with pytest.raises(ValueError, match="decoy"):
        syn._verify_chain(dataclasses.replace(c, decoys=(dataclasses.replace(f, value=present, is_decoy=True),)))
    with pytest.raises(ValueError, match="occurs 0 times"):
        syn._verify_chain(dataclasses.replace(c, facts=(dataclasses.replace(f, value="never-there-9x9x9x"),)))


def test_all_pointer_classes_and_categories_present(mid_chains):
    for c in mid_chains:
        assert {f.pointer for f in c.facts} == {"user", "assistant", "tool"}
        assert {f.category for f in c.facts} == set(CATEGORIES)


@pytest.mark.parametrize("seed", range(8))
def test_smoke_size_chains_have_every_pointer_class(seed):
    for c in generate_chains(SyntheticSpec(seed=seed, n_chains=4, window_tokens=3000)):
        assert {f.pointer for f in c.facts} == {"user", "assistant", "tool"}


def test_facts_are_spread_over_the_whole_chain(default_chains):
    for c in default_chains:
        n = len(c.session.records)
        orders = [f.source_order for f in c.facts]
        assert min(orders) < n * 0.1 and max(orders) > n * 0.85
        thirds = Counter(min(2, 3 * o // n) for o in orders)
        assert all(thirds[k] >= 5 for k in range(3)), thirds
        # roughly one fact per 1.5-3k tokens
        assert 128_000 / 3_500 <= len(c.facts) <= 128_000 / 1_200


# -- realism ------------------------------------------------------------------------------


def _composition(chain: SyntheticChain) -> tuple[float, float]:
    chars: Counter[str] = Counter()
    for r in chain.session.records:
        chars[r.kind] += len(r.text)
    total = sum(chars.values())
    return (chars["tool_call"] + chars["tool_output"]) / total, chars["user"] / total


def test_composition_is_dominated_by_tool_traffic(mid_chains, default_chains):
    for c in (*mid_chains, *default_chains):
        tool, user = _composition(c)
        assert tool >= 0.75, (c.session.id, tool)
        assert user < 0.10, (c.session.id, user)
        assert 0 < user


def test_tool_output_sizes_are_heavy_tailed(default_chains):
    for c in default_chains:
        sizes = [len(r.text) for r in c.session.records if r.kind == "tool_output"]
        med = statistics.median(sizes)
        assert max(sizes) >= 10 * med, (c.session.id, max(sizes), med)
        assert 200 <= med <= 5_000


def test_tools_and_outputs_look_like_real_work(mid_chains):
    themes = {c.session.metadata["theme"] for c in mid_chains}
    assert len(themes) == 4
    for c in mid_chains:
        recs = c.session.records
        tools = Counter(r.tool for r in recs if r.kind == "tool_call")
        assert {"bash", "read_file", "edit_file"} <= set(tools)
        outs = "\n".join(r.text for r in recs if r.kind == "tool_output")
        assert re.search(r"\d+ passed|Tests +\d+ passed|test result: ok", outs), "a test run"
        assert any(r.is_error for r in recs if r.kind == "tool_output"), "some failures"
        assert {r.kind for r in recs} >= {"system", "user", "assistant", "tool_call", "tool_output"}
        # The task arc revisits the same files and commands.
        targets = Counter(r.target for r in recs if r.kind == "tool_call")
        assert targets.most_common(1)[0][1] >= 3
        # A failing command is run again later and passes.
        failed = [r.target for r in recs if r.kind == "tool_output" and r.is_error]
        later_ok = {r.target for r in recs if r.kind == "tool_output" and not r.is_error}
        assert any(t in later_ok for t in failed)


def test_all_record_kinds_and_tools_over_the_default_profile(default_chains):
    kinds = Counter(r.kind for c in default_chains for r in c.session.records)
    assert {"system", "user", "assistant", "reasoning", "tool_call", "tool_output"} <= set(kinds)
    tools = {r.tool for c in default_chains for r in c.session.records if r.tool}
    assert {"bash", "read_file", "edit_file", "write_file", "grep", "http_request"} <= tools
    users = [r.text for c in default_chains for r in c.session.records if r.kind == "user"]
    # User turns are short: mostly one to three sentences.
    assert statistics.median(len(u) for u in users) < 400


def test_followups_refer_back_by_subject(default_chains):
    total = 0
    for c in default_chains:
        recs = c.session.records
        by_entry = {r.entry_id: r for r in recs}
        values = [f.value for f in c.facts]
        for fu in c.session.metadata["followups"]:
            total += 1
            rec = by_entry[fu["entry_id"]]
            target = recs[fu["refers_to_source_order"]]
            assert rec.kind == "user" and target.entry_id == fu["refers_to_entry_id"]
            assert target.source_order < rec.source_order and target.pointer == fu["pointer"]
            assert any(cue in rec.text.lower() for cue in FOLLOWUP_CUES), rec.text
            # Neither the question nor the assistant's reply restates a planted value.
            reply = recs[rec.source_order + 1]
            assert reply.kind == "assistant"
            assert not any(v in rec.text or v in reply.text for v in values)
    assert total >= len(default_chains)


def test_planted_fact_dataclass_is_frozen() -> None:
    f = PlantedFact("x", "s", "user_constraint", "user", "v", (), "e", 0, "q?")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.value = "w"  # type: ignore[misc]  # the point: a frozen dataclass refuses it
