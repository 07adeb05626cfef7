"""Forms of one value (`exam.questions.probes.forms`): keys and a pool collapsed to distinct values."""

from __future__ import annotations

from compaction_lab.exam.questions.probes import forms


def test_value_key_drops_the_mention_and_makes_a_path_relative_to_the_session():
    assert forms.value_key("@/repo/src/A.py", "/repo") == "src/a.py"
    assert forms.value_key("./src/a.py", "/repo") == "src/a.py"
    assert forms.value_key("/elsewhere/a.py", "/repo") == "/elsewhere/a.py"
    assert forms.value_key("ORD-58213") == "ord-58213"


def test_every_form_of_one_path_is_one_value():
    keys = [
        forms.value_key(v, "/home/u/pi-mono")
        for v in (
            "agent-session.ts",
            "core/agent-session.ts",
            "src/core/agent-session.ts",
            "packages/coding-agent/src/core/agent-session.ts",
            "/home/u/pi-mono/packages/coding-agent/src/core/agent-session.ts",
            "@packages/coding-agent/src/core/agent-session.ts",
        )
    ]
    c = forms.collapse(keys)
    assert len(c) == 1
    assert c.values == {"packages/coding-agent/src/core/agent-session.ts"}
    assert not c.ambiguous


def test_a_suffix_of_two_different_paths_is_ambiguous_not_a_value():
    c = forms.collapse(["a/index.ts", "b/index.ts", "index.ts", "src/b/index.ts"])
    assert c.ambiguous == {"index.ts"}
    assert c.of("index.ts") is None
    assert c.of("b/index.ts") == "src/b/index.ts"
    assert len(c) == 2


def test_a_suffix_must_end_at_a_path_separator_and_non_paths_stay_apart():
    c = forms.collapse(["session.ts", "agent-session.ts", "42", "1042", "ord-1", "x-ord-1"])
    assert len(c) == 6
    assert c.groups()["agent-session.ts"] == ("agent-session.ts",)
