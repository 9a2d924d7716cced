"""Preset names and paths (kvplan/models/presets.py), pinned where the mutation check moves them: each refusal's
words, a path that is missing said as a missing file (never as an unknown preset), and the schema version."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.presets import preset_names, resolve_preset


@pytest.mark.parametrize(
    ("kind", "said"),
    [("models", "--model is empty: give a model preset name"), ("deployments", "--deploy is empty: give a deployment")],
)
def test_an_empty_reference_names_its_option(kind: str, said: str) -> None:
    with pytest.raises(InputError, match=said):
        resolve_preset(kind, "  ")


def test_an_unknown_name_lists_the_presets_and_a_models_aliases() -> None:
    with pytest.raises(InputError) as e:
        resolve_preset("models", "Nope")
    assert str(e.value).startswith("unknown model preset 'Nope': choose one of deepseek-r1, deepseek-r1-0528,")
    with pytest.raises(InputError) as e:
        resolve_preset("deployments", "nope")
    listed = ", ".join(preset_names("deployments"))
    assert str(e.value) == f"unknown deployment preset 'nope': choose one of {listed}, or give a file path"
    assert "deepseek-r1" not in str(e.value)  # aliases are models'


def test_preset_names_are_the_file_stems() -> None:
    assert "glm-5.3" in preset_names("models") and "glm-5.3-8xh200-sglang" in preset_names("deployments")
    assert "qwen3.6-27b" in preset_names("models")  # a dot inside the name stays: only '.yaml' goes


@pytest.mark.parametrize("ref", ["no/such/folder", "missing.yaml", "missing.yml", "missing.json"])
def test_a_missing_path_is_a_missing_file_not_an_unknown_preset(ref: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=rf"config file {ref}: no such file"):
        resolve_preset("models", ref)


def test_a_relative_path_is_read_from_the_base(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("schema_version: 1\nname: m\n")
    doc = resolve_preset("models", "m.yaml", base=tmp_path)
    assert doc.source.endswith("m.yaml")


def test_a_newer_schema_is_refused_and_the_current_one_read(tmp_path: Path) -> None:
    # kvplan reads schema 1; a file of schema 2 was written for a newer kvplan
    path = tmp_path / "d.yaml"
    path.write_text("schema_version: 2\nmodel: llama-3.1-8b\n")
    with pytest.raises(InputError, match=r"schema_version: this file needs a newer kvplan \(schema 2 > 1\)"):
        load_deployment(str(path), [])
    path.write_text("schema_version: 1\nmodel: llama-3.1-8b\n")
    assert load_deployment(str(path), []).model == "llama-3.1-8b"
