"""The strategy registry, and every strategy on real fixture sessions and the default chains."""

import pytest

from compaction_lab import strategies, summarize
from compaction_lab.core.projection import AUTHORED_KINDS
from compaction_lab.core.registry import UNRANKED
from compaction_lab.ingest import ImportAudit, load_sessions, synthetic
from compaction_lab.strategies import STRATEGIES, CompactionContext
from compaction_lab.strategies.base import ESTIMATORS
from tests.helpers import PUBLIC_FIXTURES, make_session

#: Today's arms in the order tables and charts show them. Not the list of arms (that is the registry):
#: an added arm needs no edit here; this pins that none of these is lost or moved.
TODAYS_ORDER = (
    "futureos-summarized",
    "futureos-deterministic",
    "codex",
    "opencode",
    "claude-code",
    "pi",
    "gemini-cli",
    "aider",
    "full",
    "truncate-oldest",
    "observation-masking",
)


def test_registry_lists_every_arm_by_rank():
    listed = strategies.names()
    assert [n for n in listed if n in TODAYS_ORDER] == list(TODAYS_ORDER)
    entries = {e.name: e for e in STRATEGIES.entries()}
    ranks = [entries[n].rank for n in listed]
    # every listed arm has its own place in tables and charts: ranked, no two alike, listed by rank
    assert UNRANKED not in ranks and len(set(ranks)) == len(ranks) and ranks == sorted(ranks)
    assert set(strategies.registry()) == set(listed) | {"recorded"}  # registered, not listed
    assert entries["recorded"].meta["listed"] is False
    for name, s in strategies.registry().items():
        assert s.name == name and s.algorithm_version and s.estimator in ESTIMATORS


def test_unknown_strategy_names_the_available_ones():
    with pytest.raises(ValueError, match="available: futureos-summarized"):
        strategies.get("magic")


def test_cut_outside_the_session_is_an_error(small_session):
    with pytest.raises(ValueError, match="outside session"):
        strategies.compact(small_session, "codex", cut=99)


def _check(session, proj, ctx):
    ids = {r.entry_id for r in session.records}
    assert proj.entry_ids() <= ids
    assert proj.tokens == sum(s.tokens for s in proj.segments) > 0
    texts = {r.text for r in session.records}
    shape = ctx.shape.for_session(session)
    for seg in proj.segments:
        if seg.kind in AUTHORED_KINDS or seg.kind in ("system", "tools"):
            continue
        # Verbatim kinds copy a record, or (Codex's middle truncation) a prefix/suffix of one.
        assert seg.text in texts or any(seg.text in t for t in texts) or seg.text == shape.system_prompt


def _sessions():
    out = []
    out += list(load_sessions(PUBLIC_FIXTURES, ImportAudit()))
    out += [c.session for c in synthetic.generate_chains(synthetic.SyntheticSpec(n_chains=2))]
    return out


@pytest.fixture(scope="module")
def sessions():
    return _sessions()


@pytest.mark.slow
@pytest.mark.parametrize("window, output", [(128_000, 32_000), (16_000, 4_000)])
def test_every_strategy_on_real_and_default_sessions(sessions, window, output):
    ctx = CompactionContext(window=window, output_ceiling=output, summarizer=summarize.get_summarizer("extractive"))
    for s in sessions:
        for name in strategies.names():
            proj = strategies.compact(s, name, None, ctx)
            assert proj.strategy == name and proj.session_id == s.id
            _check(s, proj, ctx)


def test_compact_uses_the_sessions_own_system_prompt():
    s = make_session([("user", "hi"), ("assistant", "hello")])
    s = type(s)(s.id, s.source_format, s.records, metadata={"system_prompt": "OWN PROMPT 4471"})
    proj = strategies.compact(s, "futureos-deterministic")
    assert proj.segments[0].kind == "system" and proj.segments[0].text == "OWN PROMPT 4471"


# --------------------------------------------------------------------------- hostile nesting (issue 25, item 14)


@pytest.fixture(scope="module")
def deep_session(tmp_path_factory):
    """A Codex session whose calls carry JSON nested 100,000 levels inside strings (`deep_json.rollout_lines`)."""
    from tests.deep_json import write_rollout

    report = ImportAudit()
    (s,) = load_sessions(write_rollout(tmp_path_factory.mktemp("deep")), report)
    assert report.n_skipped == 0
    return s


@pytest.mark.parametrize("name", sorted(strategies.names()))
@pytest.mark.parametrize("window, output", [(128_000, 32_000), (4_000, 1_000)])
def test_every_strategy_projects_arguments_nested_past_the_bound(deep_session, name, window, output):
    """Was: `RecursionError` from pi, gemini-cli and opencode (each parsed the call's arguments with
    `json.loads`). Arguments too deep to parse are kept as the recorded text, so every strategy projects."""
    ctx = CompactionContext(window=window, output_ceiling=output, summarizer=summarize.get_summarizer("extractive"))
    proj = strategies.compact(deep_session, name, None, ctx)
    assert proj.strategy == name and proj.session_id == deep_session.id
    _check(deep_session, proj, ctx)
