"""Tests for `exam.questions.allocation`: exact pointer shares and the min-cost max-flow allocation of questions."""

from compaction_lab.exam.questions.allocation import allocate, largest_remainder, mix_plan, split_evenly
from compaction_lab.exam.types import POINTERS


def test_split_and_largest_remainder():
    assert split_evenly(170, 18) == [10] * 8 + [9] * 10
    assert split_evenly(8, 18) == [1] * 8 + [0] * 10
    assert largest_remainder(170, {"assistant": 0.8, "user": 0.1, "tool": 0.1}) == {
        "assistant": 136,
        "user": 17,
        "tool": 17,
    }
    assert largest_remainder(10, {"assistant": 1, "user": 1, "tool": 1}) == {"assistant": 4, "user": 3, "tool": 3}
    assert largest_remainder(7, {"tool": 1}) == {"assistant": 0, "user": 0, "tool": 7}


def test_mix_plan_keeps_both_margins():
    rows = split_evenly(170, 18)
    targets = {"assistant": 136, "user": 17, "tool": 17}
    plan = mix_plan(rows, targets)
    assert [sum(x.values()) for x in plan] == rows
    assert {p: sum(x[p] for x in plan) for p in POINTERS} == targets


def test_allocate_moves_a_missing_pointer_to_another_case():
    rows = [2, 2]
    targets = {"assistant": 2, "user": 0, "tool": 2}
    plan = [{"assistant": 1, "user": 0, "tool": 1}, {"assistant": 1, "user": 0, "tool": 1}]
    caps = [{"assistant": 5, "user": 0, "tool": 0}, {"assistant": 5, "user": 0, "tool": 5}]
    x = allocate(rows, targets, caps, plan)
    # case 0 has no tool facts: it asks two assistant, case 1 makes up both tool questions
    assert x == [{"assistant": 2, "user": 0, "tool": 0}, {"assistant": 0, "user": 0, "tool": 2}]
    # when no case can make up the pointer, the other pointers fill the rows
    x = allocate(rows, targets, [{"assistant": 5, "user": 0, "tool": 0}] * 2, plan)
    assert [sum(r.values()) for r in x] == rows and sum(r["tool"] for r in x) == 0
    # and a row with too few facts stays short
    x = allocate([3], {"assistant": 3, "user": 0, "tool": 0}, [{"assistant": 1, "user": 1, "tool": 0}])
    assert x == [{"assistant": 1, "user": 1, "tool": 0}]


# -- cuts and tails on hand-made sessions ------------------------------------------------------
