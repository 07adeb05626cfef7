"""A profile's notebooks come from the chain (issue 49): ``notebooks:`` only where a profile runs a subset."""

from __future__ import annotations

import pytest
import yaml

from compaction_lab.core import paths
from compaction_lab.core.errors import ProfileError
from compaction_lab.run import chain, runner


def test_a_profile_without_notebooks_runs_the_whole_chain_in_order(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("description: no notebooks listed\nparameters: {seed: 3}\n")
    prof = runner.load_profile(path)
    assert prof.notebooks == chain.names() and len(prof.notebooks) == len(chain.CHAIN)
    assert prof.parameters == {"seed": 3}


def test_a_profile_listing_a_subset_keeps_it_in_its_order(tmp_path):
    subset = [chain.names()[0], chain.names()[2]]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"notebooks": subset}))
    assert runner.load_profile(path).notebooks == tuple(subset)


def test_an_unknown_notebook_is_a_one_line_error_naming_it(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(f"notebooks: [{chain.names()[0]}, 99_nothing]\n")
    with pytest.raises(ProfileError) as exc:
        runner.load_profile(path)
    message = str(exc.value)
    assert "\n" not in message and "99_nothing" in message and "notebooks not found" in message, message
    assert str(path) in message and str(paths.NOTEBOOKS_DIR) in message


@pytest.mark.parametrize("name", runner.list_profiles())
def test_a_shipped_profile_lists_notebooks_only_to_run_a_subset(name):
    """The chain is the one list of notebooks: a profile that runs all of them leaves the key out."""
    data = yaml.safe_load((paths.params_dir() / f"{name}.yaml").read_text(encoding="utf-8"))
    listed = data.get("notebooks")
    if listed is not None:
        assert set(listed) < set(chain.names()), f"{name}.yaml lists the whole chain: leave notebooks out"
        assert runner.load_profile(name).notebooks == tuple(listed)
    else:
        assert runner.load_profile(name).notebooks == chain.names()


def test_the_shipped_profiles_include_one_that_runs_a_subset():
    """Both cases above are exercised by a shipped profile (the window study runs 01 to 04)."""
    subsets = [n for n in runner.list_profiles() if runner.load_profile(n).notebooks != chain.names()]
    assert subsets and all(runner.load_profile(n).notebooks for n in subsets)
