"""models/cache.py read number by number: what each cache kind keeps per token and per request, and the
`models show` lines that print it (issue 26). Sizes from the engines' pool code: SGLang MHATokenToKVPool /
MLATokenToKVPool / MambaPool, vLLM FullAttentionSpec / MLAAttentionSpec / MambaSpec; shapes from each preset's
Hugging Face config, at tp 8.
"""

from __future__ import annotations

import dataclasses

from kvplan.models.cache import (
    KV_DTYPE_BYTES,
    CompressedAttention,
    FullAttention,
    IndexerK,
    LinearState,
    MlaLatent,
    SlidingWindow,
    describe_kinds,
    kv_dtype_bytes,
    layer_groups,
    request_bytes,
    request_bytes_by_kind,
)
from kvplan.models.costs import CostBasis
from kvplan.models.deploy import KV_CACHE_DTYPES
from kvplan.models.formats import MlaLayout
from kvplan.models.from_hf import load_model


def test_describe_gqa_and_mla() -> None:
    # Llama-3.1-8B: 8 kv heads / tp 8 = 1 a rank; K + V of 128 in bf16: 2 × 128 × 2 = 512 B a layer × 32 = 16,384
    assert describe_kinds(load_model("llama-3.1-8b").layers, 8) == (
        "32 × GQA, 8 kv heads × 128 → 1 per rank at tp 8 (16,384 B/token bf16)",
    )
    # DeepSeek-V3: latent 512 + rope 64 = 576 elements a layer, bf16 1,152 B × 61 = 70,272; raw fp8 576 × 61 = 35,136
    assert describe_kinds(load_model("deepseek-v3").layers, 8) == (
        "61 × MLA, latent 512 + rope 64, replicated on every rank (70,272 B/token bf16, 35,136 raw fp8)",
    )
    # GLM-5.3's indexer: 128 fp8 + one fp32 scale = 132 B on each of 21 layers = 2,772
    assert describe_kinds(load_model("glm-5.3").layers, 8)[1] == (
        "21 × indexer K, head_dim 128, kpool 1 (2,772 B/token: fp8 + fp32 scale per 128)"
    )


def test_describe_hybrid_kinds() -> None:
    # gpt-oss-120b: 8 kv heads × 64 / tp 8: K + V 2 × 64 × 2 B = 256 B a layer × 18 = 4,608 B/token; a
    # 128-token window keeps at most 128 × 4,608 = 589,824 B
    assert describe_kinds(load_model("gpt-oss-120b").layers, 8)[0] == (
        "18 × sliding window 128 + sinks, 8 kv heads × 64 → 1 per rank at tp 8 (4,608 B/token bf16, at most 128"
        " tokens: 589,824 B per request)"
    )
    # Qwen3-Next GDN: conv (kernel 4 − 1) × conv_dim (2 × 16 × 128 + 32 × 128 = 8,192) / tp 8 = 3,072 elements,
    # recurrent 32 / 8 heads × 128 × 128 = 65,536. SGLang: conv bf16, ssm fp32 (mamba2_state_dtype):
    # 3,072 × 2 + 65,536 × 4 = 268,288 B × 36 layers = 9,658,368; vLLM bf16 both: 137,216 × 36 = 4,939,776
    assert describe_kinds(load_model("qwen3-next-80b-a3b").layers, 8)[0] == (
        "36 × Gated DeltaNet state: conv 3 × 8,192 + recurrent 32 × 128 × 128 per request → 3,072 + 65,536"
        " elements per rank at tp 8 (9,658,368 B per request SGLang bf16/fp32, 4,939,776 vLLM bf16/bf16)"
    )


def test_request_bytes_per_kind() -> None:
    # a 1,000-token request on Llama-3.1-8B at tp 8: 512 B a token a layer × 1,000 × 32 layers = 16,384,000 B
    ((_, layers, total),) = request_bytes_by_kind(load_model("llama-3.1-8b").layers, 1000, 8, "vllm")
    assert (layers, total) == (32, 16_384_000)
    # an MLA layer keeps every token: 1,000 × 1,152 B (bf16); nothing for no token
    latent = MlaLatent(512, 64)
    assert request_bytes(latent, 1000, 8, "vllm", mla_layout=MlaLayout.BF16) == 1_152_000
    assert request_bytes(latent, 0, 8, "vllm") == 0


