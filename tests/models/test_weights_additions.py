"""Engine additions on top of the checkpoint (kvplan.models.additions), each term derived from its formula."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.additions import Knobs, engine_additions, rotary_cache_bytes
from kvplan.models.arch import Split

HF = Path(__file__).parents[1] / "data" / "hf"


def config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF / name / "config.json").read_text())
    return data


def terms(cfg: dict[str, Any], **kw: Any) -> dict[str, int]:
    return {a.name: a.bytes for a in engine_additions(cfg, Knobs(**kw))}


def test_glm53_vllm_tp8_terms() -> None:
    got = terms(config("glm-5.3"), engine="vllm", split=Split.of(tp=8))
    # one cos/sin cache: indexer_rope_interleave true -> the indexer's rope is the MLA rope (neox False)
    # 1,048,576 positions × qk_rope 64 × 2 B
    assert got["rotary_cache"] == 1_048_576 * 64 * 2 == 134_217_728
    # kv_b_proj is fp8: bf16 W_UV/W_UK_T, 512 × 64/8 heads × (192 + 256) × 2 B a layer, 78 layers
    assert got["mla_absorbed"] == 78 * 512 * 8 * 448 * 2 == 286_261_248
    # 8,192 batched tokens × index_topk 2,048 × int32
    assert got["topk_indices_buffer"] == 8192 * 2048 * 4 == 67_108_864
    # 21 full layers (freq 4, offset 3) × (min(8,192, 1,024 × 1) + 1) × 2,048 × 4 B
    assert got["physical_topk_indices"] == 21 * 1025 * 2048 * 4 == 176_332_800
    # 57 shared layers' indexers not built: wq_b fp8 4,096 × 2,048 + scales 32 × 16 × 4; wk 128 × 6,144 + 1 × 48
    # × 4; weights_proj bf16 32 × 6,144 × 2; k_norm weight + bias 2 × 128 × 2
    indexer = 8_388_608 + 2_048 + 786_432 + 192 + 393_216 + 512
    assert got["indexer_not_built"] == -57 * indexer == -545_547_456
    # wk in bf16 on the 21 built: 128 × 6,144 × 2 − (786,432 + 192)
    assert got["indexer_wk_bf16"] == 21 * (1_572_864 - 786_624) == 16_511_040
    assert "mtp_shared_embed_head" not in got


def test_glm53_vllm_mtp_terms() -> None:
    got = terms(config("glm-5.3"), engine="vllm", split=Split.of(tp=8), with_mtp=True, speculative_tokens=5)
    # GLM's MTP layer ships no embed/head of its own (config_tensors.mtp_ships_embed_head): nothing to free
    assert "mtp_shared_embed_head" not in got
    assert got["mla_absorbed"] == 79 * 3_670_016
    assert got["topk_indices_buffer"] == 2 * 67_108_864  # the MTP module's own buffer
    # rows = min(8,192, 1,024 × (1 + 5)) = 6,144; 21 + 1 (MTP) index groups
    assert got["physical_topk_indices"] == 22 * 6145 * 2048 * 4


def test_sglang_absorbs_whatever_the_dtype() -> None:
    cfg = config("deepseek-v3")
    got = terms(cfg, engine="sglang", split=Split.of(tp=8))
    # w_kc + w_vc bf16 copies: 512 × 128/8 heads × (128 + 128) × 2 B, 61 layers; no DSA terms
    assert got["mla_absorbed"] == 61 * 512 * 16 * 256 * 2 == 255_852_544
    assert set(got) == {"rotary_cache", "mla_absorbed"}
    bf16 = {k: v for k, v in cfg.items() if k != "quantization_config"}
    assert terms(bf16, engine="sglang", split=Split.of(tp=8))["mla_absorbed"] == 255_852_544
    # vLLM views a bf16 kv_b_proj (no copy): no absorbed term
    assert "mla_absorbed" not in terms(bf16, engine="vllm", split=Split.of(tp=8))


def test_rotary_cache_positions() -> None:
    # DeepSeek-V3: yarn, factor 40 × original 4,096 = 163,840 positions × 64 × 2 B
    assert rotary_cache_bytes(config("deepseek-v3")) == 163_840 * 64 * 2
    # DeepSeek-V3.2 has an indexer without indexer_rope_interleave: a second, neox-style cache
    v32 = config("deepseek-v3.2")
    assert rotary_cache_bytes(v32) == 2 * 163_840 * 64 * 2
    # Qwen3-8B: 40,960 positions × head_dim 128 × 2 B
    assert rotary_cache_bytes(config("qwen3-8b")) == 40_960 * 128 * 2


def test_unknown_engine_is_an_error() -> None:
    with pytest.raises(ConfigError, match="engine 'trt'"):
        engine_additions(config("qwen3-8b"), Knobs(engine="trt", split=Split.of(tp=1)))


def test_deepseek_mtp_shares_embed_and_head() -> None:
    # DeepSeek-V3's layer 61 ships embed_tokens and shared_head.head; the drafter uses the target's:
    # 129,280 rows (2,020 × 64) / 8 × 7,168 × 2 B each, freed
    got = terms(config("deepseek-v3"), engine="vllm", split=Split.of(tp=8), with_mtp=True)
    assert got["mtp_shared_embed_head"] == -2 * 16_160 * 7168 * 2 == -463_339_520
    assert "mtp_shared_embed_head" not in terms(config("deepseek-v3"), engine="vllm", split=Split.of(tp=8))
