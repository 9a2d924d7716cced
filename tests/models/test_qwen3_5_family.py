"""Qwen3.5 / 3.6 / 3.8 dense GDN hybrids (``model_type: qwen3_5``) from Qwen/Qwen3.6-27B's config.json
(tests/data/hf/qwen3.6-27b: its ``text_config`` beside a vision tower), read as the Qwen3-Next family.

Shapes (text_config): h = 5,120; 64 layers, ``layer_types`` every 4th full (3, 7, ..., 63 = 16 full, 48 Gated
DeltaNet); gated attention 24 heads, 4 kv heads, head_dim 256 (``attn_output_gate``: q_proj 2 × 24 × 256 rows);
GDN nk = 16 key heads × dk 128, nv = 48 value heads × dv 128, conv kernel 4; a dense MLP of 17,408 on every
layer; vocab 248,320 untied; ``mamba_ssm_dtype`` float32; 262,144 positions; bf16.

Engines: vLLM ``model_executor/models/qwen3_5.py`` and SGLang ``srt/models/qwen3_5.py`` build the GDN layers and
their state shape as Qwen3-Next's (``MambaStateShapeCalculator.gated_delta_net_state_shape``; SGLang
``Mamba2StateShape.create``); vLLM ``model_executor/models/config.py`` ``MODELS_CONFIG_MAP`` sends
``Qwen3_5ForConditionalGeneration`` to ``Qwen3_5ForConditionalGenerationConfig``, which sets
``mamba_ssm_cache_dtype`` "auto" to the text config's ``mamba_ssm_dtype`` (Qwen3-Next keeps the model dtype).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.cache import FullAttention, LinearState
from kvplan.models.from_hf import load_model

CONFIG = Path(__file__).resolve().parents[1] / "data" / "hf" / "qwen3.6-27b" / "config.json"


@pytest.fixture(scope="module")
def arch() -> Any:
    return load_model(str(CONFIG))


def test_layers_from_the_text_config(arch: Any) -> None:
    assert arch.num_layers == 64 and arch.is_hybrid
    full = [layer.index for layer in arch.layers if isinstance(layer.caches[0], FullAttention)]
    assert full == list(range(3, 64, 4))  # layer_types: linear × 3, full, ... (16 full)
    assert arch.layers[3].caches == (FullAttention(4, 256, 256, 24),)
    state = arch.layers[0].caches[0]
    assert isinstance(state, LinearState)
    assert (state.num_heads, state.num_k_heads, state.head_k_dim, state.head_v_dim, state.conv_kernel) == (
        48, 16, 128, 128, 4,
    )  # fmt: skip
    # mtp_num_hidden_layers 1 (vLLM qwen3_5_mtp.py: getattr(config, "mtp_num_hidden_layers", 1))
    assert arch.max_position_embeddings == 262_144 and arch.num_mtp_layers == 1


def test_state_bytes_per_engine(arch: Any) -> None:
    state = arch.layers[0].caches[0]
    # one request, one layer, TP 1: conv (4 − 1) × (2 × 16 × 128 + 48 × 128 = 10,240) × 2 B = 61,440 B;
    # recurrent 48 × 128 × 128 = 786,432 elements × 4 B (float32 on both engines: SGLang mamba2_state_dtype reads
    # mamba_ssm_dtype, vLLM Qwen3_5ForConditionalGenerationConfig copies it into mamba_ssm_cache_dtype)
    assert state.bytes_per_request(1, "sglang") == 61_440 + 786_432 * 4 == 3_207_168
    assert state.bytes_per_request(1, "vllm") == 3_207_168  # was 61,440 + 786,432 × 2 = 1,634,304 (bf16)


def test_qwen3_5_for_causal_lm_keeps_vllm_model_dtype(tmp_path: Path) -> None:
    # vLLM's MODELS_CONFIG_MAP names only the ...ForConditionalGeneration classes: a text-only Qwen3_5ForCausalLM
    # keeps mamba_ssm_cache_dtype "auto" = the model dtype (bf16) on vLLM, while SGLang still reads float32
    data = json.loads(CONFIG.read_text(encoding="utf-8"))
    text = {**data["text_config"], "architectures": ["Qwen3_5ForCausalLM"]}
    (tmp_path / "config.json").write_text(json.dumps(text), encoding="utf-8")
    state = load_model(str(tmp_path / "config.json")).layers[0].caches[0]
    assert state.bytes_per_request(1, "vllm") == 61_440 + 786_432 * 2
    assert state.bytes_per_request(1, "sglang") == 3_207_168


def test_parameters_against_the_published_checkpoint(arch: Any) -> None:
    # language model, as kvplan counts it (kvplan.models.params_qwen3_next, per group):
    #   attention (16 full): (2 × 24 × 256 × 5,120 q+gate + 5,120 × 6,144 o) × 16 = 1,509,949,440
    #   kv_proj: 2 × 1,024 × 5,120 × 16 = 167,772,160
    #   GDN (48): (16,384 × 5,120 qkvz + 96 × 5,120 ba + 5,120 × 6,144 out + 10,240 × 4 conv + 96) × 48 = 5,562,044,928
    #   dense MLP: 3 × 17,408 × 5,120 × 64 = 17,112,760,320; embeddings + head 2 × 248,320 × 5,120 = 2,542,796,800
    #   norms: 5,120 + 16 × 2 × 256 + 48 × 128 + 64 × 2 × 5,120 = 674,816
    groups = {g.name: g.params for g in arch.param_groups if g.params}
    assert groups == {
        "attention": 1_509_949_440, "kv_proj": 167_772_160, "linear_attention": 5_562_044_928,
        "dense_mlp": 17_112_760_320, "embeddings": 2_542_796_800, "norms": 674_816,
        # the MTP layer (weights per GPU count it only with speculative decoding): fc 5,120 × 10,240 + 3 norms +
        # 2 layer norms + gated attention 62,914,560 + 10,485,760 + 31,457,280 + q/k norms 512 + the dense MLP
        # 267,386,880 (vLLM qwen3_5_mtp.py) = 424,699,392
        "mtp": 424_699_392,
    }  # fmt: skip
    counted = sum(groups.values())
    # what kvplan leaves out (its assumption says so): the vision tower (Qwen3-VL's: patch 3 × 2 × 16 × 16 × 1,152
    # + 1,152, positions 2,304 × 1,152, 27 blocks of 15,239,504, merger 44,838,656) = 460,730,096
    vision = 460_730_096
    # published: model.safetensors.index.json total_size "55.56 GB" bf16 (eadst.com/blog/325, Qwen3.6-27B's
    # config.json and index, "反推参数量约 27.78 B")
    assert 55_555_000_000 <= 2 * (counted + vision) < 55_565_000_000
    assert any("vision tower" in a for a in arch.weights_assumptions)


def test_a_bad_text_config_field_names_its_key(tmp_path: Path) -> None:
    data = json.loads(CONFIG.read_text(encoding="utf-8"))
    data["text_config"]["layer_types"] = data["text_config"]["layer_types"][:10]
    (tmp_path / "config.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="layer_types"):
        load_model(str(tmp_path / "config.json"))


def test_the_moe_member_against_a_real_vllm_pool() -> None:
    # Qwen/Qwen3.6-35B-A3B (Qwen3_5MoeForConditionalGeneration, tests/data/hf/qwen3.6-35b-a3b): 40 layers, 10 full
    # (2 kv heads × 256), 30 GDN (16 key / 32 value heads of 128), mamba_ssm_dtype float32
    arch = load_model(str(CONFIG.parent.parent / "qwen3.6-35b-a3b" / "config.json"))
    assert sum(isinstance(layer.caches[0], FullAttention) for layer in arch.layers) == 10
    state = arch.layers[0].caches[0]
    # vLLM, TP 1: conv 3 × (2 × 16 × 128 + 32 × 128) × 2 B = 49,152 + recurrent 32 × 128 × 128 × 4 B = 2,097,152
    page = state.bytes_per_request(1, "vllm")
    assert page == 2_146_304
    # tests/data/logs/doctor-vllm-hybrid-gdn-qwen3.6-35b-a3b-nvfp4-5090-club-3090-612.log (vLLM 0.24.0, RTX 5090,
    # tp 1, fp8 KV, max_model_len 131,072, enable_prefix_caching True): "Available KV cache memory: 5.98 GiB",
    # "GPU KV cache size: 567,978 tokens". The attention page of one token and layer is 2 × 256 × 2 × 1 B = 1,024 B;
    # block 16 × cdiv(2,146,304, 16 × 1,024) = 2,096 tokens (the Mamba page exactly: no padding); 4 groups of 10
    # layers, 10 × 2,096 × 1,024 = 21,463,040 B a block. A request of 131,072 tokens: cdiv(131,072, 2,096) = 63
    # attention blocks + 3 GDN groups × 2 ('align': the running state and one cached state) = 69.
    block = 16 * -(-page // (16 * 1024))
    assert block == 2_096 and block * 1024 == page
    # the one block count whose bytes print as 5.98 GiB: 299 × 21,463,040 = 6,417,448,960 B = 5.977 GiB
    fits = [n for n in range(1, 1000) if round(n * 10 * block * 1024 / (1 << 30), 2) == 5.98]
    assert fits == [299]
    assert int(299 / (63 + 6) * 131_072) == 567_978  # the log's pool, to the token
    # the bf16 state kvplan used before (recurrent 2 B): page 1,097,728, block 1,072, 10,977,280 B a block:
    # 584 blocks in 5.98 GiB / (123 + 6) × 131,072 = 593,380 tokens, not the log's
    assert state.bytes_per_request(1, "sglang") == page


def test_the_float32_state_against_a_real_vllm_page_alignment() -> None:
    # tests/data/logs/doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log (a Qwen3.5 start on XPU, tp 2;
    # the figures fit Qwen3.5-9B: GDN 16 key / 32 value heads of 128, 4 kv heads of 256): "Setting attention block
    # size to 528 tokens", "Padding mamba page size by 0.76%". The GDN state of a Qwen3_5ForConditionalGeneration on
    # vLLM, one layer and rank: conv 3 × (2 × 16 × 128 + 32 × 128) / 2 × 2 B = 24,576 + recurrent 16 × 128 × 128 ×
    # 4 B = 1,048,576 (float32, vLLM Qwen3_5ForConditionalGenerationConfig) = 1,073,152 B
    state = LinearState("gated_deltanet", 32, 16, 128, 128, 4, "float32", vllm_reads_ssm_dtype=True)
    page = state.bytes_per_request(2, "vllm")
    assert page == 1_073_152
    row = 2 * 256 * 2 * 2  # attention bytes of one token, layer and rank: 2 kv heads × 256 × (K, V) × 2 B
    block = 16 * -(-page // (16 * row))  # HybridAttentionMambaModelConfig: 16 × cdiv(mamba page, 16 × row)
    assert block == 528 and f"{100 * (block * row - page) / page:.2f}%" == "0.76%"
    # the model dtype (bf16) would give 548,864 B and a block of 272 tokens: not the log's
    bf16 = LinearState("gated_deltanet", 32, 16, 128, 128, 4, "float32").bytes_per_request(2, "vllm")
    assert 16 * -(-bf16 // (16 * row)) == 272