def test_compressed_attention_states() -> None:
    # DeepSeek-V4 C4: one compressed state per 4 whole tokens; the window-only layers (ratio 0) and a ratio of 1
    # compress nothing. 1,024 tokens: window 128 + 256 states = 384 entries × 584 B = 224,256 B
    c4 = CompressedAttention(512, 64, 128, 4)
    assert (c4.compressed_states(1023), c4.bytes_per_request(1024)) == (255, 224_256)
    assert CompressedAttention(512, 64, 128, 0).compressed_states(1024) == 0


def test_layer_groups_count_each_run_of_layers() -> None:
    # Qwen3-Next-80B-A3B (full_attention_interval 4): 48 layers, every 4th full attention (12), the other 36
    # Gated DeltaNet: two groups, 36 and 12 layers, in the order they first appear (layer 0 is GDN)
    assert [n for n, _ in layer_groups(load_model("qwen3-next-80b-a3b").layers)] == [36, 12]


# --- fresh seed 21445 (issue 26): survivors of the second sample


def test_each_kinds_cost_is_its_layers_bytes_on_one_gpu() -> None:
    # kvplan budget's kind lines: Llama-3.1-8B at tp 8, bf16: 1 kv head a rank × (128 + 128) × 2 B = 512 B a layer
    # × 32 layers = 16,384 B a token (SGLang MHATokenToKVPool: k_buffer + v_buffer per layer)
    llama = load_model("llama-3.1-8b").layers[0].caches[0]
    basis = CostBasis(attn_tp=8, kv_dtype="auto", engine="vllm", mla_layout=None)
    assert [c.bytes_per_token for c in llama.kind_costs(32, basis)] == [16_384]
    # DeepSeek-V3: 61 MLA layers × (512 + 64) × 2 B = 70,272 B a token in bf16, 35,136 in raw fp8 (MLATokenToKVPool)
    mla = MlaLatent(512, 64)
    bf16 = CostBasis(attn_tp=8, kv_dtype="auto", engine="sglang", mla_layout=MlaLayout.BF16)
    fp8 = CostBasis(attn_tp=8, kv_dtype="fp8_e4m3", engine="sglang", mla_layout=MlaLayout.FP8_RAW)
    assert [c.bytes_per_token for c in mla.kind_costs(61, bf16)] == [70_272]
    assert [c.bytes_per_token for c in mla.kind_costs(61, fp8)] == [35_136]


def test_every_kv_cache_dtype_kvplan_accepts_has_its_size_in_the_table() -> None:
    # kv_dtype_bytes' fallback (1 for an fp8 spelling, else 2) is never read for a deployment's dtype: every
    # choice the deployment reader accepts (models/deploy.py KV_CACHE_DTYPES) and vLLM's auto under --dtype
    # float32 is a key of KV_DTYPE_BYTES, each the torch element size (bf16/fp16 2, float32 4, fp8 1)
    assert set(KV_CACHE_DTYPES) | {"float32"} <= set(KV_DTYPE_BYTES)
    assert [kv_dtype_bytes(d) for d in ("bfloat16", "float16", "float32", "fp8_e5m2", "fp8_ds_mla")] == [2, 2, 4, 1, 1]


def test_kv_heads_split_over_attention_ranks_and_are_replicated_past_them() -> None:
    # Llama-3.1-8B's 8 kv heads: SGLang / vLLM get_num_kv_heads = max(1, total_num_kv_heads // tp): 8 at tp 1, 4 at
    # tp 2, 1 at tp 8 and still 1 at tp 16 (each head replicated on two ranks)
    llama = load_model("llama-3.1-8b").layers[0].caches[0]
    assert isinstance(llama, FullAttention)
    assert [llama.kv_heads_per_rank(tp) for tp in (1, 2, 8, 16)] == [8, 4, 1, 1]


