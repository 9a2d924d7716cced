"""RoPE scaling read from a model card and from config.json (kvplan/models/rope.py), pinned at the bounds the
mutation check moves.

A card's YaRN (``documented_rope_scaling``): Qwen3-32B's card, "Processing Long Texts": factor 4.0 over 32,768
native positions; vLLM ``_get_and_verify_max_len`` (vllm/config/model.py) derives original × factor positions.
A config.json's ``rope_scaling`` (or transformers v5's ``rope_parameters``) is read as loosely as the engines read
it: a factor that is not a number in (0, 1024] or an original that is not a positive integer is left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.errors import ConfigError
from kvplan.models.from_hf import load_model
from kvplan.models.rope import RopeScaling, config_rope

PRESET = Path(__file__).parents[2] / "kvplan" / "configs" / "models" / "qwen3-32b.yaml"


def _model(tmp_path: Path, factor: object) -> str:
    doc = yaml.safe_load(PRESET.read_text())
    doc["documented_rope_scaling"]["factor"] = factor
    doc["name"] = "qwen3-32b-card"
    path = tmp_path / "qwen3-32b-card.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_yarn_covers_original_times_factor() -> None:
    # 32,768 × 4.0 = 131,072; 40,000 × 2.5 = 100,000 (neither the original alone nor original // factor)
    assert RopeScaling("yarn", 4.0, 32_768, "card").context_tokens == 131_072
    assert RopeScaling("yarn", 2.5, 40_000, "card").context_tokens == 100_000


@pytest.mark.parametrize("factor", [1.5, 1024])
def test_a_card_factor_above_1_up_to_1024_is_read(tmp_path: Path, factor: float) -> None:
    rope = load_model(_model(tmp_path, factor)).documented_rope_scaling
    assert rope is not None and rope.factor == factor
    assert rope.context_tokens == int(32_768 * factor)  # 49,152 and 33,554,432


@pytest.mark.parametrize("factor", [1, 1.0, 0.5, 1025, True, "4"])
def test_a_card_factor_outside_the_range_is_refused(tmp_path: Path, factor: object) -> None:
    # a factor of 1 scales nothing: the card would document no YaRN
    with pytest.raises(ConfigError, match=r"documented_rope_scaling\.factor: expected a number above 1"):
        load_model(_model(tmp_path, factor))


def test_the_config_factor_and_original_as_shipped() -> None:
    rs = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32_768}
    assert config_rope({"rope_scaling": rs}) == config_rope({"rope_parameters": rs})
    got = config_rope({"rope_parameters": rs})  # transformers v5 spells it rope_parameters
    assert got is not None and (got.rope_type, got.factor, got.original_max_position_embeddings) == (
        "yarn",
        4.0,
        32_768,
    )


@pytest.mark.parametrize(
    ("factor", "read"),
    [(1.0, 1.0), (1024, 1024.0), (1025, None), (0, None), (True, None), ("4", None)],
)
def test_a_config_factor_in_0_to_1024_is_read(factor: object, read: float | None) -> None:
    # a factor of 1.0 (llama3-style configs ship one) is a number the engines read; a bool or a string is not
    got = config_rope({"rope_scaling": {"rope_type": "yarn", "factor": factor}})
    assert got is not None and got.factor == read


@pytest.mark.parametrize(("original", "read"), [(1, 1), (4_096, 4_096), (0, None), (-1, None), (True, None)])
def test_a_config_original_is_a_positive_integer(original: object, read: int | None) -> None:
    got = config_rope({"rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": original}})
    assert got is not None and got.original_max_position_embeddings == read and got.rope_type == "yarn"


def test_the_decoders_own_config_only_when_the_top_has_no_positions() -> None:
    rs = {"rope_type": "yarn", "factor": 4.0}
    # GLM-5.3-Flash / Kimi-K3: the decoder's fields under text_config, none at the top
    nested = config_rope({"text_config": {"max_position_embeddings": 131_072, "rope_scaling": rs}})
    assert nested is not None and nested.factor == 4.0
    # positions at the top level: the top's rope_scaling is the one read, not text_config's
    top = config_rope({"max_position_embeddings": 131_072, "rope_scaling": rs, "text_config": {"rope_scaling": None}})
    assert top is not None and top.factor == 4.0
    assert config_rope({"max_position_embeddings": 131_072}) is None
