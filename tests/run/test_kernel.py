"""The chain's one kernel: notebooks share its process, never its names (`compaction_lab.run.kernel`)."""

from __future__ import annotations

import json
import os

import nbformat
import pytest

from compaction_lab.run import kernel, runner


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _outputs(path):
    nb = json.loads(path.read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    # One text per cell that printed: under load the kernel may send one print as two stream messages
    # ("33", then its newline), which the notebook keeps as two outputs.
    texts = ["".join("".join(o.get("text", "")) for o in c["outputs"] if o.get("name") == "stdout") for c in cells]
    return [c["execution_count"] for c in cells], [t for t in texts if t]


def _run(src, out, shared):
    runner.execute_notebook(
        str(src),
        str(out),
        kernel_name="python3",
        progress_bar=False,
        cwd=str(out.parent),
        engine_name=kernel.ENGINE,
        chain=shared,
    )


def test_notebooks_share_the_process_not_the_names(tmp_path):
    first = _notebook(tmp_path / "a.ipynb", "import os\nsecret = 41", "print(os.getpid(), os.getcwd())")
    second = _notebook(
        tmp_path / "b.ipynb", "import os", "print(os.getpid(), os.getcwd())", "print('secret' in globals())"
    )
    with kernel.chain_kernel() as shared:
        _run(first, tmp_path / "a-out.ipynb", shared)
        km = shared.km
        pid = km.provisioner.pid if km.provisioner else None
        _run(second, tmp_path / "b-out.ipynb", shared)
        assert shared.km is km and shared.notebooks == 2
    # The kernel is gone once the chain is over.
    assert shared.km is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    counts_a, (where_a,) = _outputs(tmp_path / "a-out.ipynb")
    counts_b, (where_b, seen) = _outputs(tmp_path / "b-out.ipynb")
    assert where_a == where_b  # same process, same working folder
    assert where_a.split()[0] == str(pid)
    assert seen.strip() == "False"  # the first notebook's names were cleared
    assert counts_a == [1, 2] and counts_b == [1, 2, 3]  # numbered as if each ran alone


def test_a_dead_kernel_is_replaced_for_the_next_notebook(tmp_path):
    killer = _notebook(tmp_path / "k.ipynb", "import os", "print(os.getpid())")
    after = _notebook(tmp_path / "n.ipynb", "import os", "print(os.getpid())")
    with kernel.chain_kernel() as shared:
        _run(killer, tmp_path / "k-out.ipynb", shared)
        first_pid = int(_outputs(tmp_path / "k-out.ipynb")[1][0])
        os.kill(first_pid, 9)
        shared.km.provisioner.process.wait()
        _run(after, tmp_path / "n-out.ipynb", shared)
        second_pid = int(_outputs(tmp_path / "n-out.ipynb")[1][0])
    assert second_pid != first_pid
    counts, _ = _outputs(tmp_path / "n-out.ipynb")
    assert counts == [1, 2]


def test_fast_cells_do_not_save_the_notebook_each_time_but_the_end_is_whole(tmp_path, monkeypatch):
    import papermill.engines

    saves = []
    real = papermill.engines.write_ipynb
    monkeypatch.setattr(papermill.engines, "write_ipynb", lambda nb, path: saves.append(path) or real(nb, path))
    cells = [f"print({i})" for i in range(40)] + ["raise ValueError('the last cell fails')"]
    src = _notebook(tmp_path / "many.ipynb", *cells)
    with kernel.chain_kernel() as shared, pytest.raises(Exception, match="the last cell fails"):
        _run(src, tmp_path / "many-out.ipynb", shared)
    # papermill's own manager saves at every cell's start and end (82 here); ours at the start, the end,
    # the failing cell, and at most once a second in between.
    assert 2 <= len(saves) <= 10
    counts, texts = _outputs(tmp_path / "many-out.ipynb")
    assert counts[:40] == list(range(1, 41))
    assert [t.strip() for t in texts] == [str(i) for i in range(40)]
    nb = json.loads((tmp_path / "many-out.ipynb").read_text())
    assert nb["cells"][-1]["outputs"][0]["ename"] == "ValueError"


def test_a_notebook_goes_to_the_kernel_that_ran_what_it_reads():
    """The runner hands a notebook the idle kernel whose last notebook it needs (its memo holds that one's results)."""
    from compaction_lab.run import chain
    from compaction_lab.run import runner as report
    from compaction_lab.run.kernel import ChainKernel

    order = list(chain.names())
    ran_02, ran_03, fresh = (
        ChainKernel(last="02_projection_anatomy"),
        ChainKernel(last="03_closed_book_exam"),
        ChainKernel(),
    )
    assert report._kernel_for("04_cost_model", [ran_02, ran_03], order) == 1  # 04 reads 03
    assert report._kernel_for("04_cost_model", [fresh, ran_02], order) == 0  # neither ran 03: the first idle
    assert report._kernel_for("06_share", [ran_03, ran_02], order) == 0  # the latest it needs of the two: 03
    assert report._kernel_for("02_projection_anatomy", [fresh, ChainKernel(last="01_context_composition")], order) == 1