# --- second fresh seed 48383


def test_a_sliding_windows_cost_is_capped_at_its_window() -> None:
    # gpt-oss-120b's 18 sliding layers at tp 8: 8 kv heads / 8 = 1 × (64 + 64) × 2 B = 256 B a layer → 4,608 B a
    # token, and a request holds at most its 128-token window of them: 128 × 4,608 = 589,824 B (vLLM
    # SlidingWindowSpec; the kind named with its sinks, which are parameters, not cache)
    window = next(
        c for layer in load_model("gpt-oss-120b").layers for c in layer.caches if isinstance(c, SlidingWindow)
    )
    basis = CostBasis(attn_tp=8, kv_dtype="auto", engine="vllm", mla_layout=None)
    (cost,) = window.kind_costs(18, basis)
    assert (cost.kind, cost.per, cost.bytes_per_token, cost.window, cost.request_max_bytes) == (
        "sliding window 128 + sinks",
        "window",
        4_608,
        128,
        589_824,
    )
    assert window_without_sinks(window).kind_costs(18, basis)[0].kind == "sliding window 128"


def window_without_sinks(w: SlidingWindow) -> SlidingWindow:
    return dataclasses.replace(w, sinks=False)


def test_the_state_and_indexer_kinds_cost_their_layers_times_their_bytes() -> None:
    sglang = CostBasis(attn_tp=1, kv_dtype="auto", engine="sglang", mla_layout=None)
    # the DSA indexer K: fp8 128 + one fp32 scale per 128 elements = 132 B a token a layer (SGLang
    # NSATokenToKVPool index_k_with_scale_buffer); 78 indexer layers: 78 × 132 = 10,296 B a token
    (idx,) = IndexerK(128).kind_costs(78, sglang)
    assert (idx.kind, idx.per, idx.bytes_per_token) == ("indexer K", "token", 10_296)
    # Gated DeltaNet, 32 value heads, 16 key heads of 128, kernel 4 (Qwen3-Next): conv_dim 2 × 16 × 128 + 32 × 128
    # = 8,192; conv (4 − 1) × 8,192 × 2 B = 49,152; recurrent 32 × 128 × 128 × 4 B (SGLang's float32 ssm) =
    # 2,097,152: 2,146,304 B a request a layer, × 36 layers = 77,266,944 B, nothing a token
    (state,) = LinearState("gated_deltanet", 32, 16, 128, 128, 4).kind_costs(36, sglang)
    assert (state.per, state.bytes_per_token, state.request_max_bytes) == ("request", 0, 77_266_944)
    # DeepSeek-V4 C4 layers: 584 B an entry (448 fp8 + 64 × 2 bf16 + 7 scale + 1 pad); 2 layers keep one state
    # per 4 tokens, 2 × 584 // 4 = 292 B a token, and a 128-token window each, 2 × 128 × 584 = 149,504 B a request
    c4, window = CompressedAttention(512, 64, 128, 4).kind_costs(2, sglang)
    assert (c4.per, c4.bytes_per_token) == ("token", 292)
    assert (window.per, window.bytes_per_token, window.window, window.request_max_bytes) == (
        "window",
        1_168,
        128,
        149_504,
    )


def test_kimi_linear_kda_state_line_names_vllm_fp32_recurrent_state() -> None:
    # vLLM MambaStateDtypeCalculator.kda_state_dtype: (model dtype, float32): conv bf16, recurrent fp32; SGLang's
    # recurrent is float32 too (mamba_ssm_dtype unset). At tp 1 a request holds 3 × 12,288 = 36,864 conv and
    # 32 × 128 × 128 = 524,288 recurrent elements a layer: 36,864 × 2 + 524,288 × 4 = 2,170,880 B, × 20 KDA layers
    # = 43,417,600 B on both engines
    line = describe_kinds(load_model("kimi-linear-48b-a3b").layers, 1)[0]
    assert line.endswith("(43,417,600 B per request SGLang bf16/fp32, 43,417,600 vLLM bf16/fp32)")
