def test_environment_sets_for_the_block_and_restores_set_and_unset_variables(monkeypatch):
    import os
    import subprocess
    import sys

    from compaction_lab.core.processes import environment

    monkeypatch.setenv("CL_TEST_WAS_SET", "before")
    monkeypatch.delenv("CL_TEST_WAS_UNSET", raising=False)
    with environment({"CL_TEST_WAS_SET": "inside", "CL_TEST_WAS_UNSET": "new"}):
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(os.environ['CL_TEST_WAS_SET'], os.environ['CL_TEST_WAS_UNSET'])"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert child.stdout.split() == ["inside", "new"]
    assert os.environ["CL_TEST_WAS_SET"] == "before" and "CL_TEST_WAS_UNSET" not in os.environ
    try:
        with environment({"CL_TEST_WAS_SET": "raised"}):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert os.environ["CL_TEST_WAS_SET"] == "before"
