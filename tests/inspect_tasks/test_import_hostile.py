"""``compaction-lab import-inspect`` given hostile or mistaken logs and run folders (issue 44, items 7, 8, 14-16).

Every log here is a real one (the closed book of the smoke run, answered by mockllm, two epochs), copied
with its samples or header changed as a hand, another run or another tool could change them.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compaction_lab.cli import main
from compaction_lab.core import runfolder

pytestmark = pytest.mark.slow

EPOCHS = 2


@pytest.fixture(scope="module")
def made_log(smoke_run, tmp_path_factory) -> Path:
    """One closed-book log of the smoke run's codex arm: mockllm answers every question ``NOT_FOUND``, twice."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    from compaction_lab.inspect import tasks

    task = tasks.closed_book(str(smoke_run.run_dir), strategy="codex")
    n = len(task.dataset) * EPOCHS
    model = get_model("mockllm/model", custom_outputs=[ModelOutput.from_content("mockllm/model", "NOT_FOUND.")] * n)
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path_factory.mktemp("logs")), display="none", epochs=2)
    assert log.status == "success"
    return Path(log.location)


@pytest.fixture
def run_copy(smoke_run, tmp_path) -> Path:
    """A copy of the smoke run folder: every import here writes into it (``--run``)."""
    dest = tmp_path / "run"
    shutil.copytree(smoke_run.run_dir, dest)
    return dest


