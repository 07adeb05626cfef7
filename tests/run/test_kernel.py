"""The chain's one kernel: notebooks share its process, never its names (`compaction_lab.run.kernel`)."""

from __future__ import annotations

import json
import os
import threading

import nbformat
import pytest

from compaction_lab.run import execution, kernel, runner


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
        engine_name=execution.ENGINE,
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
    from compaction_lab.run import chain, runner
    from compaction_lab.run.kernel import ChainKernel

    order = list(chain.names())
    ran_02, ran_03, fresh = (
        ChainKernel(last="02_projection_anatomy"),
        ChainKernel(last="03_closed_book_exam"),
        ChainKernel(),
    )
    assert runner._kernel_for("04_cost_model", [ran_02, ran_03], order) == 1  # 04 reads 03
    assert runner._kernel_for("04_cost_model", [fresh, ran_02], order) == 0  # neither ran 03: the first idle
    assert runner._kernel_for("07_share", [ran_03, ran_02], order) == 0  # the latest it needs of the two: 03
    assert runner._kernel_for("02_projection_anatomy", [fresh, ChainKernel(last="01_context_composition")], order) == 1


def test_warm_code_runs_each_notebooks_imports_once_and_skips_cells_that_are_not_python(tmp_path):
    a = _notebook(tmp_path / "a.ipynb", "import json\nx = 1", "from os import path as p\nprint(p)")
    b = _notebook(tmp_path / "b.ipynb", "%matplotlib inline\nimport sys", "import json", "def f():\n    import csv")
    code = kernel.warm_code([a, b], "cl100k_base")
    compile(code, "<warm>", "exec")  # one Python program
    assert code.count("import json") == 1  # both notebooks import it: imported once
    assert "from os import path as p" in code
    assert "import sys" not in code  # its cell holds a magic: not Python, skipped whole
    assert "import csv" not in code  # inside a function: not what the notebook imports when it runs
    assert "x = 1" not in code and "print(p)" not in code  # only imports, never a notebook's own statements
    assert "scipy_special()" in code and ".warm()" in code and "get_encoding('cl100k_base')" in code
    assert "get_encoding" not in kernel.warm_code([a])  # no encoding given: none loaded


def test_a_warm_import_that_fails_is_left_for_its_notebook(tmp_path):
    nb = _notebook(tmp_path / "a.ipynb", "import no_such_module_here\nimport json")
    namespace: dict = {}
    exec(kernel.warm_code([nb]), namespace)  # no exception: the notebook reports its own error
    assert "json" in namespace and "no_such_module_here" not in namespace


def test_a_warmed_kernel_runs_its_first_notebook_in_a_clean_namespace(tmp_path):
    nb = _notebook(tmp_path / "n.ipynb", "import os", "print(os.getpid(), os.getcwd())", "print('warmed' in globals())")
    with kernel.chain_kernel() as shared:
        assert shared.warm("python3", str(tmp_path), "import json\nwarmed = 1", list(runner.KERNEL_ARGUMENTS))
        pid = shared.km.provisioner.pid
        _run(nb, tmp_path / "n-out.ipynb", shared)
        assert shared.notebooks == 1
    counts, (where, seen) = _outputs(tmp_path / "n-out.ipynb")
    assert where.split() == [str(pid), str(tmp_path)]  # the warmed process, started in the folder given
    assert seen.strip() == "False"  # what the warm code left was cleared by the reset
    assert counts == [1, 2, 3]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_warm_that_fails_leaves_no_kernel_and_the_notebook_starts_its_own(tmp_path):
    nb = _notebook(tmp_path / "n.ipynb", "import os", "print(os.getpid())")
    with kernel.chain_kernel() as shared:
        assert not shared.warm("python3", str(tmp_path), "raise ValueError('no')", list(runner.KERNEL_ARGUMENTS))
        assert shared.km is None  # shut down: the notebook starts a fresh kernel, as without warming
        _run(nb, tmp_path / "n-out.ipynb", shared)
    assert _outputs(tmp_path / "n-out.ipynb")[0] == [1, 2]


def test_a_kernel_shut_down_while_it_warms_is_gone_and_the_warm_returns(tmp_path):
    import threading

    shared = kernel.ChainKernel()
    done: list[bool] = []
    started = threading.Event()
    code = "import time\ntime.sleep(60)"
    thread = threading.Thread(
        target=lambda: done.append(shared.warm("python3", str(tmp_path), code, list(runner.KERNEL_ARGUMENTS)))
    )
    thread.start()
    # Until the kernel has started and is running the warm code (its process exists).
    for _ in range(600):
        km = shared.km
        if km is not None and km.has_kernel and km.provisioner is not None and km.provisioner.process is not None:
            started.set()
            break
        threading.Event().wait(0.05)
    assert started.is_set()
    pid = shared.km.provisioner.pid
    shared.shutdown()
    thread.join(timeout=20)
    assert not thread.is_alive() and done == [False]  # returned at once, not after the 60 s cell
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _pid(shared):
    return shared.km.provisioner.pid


