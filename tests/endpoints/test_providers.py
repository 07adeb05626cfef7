"""Providers (``data/providers/``): each loads, builds a `ModelConfig`, names a real price table
and cache rule and carries no secret; ``--set model=NAME`` and ``--provider NAME`` resolve to them."""

from __future__ import annotations

import pytest
import yaml

from compaction_lab import cli
from compaction_lab.core import paths
from compaction_lab.core.errors import ProfileError
from compaction_lab.cost.cache import SIMULATORS
from compaction_lab.endpoints import providers
from compaction_lab.endpoints.config import ModelConfig
from compaction_lab.endpoints.prices import load_price_table
from compaction_lab.run import params
from compaction_lab.run.runner import load_profile

EXPECTED = ["anthropic", "deepseek", "llamacpp", "ollama", "openai", "vllm"]


def test_the_six_providers_are_listed() -> None:
    assert providers.list_providers() == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_provider_builds_a_model_config(name: str) -> None:
    p = providers.load_provider(name)
    assert p.name == name and p.description and p.path.parent == paths.providers_dir()
    cfg = ModelConfig.from_mapping(p.model)
    assert cfg.base_url.startswith(("http://", "https://")) and cfg.model


@pytest.mark.parametrize("name", EXPECTED)
def test_provider_price_table_exists_and_cache_rule_is_known(name: str) -> None:
    p = providers.load_provider(name)
    assert p.cache_rule in SIMULATORS
    if p.price_table is not None:
        table = load_price_table(p.price_table)
        assert table.cache_rule == p.cache_rule  # the table's own rule
    else:
        assert p.cache_rule == "none"  # a local server bills no cache


@pytest.mark.parametrize("name", EXPECTED)
def test_provider_carries_no_secret(name: str) -> None:
    p = providers.load_provider(name)
    data = yaml.safe_load(p.path.read_text(encoding="utf-8"))
    assert set(data) <= {"description", "model", "cache_rule", "source"}
    assert not [k for k in p.model if params.looks_secret(k)]
    key_env = p.model.get("api_key_env")
    assert isinstance(key_env, str), key_env
    assert key_env == "" or (key_env.isupper() and key_env.endswith("_API_KEY"))


def test_local_providers_need_no_key_and_cloud_providers_name_their_variable() -> None:
    keys = {n: providers.load_provider(n).model["api_key_env"] for n in EXPECTED}
    assert keys == {
        "anthropic": "ANTHROPIC_API_KEY",
        "deepseek": "DEEPSEEK_API_KEY",
        "llamacpp": "",
        "ollama": "",
        "openai": "OPENAI_API_KEY",
        "vllm": "",
    }
    assert providers.load_provider("anthropic").model["base_url"] == "https://api.anthropic.com/v1/"


def test_resolve_model_parameter() -> None:
    mapping = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert providers.resolve_model_parameter(mapping) is mapping
    assert providers.resolve_model_parameter("deepseek") == dict(providers.load_provider("deepseek").model)


def test_set_model_provider_name_passes_the_parameter_check() -> None:
    raw = load_profile("model").with_parameters({"model": "deepseek"})
    assert params.problems(raw)  # unresolved: a str where the notebooks declare a dict
    prof = providers.resolve_profile(raw)
    assert prof.parameters["model"] == dict(providers.load_provider("deepseek").model)
    assert params.problems(prof) == []


def test_resolve_profile_resolves_per_notebook_model() -> None:
    prof = load_profile("model")
    prof = type(prof)(
        name=prof.name,
        description=prof.description,
        notebooks=prof.notebooks,
        parameters=prof.parameters,
        notebook_parameters={"03_closed_book_exam": {"model": "openai"}},
    )
    out = providers.resolve_profile(prof)
    assert out.notebook_parameters["03_closed_book_exam"]["model"]["model"] == "gpt-4.1"


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ProfileError) as exc:
        providers.load_provider("nosuch")
    assert all(n in str(exc.value) for n in EXPECTED)
    with pytest.raises(ValueError, match="deepseek"):
        providers.resolve_profile(load_profile("model").with_parameters({"model": "nosuch"}))


def test_malformed_provider_names_the_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COMPACTION_LAB_PROVIDERS", str(tmp_path))
    (tmp_path / "bad.yaml").write_text("model: [1, 2]\n", encoding="utf-8")
    (tmp_path / "odd.yaml").write_text("description: x\nmodel: {base_url: http://h/v1, model: m}\nextra: 1\n")
    assert paths.providers_dir() == tmp_path.resolve()
    with pytest.raises(ValueError, match="bad.yaml"):
        providers.load_provider("bad")
    with pytest.raises(ValueError, match="odd.yaml"):
        providers.load_provider("odd")


def test_cli_providers_prints_the_six(capsys) -> None:
    assert cli.main(["providers"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == EXPECTED
    deepseek = next(line for line in out if line.startswith("deepseek"))
    for part in ("https://api.deepseek.com", "deepseek-flash", "DEEPSEEK_API_KEY", "cache_rule=deepseek"):
        assert part in deepseek


def test_provider_option_builds_the_overrides() -> None:
    args = cli.build_parser().parse_args(["run", "--profile", "model", "--provider", "llamacpp"])
    assert args.provider == "llamacpp"
    ex = cli.build_parser().parse_args(["exam", "--provider", "deepseek"])
    assert ex.provider == "deepseek"
    prof = load_profile(args.profile)
    declared = {k for nb in prof.notebooks for k in params.declared_parameters(nb)}
    over = providers.provider_overrides(args.provider, declared)
    assert over == {"model": dict(providers.load_provider("llamacpp").model), "figure_simulator": "none"}
    assert params.problems(prof.with_parameters(over)) == []
    cloud = providers.provider_overrides("openai", declared)
    assert cloud["figure_table"] == "gpt-4.1" and cloud["figure_simulator"] == "openai"
    assert params.problems(prof.with_parameters(cloud)) == []
    # A profile without the cost notebook gets the model only.
    assert set(providers.provider_overrides("openai", {"model"})) == {"model"}
