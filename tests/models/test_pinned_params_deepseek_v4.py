"""DeepSeek-V4's parameter groups (kvplan/models/params_deepseek_v4.py), pinned where the mutation check moved a rule
deepseek-ai's DeepSeek-V4-Flash config.json (tests/data/hf/deepseek-v4-flash: hidden 4,096, vocab 129,280, 43
layers + 1 MTP, 44 ``compress_ratios`` ending 4, 128, 4, 0) does not reach: a tied vocabulary, and MTP layers past
the end of ``compress_ratios``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.models.weights import param_groups_from_hf

FLASH = Path(__file__).parents[1] / "data" / "hf" / "deepseek-v4-flash" / "config.json"


def _groups(**changes: Any) -> dict[str, int]:
    cfg = {**json.loads(FLASH.read_text()), **changes}
    return {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}


def test_tied_embeddings_are_one_vocab_matrix() -> None:
    # embed and head share one 129,280 × 4,096 matrix when tie_word_embeddings: 529,530,880 (twice untied)
    assert _groups(tie_word_embeddings=True)["embeddings"] == 529_530_880
    assert _groups()["embeddings"] == 2 * 529_530_880


def test_an_mtp_layer_past_the_compress_ratios_has_no_compressor() -> None:
    # MTP block k is layer 43 + k: entry 43 is 0 (window only) and a second MTP block, layer 44, is past the
    # 44-entry list: 0 as well (no compressor, no indexer), so two MTP blocks are twice one
    assert _groups(num_nextn_predict_layers=2)["mtp"] == 2 * _groups()["mtp"]


# --------------------------------------------------------------------------- fresh seed: each absent key, each ratio
# FLASH's groups (tests/models/test_params_deepseek_v4.py derives them): router 47,426,048, hyper_connections
# 33,884,439, shared_experts 1,082,130,432, indexer 225,730,176 (21 C4 layers), mtp 6,610,048,891.


def _without(*keys: str) -> dict[str, int]:
    cfg = {k: v for k, v in json.loads(FLASH.read_text()).items() if k not in keys}
    return {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}


def test_absent_counts_are_none() -> None:
    # no num_nextn_predict_layers: no MTP block (from_hf reads num_mtp_layers 0 the same way); no n_shared_experts:
    # no shared expert; no index_n_heads: no indexer (the ratio-4 layers' indexer is built only with heads)
    assert _without("num_nextn_predict_layers").get("mtp", 0) == 0
    assert _without("n_shared_experts").get("shared_experts", 0) == 0
    assert _without("index_n_heads").get("indexer", 0) == 0
    # no index_head_dim: 128, V4-Flash's own, so every group is the config's
    assert _without("index_head_dim") == _groups()


def test_no_hash_layers_puts_the_bias_on_every_layer() -> None:
    # gate 256 × 4,096 × 43 = 45,088,768, and gate.bias (noaux_tc) 256 on all 43 layers = 11,008 -> 45,099,776
    assert _without("num_hash_layers")["router"] == 45_099_776
    # no topk_method: no bias; tid2eid 129,280 × 6 on the 3 hash layers = 2,327,040 -> 47,415,808
    assert _without("topk_method")["router"] == 47_415_808
    assert _groups()["router"] == 47_426_048


def test_no_hc_mult_is_one_stream() -> None:
    # hc_mult 1: mix (2 + 1) × 1 = 3; hc_attn + hc_ffn 2 × (3 × 1 × 4,096 + 3 + 3) = 24,588 a layer, × 43 =
    # 1,057,284; hc_head 1 × 1 × 4,096 + 1 + 1 = 4,098 -> 1,061,382
    assert _without("hc_mult")["hyper_connections"] == 1_061_382


def _ratios(first: int) -> dict[str, int]:
    cfg = json.loads(FLASH.read_text())
    return _groups(compress_ratios=[first, *cfg["compress_ratios"][1:]])


def test_ratio_1_is_no_compressor_and_ratio_2_is_one() -> None:
    # vLLM DeepseekV4 attention: "Create the compressor for layers with compress_ratio > 1" (if self.compress_ratio
    # > 1: DeepseekCompressor): layer 0's ratio 0 -> 1 changes nothing
    assert _ratios(1) == _groups()
    # ratio 2 builds one (coff 1, not ratio 4's 2): wkv + wgate 2 × 512 × 4,096 = 4,194,304, ape 2 × 512 = 1,024,
    # norm 512 -> 4,195,840 more; no indexer (ratio 4 only)
    two = _ratios(2)
    assert two["compressor"] - _groups()["compressor"] == 4_195_840
    assert two["indexer"] == _groups()["indexer"]


def test_a_ratio_4_layer_has_an_overlapping_compressor_and_an_indexer() -> None:
    # layer 0 at ratio 4: compressor (coff 2) 2 × 2 × 512 × 4,096 + ape 4 × 2 × 512 + norm 512 = 8,393,216 and an
    # indexer 10,749,056 (test_params_deepseek_v4's per-layer figures)
    four = _ratios(4)
    assert four["compressor"] - _groups()["compressor"] == 8_393_216
    assert four["indexer"] - _groups()["indexer"] == 10_749_056


def test_every_mtp_layer_past_the_list_is_window_only() -> None:
    # three MTP blocks: layers 43 (entry 0), 44 and 45 (both past the 44-entry list: 0, no compressor) -> 3 × one
    assert _groups(num_nextn_predict_layers=3)["mtp"] == 3 * _groups()["mtp"] == 3 * 6_610_048_891


def test_counts_of_0_are_read_as_none() -> None:
    # 0 MTP layers, 0 indexer heads, 0 shared experts, 0 hash layers are values (minimum 0), not refused: the same
    # groups as the keys left out (test_absent_counts_are_none, test_no_hash_layers_puts_the_bias_on_every_layer)
    assert _groups(num_nextn_predict_layers=0).get("mtp", 0) == 0
    assert _groups(index_n_heads=0).get("indexer", 0) == 0
    assert _groups(n_shared_experts=0).get("shared_experts", 0) == 0
    assert _groups(num_hash_layers=0)["router"] == 45_099_776


def test_each_mtp_block_reads_its_own_ratio() -> None:
    # MTP block k is layer 43 + k (vLLM get_dsv4_compress_ratio(config, layer_idx)): a 45th entry of 128 gives the
    # second block a C128 compressor (coff 1): 2 × 512 × 4,096 + ape 128 × 512 + norm 512 = 4,260,352 more
    ratios = [*json.loads(FLASH.read_text())["compress_ratios"], 128]
    two = _groups(num_nextn_predict_layers=2, compress_ratios=ratios)
    assert two["mtp"] == 2 * 6_610_048_891 + 4_260_352
