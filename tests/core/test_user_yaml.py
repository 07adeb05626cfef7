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
    with pytest.raises(user_yaml.UserYamlError, match=r"endpoint preset .*folder\.yaml: cannot read it"):
        (tmp_path / "folder.yaml").mkdir()
        user_yaml.load(tmp_path / "folder.yaml", "endpoint preset")
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