def _import(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``compaction-lab import-inspect ARGS`` in this process: exit code, stdout, stderr."""
    code = main(["import-inspect", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    """The error line of a refused command, asserting it is the only thing it said and no traceback."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _rewrite(
    src: Path,
    dest: Path,
    sample: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    header: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Path:
    """Copy an ``.eval`` log, each sample (and the header) passed through a change; deflate-compressed."""
    import inspect_ai.log  # noqa: F401  # zipfile reads Inspect's zstd members once Inspect is imported

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.startswith("samples/") and sample is not None:
                changed = sample(json.loads(data))
                if changed is None:
                    continue
                data = json.dumps(changed).encode()
            elif info.filename == "header.json" and header is not None:
                data = json.dumps(header(json.loads(data))).encode()
            zout.writestr(info.filename, data)
    return dest


def _samples(log: Path) -> int:
    import inspect_ai.log  # noqa: F401  # registers zstd for zipfile

    with zipfile.ZipFile(log) as z:
        return sum(1 for n in z.namelist() if n.startswith("samples/"))


# --------------------------------------------------------------------------- item 7: one log twice


def test_a_log_and_its_copy_count_once(capsys, made_log, run_copy, tmp_path):
    """``import-inspect LOG COPY``: the copy is the same content, read once; draws stay the epochs."""
    copy = tmp_path / "copy.eval"
    shutil.copyfile(made_log, copy)
    code, _, err = _import(capsys, str(made_log), str(copy), "--run", str(run_copy))
    assert code == 0, err
    rows = runfolder.load_table(run_copy, "exam_inspect")
    assert len(rows) == _samples(made_log)
    summary = [ln for ln in err.splitlines() if "mockllm/model (Inspect)" in ln]
    assert summary and all(f"x {EPOCHS} draws" in ln for ln in summary), err
    assert re.search(r"copy\.eval: the same content as .*, skipped", err), err


def test_the_same_samples_in_two_logs_count_once(capsys, made_log, run_copy, tmp_path):
    """A log repacked (other bytes, same samples) and one given another eval id: a sample x epoch of a model
    is one answer whichever log holds it, in one command or across commands."""
    repacked = _rewrite(made_log, tmp_path / "repacked.eval")
    code, _, err = _import(capsys, str(made_log), str(repacked), "--run", str(run_copy))
    assert code == 0, err
    n = _samples(made_log)
    assert len(runfolder.load_table(run_copy, "exam_inspect")) == n
    assert f"{n} duplicate samples dropped" in err, err

    def other_id(h: dict[str, Any]) -> dict[str, Any]:
        h["eval"]["eval_id"] = "another-eval-id"
        return h

    renamed = _rewrite(made_log, tmp_path / "renamed.eval", header=other_id)
    code, _, err = _import(capsys, str(renamed), "--run", str(run_copy))
    assert code == 0, err
    rows = runfolder.load_table(run_copy, "exam_inspect")
    assert len(rows) == n and f"{n} duplicate samples dropped" in err, err
    assert not rows.duplicated(["reader_label", "case_id", "question_id", "strategy", "draw"]).any()


def test_two_evals_of_one_model_are_more_draws_never_merged(capsys, made_log, run_copy, tmp_path):
    """Two ``inspect eval`` runs of one model (their own eval ids and sample uuids) are independent draws: both
    are kept, their draws numbered on after each other, and the summary says twice the epochs."""

    def another_eval(h: dict[str, Any]) -> dict[str, Any]:
        h["eval"]["eval_id"] = "a-second-eval"
        return h

    def another_run(sample: dict[str, Any]) -> dict[str, Any]:
        sample["uuid"] = f"second-{sample.get('uuid')}"
        return sample

    second = _rewrite(made_log, tmp_path / "second.eval", header=another_eval, sample=another_run)
    code, _, err = _import(capsys, str(made_log), str(second), "--run", str(run_copy))
    assert code == 0, err
    rows = runfolder.load_table(run_copy, "exam_inspect")
    n = _samples(made_log)
    assert len(rows) == 2 * n and "duplicate" not in err, err
    assert sorted(rows["draw"].unique()) == list(range(2 * EPOCHS))
    assert not rows.duplicated(["reader_label", "case_id", "question_id", "strategy", "draw"]).any()
    assert sorted(rows["epoch"].unique()) == list(range(1, EPOCHS + 1))
    summary = [ln for ln in err.splitlines() if "mockllm/model (Inspect)" in ln]
    assert summary and all(f"x {2 * EPOCHS} draws" in ln for ln in summary), err
    # Imported again, the first eval replaces its own rows; nothing doubles.
    code, _, err = _import(capsys, str(made_log), "--run", str(run_copy))
    assert code == 0, err
    assert len(runfolder.load_table(run_copy, "exam_inspect")) == 2 * n


# --------------------------------------------------------------------------- item 8: a log of another run


def _foreign(sample: dict[str, Any]) -> dict[str, Any]:
    sample["metadata"]["case_id"] = "other-run-" + sample["metadata"]["case_id"]
    return sample


def test_a_log_of_another_run_is_refused(capsys, made_log, run_copy, tmp_path):
    foreign = _rewrite(made_log, tmp_path / "foreign.eval", sample=_foreign)
    code, _, err = _import(capsys, str(foreign), "--run", str(run_copy))
    assert code == 2
    assert "exam bank" in _one_line_error(err) and "another run" in err
    assert not runfolder.table_path(run_copy, "exam_inspect").exists()


def test_the_foreign_samples_of_a_log_are_counted_and_skipped(capsys, made_log, run_copy, tmp_path):
    seen: list[int] = []

    def half(sample: dict[str, Any]) -> dict[str, Any]:
        seen.append(1)
        return _foreign(sample) if len(seen) % 2 else sample

    mixed = _rewrite(made_log, tmp_path / "mixed.eval", sample=half)
    code, _, err = _import(capsys, str(mixed), "--run", str(run_copy))
    assert code == 0, err
    rows = runfolder.load_table(run_copy, "exam_inspect")
    foreign = (len(seen) + 1) // 2
    assert len(rows) == len(seen) - foreign
    assert not rows["case_id"].str.startswith("other-run-").any()
    assert re.search(
        rf"{foreign} of {len(seen)} samples skipped: {foreign} not a question of this run's exam bank", err
    )


def test_a_sample_that_asks_another_question_is_foreign(capsys, made_log, run_copy, tmp_path):
    """The same case and question ids with another value asked: not this run's question."""

    def other_answer(sample: dict[str, Any]) -> dict[str, Any]:
        sample["metadata"]["question"]["answer"] = "a value of another run"
        return sample

    other = _rewrite(made_log, tmp_path / "other.eval", sample=other_answer)
    code, _, err = _import(capsys, str(other), "--run", str(run_copy))
    assert code == 2 and "exam bank" in _one_line_error(err)


# --------------------------------------------------------------------------- item 14: every field checked


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda s: s["metadata"].pop(key)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda s: s["metadata"].__setitem__(key, value)


BAD_FIELDS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "no strategy": (_drop("strategy"), "strategy"),
    "projection_tokens a list": (_set("projection_tokens", [1, 2]), "projection_tokens"),
    "projection_tokens negative": (_set("projection_tokens", -5), "projection_tokens"),
    "projection_tokens past int64": (_set("projection_tokens", 10**30), "projection_tokens"),
    "decoy a string": (_set("decoy", "no"), "decoy"),
    "over_window a dict": (_set("over_window", {}), "over_window"),
    "case_id a number": (_set("case_id", 7), "case_id"),
    "unit unknown": (_set("unit", "galaxy"), "unit"),
    "round a string": (_set("round", "three"), "round"),
    "epoch zero": (lambda s: s.__setitem__("epoch", 0), "epoch"),
    "epoch a string": (lambda s: s.__setitem__("epoch", "1"), "epoch"),
    "metadata a list": (lambda s: s.__setitem__("metadata", [1]), "metadata"),
    "score value partial": (lambda s: s["scores"]["exact_value"].__setitem__("value", 0.5), "exact_value"),
    "answer a list": (lambda s: s["scores"]["exact_value"].__setitem__("answer", ["x"]), "answer"),
    "scores a string": (lambda s: s.__setitem__("scores", "C"), "exact_value"),
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_a_sample_with_a_bad_field_is_a_counted_skip(case, capsys, made_log, run_copy, tmp_path):
    change, field = BAD_FIELDS[case]
    done: list[int] = []

    def first(sample: dict[str, Any]) -> dict[str, Any]:
        if not done:
            change(sample)
            done.append(1)
        return sample

    bad = _rewrite(made_log, tmp_path / "bad.eval", sample=first)
    code, _, err = _import(capsys, str(bad), "--run", str(run_copy))
    assert code == 0, err
    assert "Traceback" not in err
    n = _samples(made_log)
    assert len(runfolder.load_table(run_copy, "exam_inspect")) == n - 1
    assert re.search(rf"1 of {n} samples skipped: 1 {field}\b", err), err


def test_a_log_with_no_usable_sample_is_one_line(capsys, made_log, run_copy, tmp_path):
    bad = _rewrite(made_log, tmp_path / "bad.eval", sample=lambda s: {**s, "metadata": {**s["metadata"], "decoy": 3}})
    code, _, err = _import(capsys, str(bad), "--run", str(run_copy))
    assert code == 2
    assert "no usable sample" in _one_line_error(err) and "decoy" in err
    assert not runfolder.table_path(run_copy, "exam_inspect").exists()


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut short: not JSON
        lambda text: json.dumps({**json.loads(text), "notebooks": [{"status": "ok"}]}),  # a notebook without its name
        lambda text: json.dumps({**json.loads(text), "notebooks": "all of them"}),
        lambda text: json.dumps([1, 2]),
    ],
    ids=["cut", "no-notebook-name", "notebooks-a-string", "a-list"],
)
def test_a_damaged_run_json_is_refused_before_anything_is_written(damage, capsys, made_log, run_copy):
    path = run_copy / "run.json"
    path.write_text(damage(path.read_text(encoding="utf-8")), encoding="utf-8")
    before = (run_copy / "report.html").read_bytes()
    code, _, err = _import(capsys, str(made_log), "--run", str(run_copy))
    assert code == 2
    assert "run.json" in _one_line_error(err)
    assert not runfolder.table_path(run_copy, "exam_inspect").exists()  # all or nothing
    assert (run_copy / "report.html").read_bytes() == before


