"""The one loader of YAML people hand the lab (`compaction_lab.core.user_yaml`, issue 25 items 16 and 17)."""

from __future__ import annotations

import time

import pytest

from compaction_lab.core import bounded_json, user_yaml


def _flow(depth: int) -> str:
    return "[" * depth + "]" * depth


def _block(depth: int) -> str:
    """A block mapping nested `depth` levels (indentation, not brackets)."""
    return "".join(" " * i + "k:\n" for i in range(depth - 1)) + " " * (depth - 1) + "k: 1\n"


@pytest.mark.parametrize("make", [_flow, _block], ids=["flow", "block"])
def test_the_nesting_bound_is_exact(make):
    assert bounded_json.nests_deeper(user_yaml.loads(make(bounded_json.MAX_DEPTH), "t")) is False
    with pytest.raises(user_yaml.UserYamlError, match=f"^t: nests deeper than {bounded_json.MAX_DEPTH} levels$"):
        user_yaml.loads(make(bounded_json.MAX_DEPTH + 1), "t")


@pytest.mark.parametrize("text", [_flow(100_000), "- " * 100_000 + "x", "{a: " * 100_000])
def test_absurd_nesting_is_refused_at_once(text):
    """PyYAML alone takes minutes on ``[`` * 100,000 (its scanner is quadratic), then raises RecursionError."""
    start = time.perf_counter()
    with pytest.raises(user_yaml.UserYamlError, match="nests deeper"):
        user_yaml.loads(text, "t")
    assert time.perf_counter() - start < 2


def test_aliases_are_refused_anchors_alone_are_not():
    assert user_yaml.loads("a: &x 1\nb: 2\n", "t") == {"a": 1, "b": 2}
    for text in ("a: &x 1\nb: *x\n", "base: &b {x: 1}\nmore:\n  <<: *b\n"):
        with pytest.raises(user_yaml.UserYamlError, match=r"^t: YAML aliases are not allowed \(found \*(x|b) at line"):
            user_yaml.loads(text, "t")


def test_a_syntax_error_names_the_place_not_the_text():
    """The offending line is not quoted back: it may hold a key pasted by mistake."""
    secret = "sk-" + "Q" * 40
    with pytest.raises(user_yaml.UserYamlError) as err:
        user_yaml.loads(f"model: {{api_key: {secret}, base_url: [\n", "--set model")
    assert str(err.value).startswith("--set model: not valid YAML: ") and "line" in str(err.value)
    assert secret not in str(err.value) and len(str(err.value)) <= user_yaml.MAX_MESSAGE


def test_files_that_are_not_yaml_text(tmp_path):
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    with pytest.raises(user_yaml.UserYamlError, match=r"b\.yaml: not UTF-8 text \(byte 0x89 at offset 0\)"):
        user_yaml.load(binary)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# x\n" * (user_yaml.MAX_BYTES // 4 + 1))
    with pytest.raises(user_yaml.UserYamlError, match=r"big\.yaml: larger than"):
        user_yaml.load(big)
    with pytest.raises(user_yaml.UserYamlError, match=r"provider .*folder\.yaml: cannot read it"):
        (tmp_path / "folder.yaml").mkdir()
        user_yaml.load(tmp_path / "folder.yaml", "provider")
    control = tmp_path / "nul.yaml"
    control.write_bytes(b"a: 1\x00\n")
    with pytest.raises(user_yaml.UserYamlError, match=r"nul\.yaml: not valid YAML: "):
        user_yaml.load(control)


def test_ordinary_yaml_reads_as_safe_load_reads_it(tmp_path):
    import yaml

    text = "description: x\nparameters:\n  seed: 7\n  mix: {assistant: 0.8, user: 0.2}\n  names: [a, b]\n"
    path = tmp_path / "p.yaml"
    path.write_text(text, "utf-8")
    assert user_yaml.load(path) == yaml.safe_load(text)
    path.write_text("", "utf-8")
    assert user_yaml.load(path) is None


# --------------------------------------------------------------------------- issue 44: duplicate keys, huge integers, FIFOs


@pytest.mark.parametrize(
    "text, key, line",
    [
        ("parameters:\n  seed: 1\n  window: 2\n  seed: 2\n", "'seed'", 4),
        ("a: 1\nb: {x: 1, y: 2, x: 3}\n", "'x'", 2),
        ("1: a\n1.0: b\n", "1.0", 2),  # equal keys: one would silently replace the other
    ],
)
def test_a_key_given_twice_is_an_error_naming_it(tmp_path, text, key, line):
    """Was: the second value silently replaced the first."""
    path = tmp_path / "dup.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(user_yaml.UserYamlError) as err:
        user_yaml.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and f"key {key} is given twice" in message, message
    assert f"line {line}" in message and "\n" not in message
    # Distinct keys, and a merge key overriding what it merges, are not duplicates.
    assert user_yaml.loads("a: 1\n'1': 2\n1: 3\n", "t") == {"a": 1, "1": 2, 1: 3}
    assert user_yaml.loads("b:\n  <<: {x: 1, y: 2}\n  x: 3\n", "t") == {"b": {"x": 3, "y": 2}}


@pytest.mark.parametrize(
    "text, where",
    [
        ("parameters:\n  seed: {n}\n", "parameters.seed"),
        ("parameters:\n  mix: [1, {n}]\n", "parameters.mix[1]"),
        ("{n}\n", ""),
    ],
)
def test_an_integer_too_long_to_read_is_an_error_naming_the_parameter(tmp_path, text, where):
    """Was: Python's ``ValueError: Exceeds the limit (4300 digits)`` as a traceback."""
    path = tmp_path / "big.yaml"
    path.write_text(text.replace("{n}", "7" * 5000), "utf-8")
    with pytest.raises(user_yaml.UserYamlError) as err:
        user_yaml.load(path)
    message = str(err.value)
    named = f"{path}: {where}: " if where else f"{path}: "
    assert message.startswith(named) and "an integer of 5,000 digits" in message, message
    assert "\n" not in message and len(message) <= user_yaml.MAX_MESSAGE


def test_a_file_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    """Was: a FIFO given as the profile blocked for ever (no writer ever came)."""
    import os
    import threading

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    found: list[BaseException] = []

    def read() -> None:
        try:
            user_yaml.load(fifo)
        except BaseException as exc:  # reported by the assertion below
            found.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # let the blocked reader go before failing
        with open(fifo, "wb"):
            pass
        reader.join(10)
        pytest.fail("reading a FIFO blocked")
    assert len(found) == 1 and isinstance(found[0], user_yaml.UserYamlError), found
    assert str(found[0]) == f"{fifo}: not a regular file (a FIFO); give a YAML file"
    if os.path.exists("/dev/zero"):
        with pytest.raises(user_yaml.UserYamlError, match=r"^/dev/zero: not a regular file \(a character device\)"):
            user_yaml.load("/dev/zero")
