"""exam.questions.probes on the real public sessions: at their ends and at the pi session's two recorded compactions.

Every bank (the sampled case and the whole pool) must hold exact, unique values: no two questions
share a wording with different answers (step numbers aside: the reader never sees them), no answer
is a phrase or spans lines, none comes only from a harness template, none is a slash-list, at most
`max_per_record` questions per message, and aliases are right.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compaction_lab.core.session import Session
from compaction_lab.exam.grading import contains_answer, normalise
from compaction_lab.exam.questions import probes
from compaction_lab.exam.questions.probes import MinedCase, ProbeSpec, injected_blocks, mine
from compaction_lab.exam.questions.probes.forms import value_key
from compaction_lab.exam.types import bank_to_jsonl
from compaction_lab.ingest import load_sessions
from tests.helpers import PUBLIC_FIXTURES

PI = "before-compaction.jsonl"
CC = "coverage-test-fix.jsonl"
PYDICOM = "pydicom__pydicom-1458.traj"
I1 = "swe-agent__test-repo-i1.traj"

_SPEC = ProbeSpec(n_questions=20, n_decoys=2)

#: One worker mines these sessions once for every check (``make test`` runs ``--dist loadgroup``).
pytestmark = pytest.mark.xdist_group("probes-real-sessions")

#: (session, cut, tail_start, tail_tokens); cut "c0"/"c1" is the pi session's recorded compaction, None
#: its end; tail_start "cut" keeps nothing before the cut (a compaction that kept nothing), None the
#: bank's tail. The Claude Code and SWE-agent sessions are smaller than the default 8k tail, so they
#: are also mined with a small tail and with nothing kept.
CONFIGS: dict[str, tuple[str, str | None, str | None, int]] = {
    "pi-end": (PI, None, None, 8192),
    "pi-c0": (PI, "c0", None, 8192),
    "pi-c1": (PI, "c1", None, 8192),
    "pi-c0-nothing-kept": (PI, "c0", "cut", 8192),
    "pi-c1-nothing-kept": (PI, "c1", "cut", 8192),
    "cc-end": (CC, None, None, 8192),
    "cc-small-tail": (CC, None, None, 400),
    "cc-nothing-kept": (CC, None, "cut", 8192),
    "pydicom-small-tail": (PYDICOM, None, None, 300),
    "pydicom-nothing-kept": (PYDICOM, None, "cut", 8192),
    "i1-small-tail": (I1, None, None, 100),
    "i1-nothing-kept": (I1, None, "cut", 8192),
}

_SESSIONS: dict[str, Session] = {}
_MINED: dict[str, MinedCase] = {}


def _session(name: str) -> Session:
    if not _SESSIONS:
        for s in load_sessions(PUBLIC_FIXTURES):
            assert s.source_path is not None  # every loaded session has its file
            _SESSIONS[Path(s.source_path).name] = s
    return _SESSIONS[name]


def _cut(s: Session, which: str | None) -> int:
    if which is None:
        return s.records[-1].source_order + 1
    return int(s.metadata["compactions"][int(which[1:])]["source_order"])


def _mine(key: str) -> tuple[Session, MinedCase]:
    name, which, tail, tail_tokens = CONFIGS[key]
    s = _session(name)
    if key not in _MINED:
        cut = _cut(s, which)
        _MINED[key] = mine(
            s,
            ProbeSpec(n_questions=20, n_decoys=2, tail_tokens=tail_tokens),
            cut=cut,
            tail_start=cut if tail == "cut" else None,
        )
    return s, _MINED[key]


def _banks(m: MinedCase):
    return (("case", m.case.real), ("pool", m.pool))


# --------------------------------------------------------------------------- the checks


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_the_bank_is_sound(key):
    s, m = _mine(key)
    probes.check_probe_case(m.case, s, max_per_record=_SPEC.max_per_record)
    assert {p: sum(q.pointer == p for q in m.pool) for p in m.available} == dict(m.available)
    if m.case.tail_start < m.case.cut and not key.endswith("-end"):
        assert m.pool, m.notes


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_no_two_questions_share_a_wording_with_different_answers(key):
    _, m = _mine(key)
    for label, questions in _banks(m):
        by_prompt: dict[str, set[str]] = {}
        by_wording: dict[str, set[str]] = {}
        for q in questions:
            by_prompt.setdefault(q.prompt, set()).add(normalise(q.answer))
            by_wording.setdefault(re.sub(r" at step \d+", "", q.prompt), set()).add(normalise(q.answer))
        assert all(len(v) == 1 for v in by_prompt.values()), label
        shared = {w: v for w, v in by_wording.items() if len(v) > 1}
        assert not shared, (label, shared)


def _windows(prompt: str) -> tuple[str, str] | None:
    m = re.search(r"\u201c(.*)\u2026(.*)\u201d\?$", prompt)
    return None if m is None else (m.group(1), m.group(2))


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_a_window_holds_one_value_in_everything_before_the_cut(key):
    s, m = _mine(key)
    text = "\n\x00\n".join(normalise(r.text) for r in s.records if r.source_order < m.case.cut)
    for q in m.pool:
        win = _windows(q.prompt)
        if win is None:
            continue
        b, a = (re.sub(r"\s+", " ", x.casefold()) for x in win)
        if not b:
            continue
        answer = normalise(q.answer)
        pattern = re.compile(re.escape(b) + r"(.{0,200}?)" + re.escape(a)) if a else None
        pos = text.find(b)
        while pos >= 0:
            if pattern is None:
                assert text.startswith(answer, pos + len(b)), (q.prompt, text[pos : pos + 80])
            else:
                hit = pattern.match(text, pos)
                assert hit is None or normalise(hit.group(1)) == answer, (q.prompt, hit.group(1))
            pos = text.find(b, pos + 1)


def _slash_list(v: str) -> bool:
    if v.startswith(("/", "~/", "./", "../")):
        return False
    parts = v.split("/")
    if len(parts) < 2:
        return False
    plain = not v.endswith("/") and all(re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", p) for p in parts)
    return plain or any(re.search(r"\.(?:ts|js|py|md|json|tsx|jsx|sh|rs|go)$", p) for p in parts[:-1])


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_answers_are_exact_values(key):
    _, m = _mine(key)
    for _, questions in _banks(m):
        for q in questions:
            assert "\n" not in q.answer and "\r" not in q.answer, q.answer
            assert len(q.answer.split()) < 4, q.answer
            assert not (q.category == "path" and _slash_list(q.answer)), q.answer
            if q.category == "quoted":
                words = q.answer.split()
                assert len(words) < 2 or not all(re.fullmatch(r"[a-z]+[.,;:!?]?", w) for w in words), q.answer
            assert not (q.category == "path" and q.answer.startswith("@")), q.answer


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_no_answer_comes_only_from_a_harness_template(key):
    s, m = _mine(key)
    by_order = {r.source_order: r for r in s.records}
    for _, questions in _banks(m):
        for q in questions:
            rec = by_order[q.source_order]
            assert not rec.injected and rec.kind not in ("system", "summary", "meta")
            text = rec.text
            for a, b in reversed(injected_blocks(text)):
                text = text[:a] + "\n" + text[b:]
            if s.source_format == "swe_agent" and q.pointer == "user":
                start = text.index("\nISSUE:\n") + len("\nISSUE:\n")
                text = text[start : text.index("\nINSTRUCTIONS:\n")]  # the rest is the instance template
            assert q.answer in text, (q.id, q.answer)


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_at_most_max_per_record_questions_per_message(key):
    _, m = _mine(key)
    per: dict[str, int] = {}
    for q in m.case.real:
        per[q.source_entry_id] = per.get(q.source_entry_id, 0) + 1
    assert max(per.values(), default=0) <= _SPEC.max_per_record


_UNIT = re.compile(
    r"(\d[\d,]*(?:\.\d+)?)( ?)(req/s|ms|µs|μs|us|ns|[KMGT]i?B|kB|bytes|seconds|secs|sec|s|minutes|mins|min|hours|%|rows|tokens|records|requests)"
)


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_aliases_are_right(key):
    s, m = _mine(key)
    cwd = s.metadata.get("cwd")
    for _, questions in _banks(m):
        for q in questions:
            for alias in q.aliases:
                assert not re.search(r"\d \.?\d|\d \.\d", alias), (q.answer, alias)  # never "3.1 1", "2024 .2"
            if q.category == "number":
                unit = _UNIT.fullmatch(q.answer)
                if unit is None:
                    assert q.aliases == (), q.answer
                else:
                    other = unit.group(1) + ("" if unit.group(2) else " ") + unit.group(3)
                    assert q.aliases == (other,), q.answer
            else:
                # a path's own spellings, or another form of its value: one is a "/"-bounded suffix
                # of the other (``gpt-5.1-codex`` of ``openai/gpt-5.1-codex``, one value once)
                key = value_key(q.answer, cwd)
                for alias in q.aliases:
                    other = value_key(alias, cwd)
                    assert other == key or key.endswith("/" + other) or other.endswith("/" + key), (q.answer, alias)
                    assert q.category == "path" or other != key, (q.answer, alias)
    assert not any(q.answer == "3.11" and q.aliases for q in m.pool)


@pytest.mark.parametrize("which", ["c0", "c1"])
def test_values_the_recorded_summary_holds_are_eligible(which):
    # the agent's own summary sits after the cut: values it repeats stay eligible, so the pool has
    # values the real summary holds (0 of them under the old rule)
    for key in (f"pi-{which}", f"pi-{which}-nothing-kept"):
        s, m = _mine(key)
        summary = next(r.text for r in s.records if r.source_order >= m.case.cut and r.kind == "summary")
        held = [q for q in m.pool if contains_answer(q, summary)]
        assert len(held) >= 10, key


@pytest.mark.slow
def test_mining_is_deterministic():
    for key in ("pi-c1", "pydicom-nothing-kept"):
        s, m = _mine(key)
        name, which, tail, tail_tokens = CONFIGS[key]
        again = mine(
            s,
            ProbeSpec(n_questions=20, n_decoys=2, tail_tokens=tail_tokens),
            cut=m.case.cut,
            tail_start=m.case.cut if tail == "cut" else None,
        )
        assert bank_to_jsonl([again.case]) == bank_to_jsonl([m.case])
        assert again.pool == m.pool and again.notes == m.notes