def test_a_damaged_run_json_keeps_the_earlier_import(capsys, made_log, run_copy, tmp_path):
    """A second import into a folder whose run.json broke in between: the first import's table stays whole."""
    code, _, err = _import(capsys, str(made_log), "--run", str(run_copy))
    assert code == 0, err
    table = runfolder.table_path(run_copy, "exam_inspect")
    first = table.read_bytes()
    (run_copy / "run.json").write_text("{", encoding="utf-8")
    other = _rewrite(made_log, tmp_path / "other.eval", header=lambda h: {**h, "eval": {**h["eval"], "model": "x/y"}})
    code, _, err = _import(capsys, str(other), "--run", str(run_copy))
    assert code == 2 and "run.json" in _one_line_error(err)
    assert table.read_bytes() == first
    assert not list(run_copy.glob(".*.tmp"))


# --------------------------------------------------------------------------- item 15: links from run.json


@pytest.mark.parametrize(
    "link", ["javascript:alert(document.domain)", "JaVaScRiPt:alert(1)//x.html", "../../etc/passwd", "/etc/passwd"]
)
def test_the_refreshed_report_links_only_into_the_run_folder(link, capsys, made_log, run_copy):
    info = json.loads((run_copy / "run.json").read_text(encoding="utf-8"))
    for nb in info["notebooks"]:
        nb["html"] = link
        nb["output"] = link
    (run_copy / "run.json").write_text(json.dumps(info), encoding="utf-8")
    code, _, err = _import(capsys, str(made_log), "--run", str(run_copy))
    assert code == 0, err
    page = (run_copy / "report.html").read_text(encoding="utf-8")
    hrefs = re.findall(r"""href\s*=\s*["']?([^"'\s>]*)""", page, flags=re.IGNORECASE)
    assert hrefs
    for href in hrefs:
        assert not re.match(r"[a-z][a-z0-9+.-]*:", href, flags=re.IGNORECASE), href  # no scheme at all
        assert not href.startswith("/") and ".." not in href.split("/"), href
    assert "javascript:" not in page.lower().replace("javascript:void", "")


