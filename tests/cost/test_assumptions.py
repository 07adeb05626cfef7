"""What the cost figures assume (`compaction_lab.cost.assumptions`): checked by a profile's check without pandas."""

from __future__ import annotations

import subprocess
import sys

import pytest

from compaction_lab.cost import assumptions, model


def test_the_cost_model_uses_the_same_assumptions():
    assert model.CostAssumptions is assumptions.CostAssumptions


def test_fewer_than_three_simulated_turns_are_refused_when_more_turns_are_priced():
    with pytest.raises(ValueError, match="simulated_turns must be >= 3"):
        assumptions.CostAssumptions(turns=10, simulated_turns=2)
    assert assumptions.CostAssumptions(turns=2, simulated_turns=2).turns == 2  # nothing carried forward


def test_from_mapping_ignores_unknown_keys_and_nones():
    a = assumptions.CostAssumptions.from_mapping({"turns": 7, "period": None, "window": 1})
    assert (a.turns, a.period) == (7, "off_peak")


def test_importing_them_imports_no_pandas():
    """A profile's check imports them before a run's notebooks start, while its kernels warm on the same cores."""
    code = "import sys, compaction_lab.cost.assumptions; print('pandas' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
