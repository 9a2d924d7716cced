"""DeciLM / Nemotron-NAS kv heads per layer (kvplan/models/decilm.py), pinned at the boundaries the mutation check
moves: every layer's kv heads, the wrong-length and non-mapping block_configs, a group that does not divide.

vLLM ``model_executor/models/nemotron_nas.py`` ``DeciLMDecoderLayer.__init__``: a layer whose attention is not
``no_op`` builds ``DeciLMAttention`` with ``num_kv_heads = config.num_attention_heads //
block_config.attention.n_heads_in_group``; a ``no_op`` layer builds none (no KV cache).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError
from kvplan.models.from_hf import load_model


def _config(tmp_path: Path, blocks: object, layers: int = 3) -> str:
    # the shape of nvidia/Llama-3_3-Nemotron-Super-49B-v1's config.json (64 heads, hidden 8192)
    cfg = {"architectures": ["DeciLMForCausalLM"], "num_hidden_layers": layers, "num_attention_heads": 64,
           "hidden_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
           "block_configs": blocks}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _attn(group: int | None, no_op: bool = False, linear: bool = False) -> dict[str, object]:
    return {"attention": {"n_heads_in_group": group, "no_op": no_op, "replace_with_linear": linear}, "ffn": {}}


def test_each_layer_has_heads_over_its_group(tmp_path: Path) -> None:
    # 64 // 1 = 64, 64 // 2 = 32, 64 // 64 = 1 (nemotron_nas.py: num_attention_heads // n_heads_in_group);
    # a group of 2 gives 32, where heads × group would give 128 and heads % group 0
    arch = load_model(_config(tmp_path, [_attn(1), _attn(2), _attn(64)]))
    assert arch.kv_heads_per_layer == (64, 32, 1)


def test_a_no_op_layer_has_no_cache_and_one_that_is_not_has_heads(tmp_path: Path) -> None:
    # no_op True builds no Attention: 0 kv heads; the next layer (no_op False, group 8) has 64 // 8 = 8
    arch = load_model(_config(tmp_path, [_attn(None, no_op=True), _attn(8), _attn(None, no_op=True)]))
    assert arch.kv_heads_per_layer == (0, 8, 0)


@pytest.mark.parametrize("blocks", [[_attn(8), _attn(8)], [_attn(8)] * 4])
def test_block_configs_of_another_length_is_refused(tmp_path: Path, blocks: list[object]) -> None:
    # one block config a layer (DeciLMDecoderLayer reads config.block_configs[layer_idx]): 3 layers need 3
    with pytest.raises(ConfigError, match=rf"expected a list of 3 layer configs, got {len(blocks)} entries"):
        load_model(_config(tmp_path, blocks))


@pytest.mark.parametrize("bad", [5, {"ffn": {}}, {"attention": 5}])
def test_a_block_that_is_not_a_mapping_is_named(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match=r"block_configs\[1\]: expected a mapping with an 'attention' mapping"):
        load_model(_config(tmp_path, [_attn(8), bad, _attn(8)]))


def test_a_group_that_does_not_divide_the_heads_is_refused(tmp_path: Path) -> None:
    # 64 heads in groups of 3: vLLM's 64 // 3 = 21 kv heads would not tile the 64 query heads
    with pytest.raises(ConfigError, match="3 does not divide num_attention_heads 64"):
        load_model(_config(tmp_path, [_attn(8), _attn(3), _attn(8)]))
