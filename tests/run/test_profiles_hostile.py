"""Hostile YAML handed to the lab (issue 25, items 16 and 17): binary bytes, nesting 100,000 deep, the
"billion laughs" alias bomb. Each is one short error naming the file — from `run --profile FILE`, from
`profiles`, and from every other reader of user YAML (providers, price tables, redaction
patterns, ``--set`` and sweep values) — never a traceback, and the bomb is refused before it expands."""

from __future__ import annotations

import shutil
import time
import tracemalloc
from pathlib import Path

import pytest

from compaction_lab import cli
from compaction_lab.core import bounded_json, paths, user_yaml
from compaction_lab.run import params, runner

#: Longest error a test accepts: a few lines, whatever the file holds.
SHORT = 800


def billion_laughs(levels: int = 9, key: str = "parameters") -> str:
    """Nested aliases: ``levels`` lines, each ten references to the one before (10**levels "lol"s)."""
    lines = [f"{key}:", "  l0: &l0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "description: billion laughs\n" + "\n".join(lines) + "\n"


def _deep(depth: int) -> str:
    return "parameters:\n  x: " + "[" * depth + "]" * depth + "\n"


#: name -> (file bytes, what the message must say)
HOSTILE = {
    "binary": (bytes(range(256)) * 8, "not UTF-8 text"),
    "deep-100k": (("[" * 100_000 + "]" * 100_000).encode(), f"deeper than {bounded_json.MAX_DEPTH} levels"),
    "deep-past-bound": (_deep(bounded_json.MAX_DEPTH).encode(), f"deeper than {bounded_json.MAX_DEPTH} levels"),
    "alias-bomb": (billion_laughs().encode(), "alias"),
}


def _write(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_bytes(HOSTILE[name][0])
    return path


@pytest.mark.parametrize("name", HOSTILE)
def test_load_profile_refuses_hostile_yaml_naming_the_file(tmp_path, name):
    path = _write(tmp_path, name)
    with pytest.raises(runner.ProfileError) as err:
        runner.load_profile(path)
    message = str(err.value)
    assert str(path) in message and HOSTILE[name][1] in message and len(message) < SHORT


@pytest.mark.parametrize("allow_unknown", [False, True], ids=["checked", "allow-unknown"])
@pytest.mark.parametrize("name", HOSTILE)
def test_run_with_a_hostile_profile_is_one_short_error(tmp_path, capsys, name, allow_unknown):
    """Was: a traceback (binary, deep); the bomb's error message was 1.3 MB, and with --allow-unknown the
    run reached 5 GB. Now exit 2 and one short line naming the file, in bounded time and memory."""
    path = _write(tmp_path, name)
    argv = ["run", "--profile", str(path), "--results", str(tmp_path / "results")]
    tracemalloc.start()
    start = time.perf_counter()
    try:
        code = cli.main(argv + (["--allow-unknown"] if allow_unknown else []))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and str(path) in err and HOSTILE[name][1] in err
    assert "Traceback" not in err and len(err) < SHORT
    assert time.perf_counter() - start < 10 and peak < 64 * 1024 * 1024
    assert not (tmp_path / "results").exists()  # refused before any work


def test_profiles_lists_hostile_files_as_invalid_and_the_rest_as_usual(tmp_path, monkeypatch, capsys):
    """Was: the first unreadable file's traceback ended the listing."""
    shutil.copy(paths.params_dir() / "smoke.yaml", tmp_path / "smoke.yaml")
    for name in HOSTILE:
        _write(tmp_path, name)
    monkeypatch.setenv("COMPACTION_LAB_PARAMS", str(tmp_path))
    assert cli.main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_name = {line.split()[0]: line for line in lines}
    assert set(by_name) == {"smoke", *HOSTILE}
    assert "invalid" not in by_name["smoke"]
    for name, (_, says) in HOSTILE.items():
        assert "(invalid: " in by_name[name] and says in by_name[name] and len(by_name[name]) < SHORT


def test_an_alias_bomb_is_refused_quickly_in_bounded_memory():
    """Much larger than the issue's: 10**30 "lol"s if it expanded. Refused at the first alias."""
    text = billion_laughs(30)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(
            user_yaml.UserYamlError, match=r"bomb\.yaml: YAML aliases are not allowed \(found \*l0 at line 4"
        ):
            user_yaml.loads(text, "bomb.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 2 and peak < 16 * 1024 * 1024


def test_a_wide_nested_value_is_echoed_short():
    """Without aliases, a value can still be wide and nested (4 levels of 6 items); its echo in the error
    about an unknown parameter stays short (was: every one of its 6**4 leaves quoted, up to 6**6)."""
    wide: object = "x"
    for _ in range(4):
        wide = [wide] * 6
    prof = runner.load_profile("smoke").with_parameters({"no_such_parameter": wide})
    with pytest.raises(runner.ProfileError) as err:
        params.checked(prof)
    assert "no_such_parameter" in str(err.value) and len(str(err.value)) < SHORT


@pytest.mark.parametrize("name", HOSTILE)
def test_every_reader_of_user_yaml_refuses_it_naming_the_file(tmp_path, monkeypatch, name):
    """Providers, price tables and redaction patterns share the one loader (`core.user_yaml`)."""
    from compaction_lab.endpoints.prices import load_price_table
    from compaction_lab.endpoints.providers import load_provider
    from compaction_lab.privacy.patterns import load_patterns

    path = _write(tmp_path, name)
    monkeypatch.setenv("COMPACTION_LAB_PROVIDERS", str(tmp_path))
    for read in (lambda: load_provider(name), lambda: load_price_table(path), lambda: load_patterns(path)):
        with pytest.raises(ValueError) as err:
            read()
        assert str(path) in str(err.value) and HOSTILE[name][1] in str(err.value) and len(str(err.value)) < SHORT


@pytest.mark.parametrize(
    "read",
    [
        lambda text: runner.parse_assignment(f"pointer_mix={text}"),
        lambda text: params.sweep_values("seed", text),
    ],
    ids=["--set", "sweep"],
)
def test_set_and_sweep_values_refuse_aliases(read):
    bomb = "[&a [1, 2, 3], *a, *a]"
    with pytest.raises(ValueError, match="alias"):
        read(bomb)


# --------------------------------------------------------------------------- issue 44: more hostile profiles


@pytest.mark.parametrize(
    "name, text, says",
    [
        (
            "dup",
            "notebooks: [01_context_composition]\nparameters:\n  seed: 1\n  seed: 2\n",
            "key 'seed' is given twice",
        ),
        ("bigint", "parameters:\n  seed: " + "7" * 5000 + "\n", "parameters.seed: an integer of 5,000 digits"),
    ],
)
def test_run_with_a_duplicate_key_or_an_unreadable_integer_is_one_line(tmp_path, capsys, name, text, says):
    """Was: a duplicate key kept its last value silently; a 5,000-digit integer was a ValueError traceback."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, "utf-8")
    assert cli.main(["run", "--profile", str(path), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "results").exists()


def test_set_and_sweep_values_with_an_unreadable_integer_are_one_line(tmp_path, capsys):
    digits = "7" * 5000
    base = ["run", "--profile", "smoke", "--results", str(tmp_path / "results")]
    for extra, says in (
        (["--set", f"seed={digits}"], "error: --set seed: an integer of 5,000 digits"),
        (["--sweep", f"seed=1,{digits}"], "error: --sweep seed: [1]: an integer of 5,000 digits"),
    ):
        assert cli.main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(says) and err.count("\n") == 1 and digits not in err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_fifo_given_as_the_profile_is_refused_at_once(tmp_path):
    """Was: ``run --profile FIFO`` blocked for ever, waiting for a writer."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "profile.yaml"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "compaction_lab.cli", "run", "--profile", str(fifo), "--results", str(tmp_path / "r")]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("run --profile FIFO blocked")
    assert r.returncode == 2 and r.stderr == f"error: {fifo}: not a regular file (a FIFO); give a YAML file\n", r.stderr