# --------------------------------------------------------------------------- item 16: a huge answer


def _answer(text: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(sample: dict[str, Any]) -> dict[str, Any]:
        sample["scores"]["exact_value"]["answer"] = text
        return sample

    return change


def test_a_long_answer_is_kept_cut_and_counted(capsys, made_log, run_copy, tmp_path):
    from compaction_lab.inspect import logs

    long = _rewrite(made_log, tmp_path / "long.eval", sample=_answer("7" * (logs.MAX_ANSWER_CHARS * 50)))
    code, _, err = _import(capsys, str(long), "--run", str(run_copy))
    assert code == 0, err
    given = runfolder.load_table(run_copy, "exam_inspect")["given"]
    assert given.str.len().max() <= logs.MAX_ANSWER_CHARS + 100
    assert given.str.contains("answer cut").all()
    assert f"{_samples(made_log)} answers over {logs.MAX_ANSWER_CHARS:,} characters cut" in err, err


def test_a_sample_over_the_read_limit_is_refused_by_its_size(made_log, tmp_path):
    """A zip bomb: one sample whose answer inflates to more than a sample may take. The zip directory says
    its size, so it is skipped unread: the memory the read takes stays far below the member."""
    import inspect_ai.log  # noqa: F401  # registers zstd for zipfile

    from compaction_lab.inspect import logs

    bomb = tmp_path / "bomb.eval"
    size = logs.MAX_MEMBER_BYTES + 2**20
    with zipfile.ZipFile(made_log) as zin, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        names = [n for n in zin.namelist() if n.startswith("samples/")]
        for info in zin.infolist():
            if info.filename != names[0]:
                zout.writestr(info.filename, zin.read(info))
                continue
            head, _, tail = json.dumps(_answer("@@bomb@@")(json.loads(zin.read(info)))).partition("@@bomb@@")
            with zout.open(info.filename, "w", force_zip64=True) as member:  # written a megabyte at a time
                member.write(head.encode())
                chunk = b"A" * 2**20
                for _ in range(size // len(chunk)):
                    member.write(chunk)
                member.write(tail.encode())
    assert bomb.stat().st_size < 2 * made_log.stat().st_size + 2**20  # a small file ...
    tracemalloc.start()
    try:
        read = logs.read_log(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < logs.MAX_MEMBER_BYTES // 4  # ... never inflated
    assert len(read.rows) == len(names) - 1
    assert read.skipped == {f"over the {logs.MAX_MEMBER_BYTES // 2**20} MiB a sample may take": 1}


def test_a_json_log_over_the_read_limit_is_one_line(capsys, made_log, run_copy, tmp_path, monkeypatch):
    from inspect_ai.log import read_eval_log, write_eval_log

    from compaction_lab.inspect import logs

    as_json = tmp_path / "log.json"
    write_eval_log(read_eval_log(str(made_log)), str(as_json), format="json")
    code, _, err = _import(capsys, str(as_json), "--run", str(run_copy))  # read whole, under the limit
    assert code == 0, err
    assert len(runfolder.load_table(run_copy, "exam_inspect")) == _samples(made_log)
    monkeypatch.setattr(logs, "MAX_MEMBER_BYTES", as_json.stat().st_size - 1)
    code, _, err = _import(capsys, str(as_json), "--run", str(run_copy))
    assert code == 2 and "inspect log convert" in _one_line_error(err)


def test_a_log_that_is_not_one_is_one_line(capsys, run_copy, tmp_path):
    for name, data in {
        "junk.eval": b"PK\x03\x04 not a zip",
        "junk.json": b"[" * 100_000,
        "bin.json": b"\xff\xfe",
    }.items():
        (tmp_path / name).write_bytes(data)
        code, _, err = _import(capsys, str(tmp_path / name), "--run", str(run_copy))
        assert code == 2 and name in _one_line_error(err)
    os.mkfifo(tmp_path / "fifo.eval")  # opening it would wait for a writer for ever
    (tmp_path / "folder.eval").mkdir()
    for name in ("fifo.eval", "folder.eval", "missing.eval"):
        code, _, err = _import(capsys, str(tmp_path / name), "--run", str(run_copy))
        assert code == 2 and name in _one_line_error(err)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("header.json", "[" * 100_000)
    (tmp_path / "deep.eval").write_bytes(zipped.getvalue())
    code, _, err = _import(capsys, str(tmp_path / "deep.eval"), "--run", str(run_copy))
    assert code == 2 and "deep.eval" in _one_line_error(err)