@pytest.mark.slow
def test_a_launched_kernel_moves_into_the_run_folder_with_the_runs_environment(tmp_path, monkeypatch):
    """`kernel.launched` starts kernels before the run has a folder; a run's warm (`environment`) gives them the
    run's folder and environment, as a kernel the run started itself would have (cwd, inherited variables):
    what this process set or removed since the launch included."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CL_TEST_GONE", "removed after the launch")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    nb = _notebook(
        tmp_path / "n.ipynb",
        "import os, json",
        "print(os.getcwd())",
        "print(os.environ.get('COMPACTION_LAB_MEMO'), os.environ.get('CL_TEST_SET'), os.environ.get('CL_TEST_GONE'))",
        "print('json' in dir())",  # the launch's warm imported json, the reset cleared the name
    )
    with kernel.launched(1, [nb]) as launch:
        (shared,) = launch.kernels
        assert launch.warming[0].result(timeout=120)
        pid = _pid(shared)
        monkeypatch.setenv("CL_TEST_SET", "set after the launch")
        monkeypatch.delenv("CL_TEST_GONE")
        target = {**os.environ, "COMPACTION_LAB_MEMO": str(tmp_path / "memo")}
        changed = {k: v for k, v in shared.changes(target).items() if k.startswith(("CL_TEST_", "COMPACTION_LAB_"))}
        assert changed == {
            "COMPACTION_LAB_MEMO": str(tmp_path / "memo"),
            "CL_TEST_SET": "set after the launch",
            "CL_TEST_GONE": None,
        }
        assert shared.warm("python3", str(run_dir), "", list(kernel.KERNEL_ARGUMENTS), environment=target)
        assert _pid(shared) == pid  # the launched process, not a new one
        assert shared.changes(target) == {}  # it has the run's environment now
        _run(nb, tmp_path / "n-out.ipynb", shared)
    _, texts = _outputs(tmp_path / "n-out.ipynb")
    assert [t.strip() for t in texts] == [str(run_dir), f"{tmp_path / 'memo'} set after the launch None", "True"]
    with pytest.raises(ProcessLookupError):  # the block's end shut it down
        os.kill(pid, 0)


@pytest.mark.slow
def test_a_second_warm_while_the_launch_warms_does_not_take_its_replies(tmp_path):
    """Two clients of one kernel share its session's socket name: the runner's warm of a launched kernel waits
    for the launch's own warm, and both end (the first used to wait for ever for a reply the second took)."""
    from concurrent.futures import ThreadPoolExecutor

    nb = _notebook(tmp_path / "n.ipynb", "import json")
    with kernel.launched(2, [nb]) as launch, ThreadPoolExecutor(2) as pool:
        second = [
            pool.submit(k.warm, "python3", str(tmp_path), "import os", list(kernel.KERNEL_ARGUMENTS))
            for k in launch.kernels
        ]
        assert [f.result(timeout=120) for f in second] == [True, True]
        assert [f.result(timeout=30) for f in launch.warming] == [True, True]
        pids = [_pid(k) for k in launch.kernels]
        assert len(set(pids)) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_kernels_no_run_took_are_shut_down_and_a_launch_without_notebooks_starts_none(tmp_path):
    nb = _notebook(tmp_path / "n.ipynb", "import json")
    with kernel.launched(2, [nb]) as launch:
        for _ in range(600):  # until both processes exist
            if all(k.km is not None and k.km.has_kernel for k in launch.kernels):
                break
            threading.Event().wait(0.05)
        pids = [_pid(k) for k in launch.kernels]
        launch.close()  # a sweep: none is taken
        assert all(k.km is None for k in launch.kernels)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with kernel.launched(2, [tmp_path / "missing.ipynb"]) as launch:
        assert launch.kernels == () and launch.warming == ()


def test_a_notebook_in_a_running_kernel_connects_without_the_quiet_wait_and_sees_only_its_own_output(
    tmp_path, monkeypatch
):
    """A notebook after the first in a kernel does not wait for 0.2 s of quiet (jupyter_client's
    ``wait_for_ready``, `kernel.connected`), whatever thread runs it; what the notebook before it sent
    after it ended reaches no other."""
    from jupyter_client.asynchronous.client import AsyncKernelClient

    late = _notebook(
        tmp_path / "late.ipynb",
        "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()",
        "print('first')",
    )
    after = _notebook(tmp_path / "after.ipynb", "print('second')")
    with kernel.chain_kernel() as shared:
        assert shared.warm("python3", str(tmp_path), "import gc", list(runner.KERNEL_ARGUMENTS))
        waited = []
        monkeypatch.setattr(AsyncKernelClient, "wait_for_ready", lambda self, timeout=None: waited.append(1))
        _run(late, tmp_path / "late-out.ipynb", shared)
        threading.Event().wait(1.0)  # 'late' is printed between the notebooks
        worker = threading.Thread(target=_run, args=(after, tmp_path / "after-out.ipynb", shared))
        worker.start()
        worker.join(timeout=120)
        assert not worker.is_alive() and shared.notebooks == 2
        assert waited == []
    assert [t.strip() for t in _outputs(tmp_path / "late-out.ipynb")[1]] == ["first"]
    assert [t.strip() for t in _outputs(tmp_path / "after-out.ipynb")[1]] == ["second"]


def test_connected_raises_for_a_kernel_that_died(tmp_path):
    with kernel.chain_kernel() as shared:
        assert shared.warm("python3", str(tmp_path), "import os", list(runner.KERNEL_ARGUMENTS))
        km = shared.km
        os.kill(km.provisioner.pid, 9)
        km.provisioner.process.wait()
        with pytest.raises(RuntimeError, match="died"):
            kernel.connected(km, 30)


@pytest.mark.slow
def test_warm_code_freezes_what_the_imports_made(tmp_path):
    nb = _notebook(tmp_path / "n.ipynb", "import gc", "print(gc.get_freeze_count() > 1000)")
    code = kernel.warm_code([_notebook(tmp_path / "w.ipynb", "import json, decimal")])
    with kernel.chain_kernel() as shared:
        assert shared.warm("python3", str(tmp_path), code, list(runner.KERNEL_ARGUMENTS))
        _run(nb, tmp_path / "n-out.ipynb", shared)
    assert [t.strip() for t in _outputs(tmp_path / "n-out.ipynb")[1]] == ["True"]
