"""figure_table / figure_simulator "auto" (issue 48): accepted, and checked against the tables and rules priced."""

import pytest

from compaction_lab.run import params, runner


def _problems(**overrides) -> list[str]:
    return params.problems(runner.load_profile("smoke").with_parameters(overrides))


def _figure_problems(**overrides) -> list[str]:
    return [p for p in _problems(**overrides) if "figure_" in p]


def test_auto_is_notebook_04s_default():
    declared = params.declared_parameters("04_cost_model")
    assert declared["figure_table"].default == "auto" and declared["figure_simulator"].default == "auto"
    assert _problems() == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"figure_table": "auto", "figure_simulator": "auto"},
        {"figure_table": "auto", "figure_simulator": "none"},  # every table is priced under `none`
        {"figure_table": "auto", "figure_simulator": "openai", "simulators": ["openai", "none"]},
        {"figure_table": "gpt-4.1", "figure_simulator": "auto"},
        {"figure_table": "gpt-4.1", "figure_simulator": "openai"},
        {"figure_table": "claude-sonnet-4-6", "figure_simulator": "anthropic"},
    ],
)
def test_consistent_choices_pass(overrides):
    assert _figure_problems(**overrides) == []


@pytest.mark.parametrize(
    "overrides, needles",
    [
        ({"figure_table": "nope"}, ("figure_table = 'nope'", "no price table 'nope'")),
        ({"figure_table": "Auto"}, ("figure_table = 'Auto'", "no price table")),
        ({"figure_simulator": "autoo"}, ("figure_simulator = 'autoo'", "did you mean 'auto'")),
        ({"figure_simulator": "lru"}, ("figure_simulator = 'lru'", "allowed: auto, ")),
        # The explicit table must be priced (kept from before "auto").
        (
            {"figure_table": "gpt-4.1", "price_tables": ["deepseek-flash"]},
            ("figure_table = 'gpt-4.1'", "not among price_tables"),
        ),
        (
            {"figure_table": "gpt-4.1", "figure_simulator": "deepseek"},
            ("figure_simulator = 'deepseek'", "['openai', 'none']"),
        ),
        # With "auto" the table is only known at run time: an explicit rule must be one every table is priced under.
        (
            {"figure_table": "auto", "figure_simulator": "anthropic"},
            ("figure_simulator = 'anthropic' with figure_table = 'auto'", "set figure_simulator: auto"),
        ),
        (
            {"figure_table": "auto", "figure_simulator": "none", "simulators": ["openai"]},
            ("figure_simulator = 'none' with figure_table = 'auto'", "['openai']"),
        ),
        (
            {"figure_table": "auto", "figure_simulator": "anthropic", "simulators": ["openai", "none"]},
            ("figure_simulator = 'anthropic' with figure_table = 'auto'", "['openai', 'none']"),
        ),
    ],
)
def test_inconsistent_choices_name_the_parameter(overrides, needles):
    found = _figure_problems(**overrides)
    assert len([p for p in found if all(n in p for n in needles)]) == 1, (needles, found)
