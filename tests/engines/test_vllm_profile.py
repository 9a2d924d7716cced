"""vLLM's profiling-run model (kvplan.engines.vllm_profile): every expected value derived from the source's shapes.

Shapes (vLLM 0.19.0): T = max_num_batched_tokens, R = min(T, max_num_seqs); sampler R × vocab × 14 B (bf16
logits 2 + float32 copy 4 + probs 4 + q 4); top-k/top-p buffer min(next_pow2(min(SMs, R)), SMs) × vocab × 4 B;
hidden states kept (T + 2R) × hidden × 2 B; forward T × (3 × I/tp + 4 × hidden) × 2 B; MoE workspace T × top_k ×
(max(I_e, hidden) + max(2·I_e, hidden)) × 2 B; cuBLAS 32 MiB; non-torch TP1 0.25 GiB, TP2 2.07 GiB, TP4+ 2.17 GiB
(as ints: 250 × 2^30 // 1000 = 268,435,456; 2,070 × 2^30 // 1000 = 2,222,645,575; 2,170 × 2^30 // 1000 =
2,330,019,758).
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm import DEFAULT_CUDAGRAPH_ESTIMATE, DEFAULT_NON_KV_OTHER, DSA_CALIBRATION_BYTES
from kvplan.engines.vllm_profile import CUBLAS_WORKSPACE_BYTES, profile_peak
from kvplan.models.activation import ActivationDims, activation_dims
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB, MiB
from tests.conftest import make_plan

LLAMA = "tests/data/hf/llama-3.1-8b/config.json"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")

# Llama-3.1-8B (hidden 4096, vocab 128,256, MLP 14,336) on H100 (132 SMs), T 8,192, R 1,024:
#   sampler     1,024 × 128,256 × 14           = 1,838,678,016
#   buffer      min(256, 132) = 132 × 128,256 × 4 = 67,719,168
#   kept        (8,192 + 2 × 1,024) × 4,096 × 2 =    83,886,080
#   sampler side                                 = 1,990,283,264  (> forward at any tp: 8,192 × (3 × 14,336 + 16,384)
#                                                                   × 2 = 973,078,528 at tp 1)
#   torch peak = 1,990,283,264 + 33,554,432 (cuBLAS) = 2,023,837,696 (2023837696 / 2^30 = 1.885 GiB; the log: 1.89)
LLAMA_TORCH_PEAK = 1_838_678_016 + 67_719_168 + 83_886_080 + 33_554_432
LLAMA_TP1_PROFILE = LLAMA_TORCH_PEAK + 268_435_456
"""2,292,273,152 B = 2.135 GiB; the TP1 log: 1.89 + 0.25 = 2.14 GiB."""
LLAMA_TP4_PROFILE = LLAMA_TORCH_PEAK + 2_330_019_758
"""4,353,857,454 B = 4.055 GiB; the TP4 log: 1.89 + 2.13 = 4.02 GiB."""


def _plan(model: str, *sets: str):  # type: ignore[no-untyped-def]
    given = {x.split("=", 1)[0] for x in sets}
    base = [s for s in ("engine_version=0.19.0", "gpu=h100") if s.split("=", 1)[0] not in given]
    dep = load_deployment(None, [f"model={model}", "engine=vllm", *base, *GQA, *sets])
    return load_model(dep.model), dep


def _peak(model: str, tp: int, ep: int = 1):  # type: ignore[no-untyped-def]
    arch, dep = _plan(model, f"tp={tp}", f"gpus_per_node={tp}")
    assert arch.activation is not None
    return profile_peak(arch.activation, gpu=dep.gpu, tp=tp, ep=ep, max_num_batched_tokens=8192, max_num_seqs=1024)


def test_llama_8b_sampler_dominates_at_every_tp() -> None:
    for tp, non_torch in ((1, 268_435_456), (2, 2_222_645_575), (4, 2_330_019_758)):
        p = _peak(LLAMA, tp)
        assert (p.tokens, p.requests) == (8_192, 1_024)
        assert p.sampler_bytes == 1_024 * 128_256 * 14 == 1_838_678_016
        assert p.topk_topp_buffer_bytes == 132 * 128_256 * 4 == 67_719_168
        assert p.hidden_kept_bytes == (8_192 + 2_048) * 4_096 * 2 == 83_886_080
        # forward: 8,192 × (3 × 14,336 / tp + 4 × 4,096) × 2 B, below the sampler side at tp 1 already
        assert p.forward_bytes == 8_192 * (3 * 14_336 // tp + 4 * 4_096) * 2 < p.sampler_side_bytes
        assert p.moe_workspace_bytes == 0
        assert p.torch_peak_bytes == LLAMA_TORCH_PEAK == 2_023_837_696
        assert p.non_torch_bytes == non_torch
    assert _peak(LLAMA, 1).total_bytes == LLAMA_TP1_PROFILE == 2_292_273_152
    assert _peak(LLAMA, 4).total_bytes == LLAMA_TP4_PROFILE == 4_353_857_454


def test_qwen3_moe_keeps_its_workspace_through_the_sampler() -> None:
    # Qwen3-30B-A3B: hidden 2,048, vocab 151,936, 8 of 128 experts of width 768, tp 1:
    #   sampler 1,024 × 151,936 × 14 = 2,178,154,496; buffer 132 × 151,936 × 4 = 80,222,208;
    #   kept (8,192 + 2,048) × 2,048 × 2 = 41,943,040 -> 2,300,319,744
    #   MoE workspace 8,192 × 8 × (max(768, 2,048) + max(1,536, 2,048)) × 2 = 536,870,912 (0.5 GiB)
    #   torch peak = 2,300,319,744 + 536,870,912 + 33,554,432 = 2,870,745,088 = 2.674 GiB (the log: 2.68 GiB)
    p = _peak("tests/data/hf/qwen3-30b-a3b/config.json", 1)
    assert p.sampler_side_bytes == 2_178_154_496 + 80_222_208 + 41_943_040 == 2_300_319_744
    assert p.moe_workspace_bytes == 536_870_912
    assert p.torch_peak_bytes == 2_870_745_088
    assert abs(p.torch_peak_bytes / GiB - 2.68) < 0.01


def test_mixtral_experts_split_by_tp_and_whole_under_ep() -> None:
    # Mixtral-8x7B: hidden 4,096, vocab 32,000, 2 of 8 experts of width 14,336 (intermediate_size), tp 2:
    #   I_e = 7,168: 8,192 × 2 × (max(7,168, 4,096) + max(14,336, 4,096)) × 2 = 704,643,072
    #   sampler side 1,024 × 32,000 × 14 + 132 × 32,000 × 4 + 10,240 × 4,096 × 2 = 458,752,000 + 16,896,000
    #   + 83,886,080 = 559,534,080; torch peak = 559,534,080 + 704,643,072 + 33,554,432 = 1,297,731,584
    #   = 1.209 GiB (the log: 1.21 GiB)
    p = _peak("tests/data/hf/mixtral-8x7b/config.json", 2)
    assert p.moe_workspace_bytes == 8_192 * 2 * (7_168 + 14_336) * 2 == 704_643_072
    assert p.sampler_side_bytes == 559_534_080
    assert p.torch_peak_bytes == 1_297_731_584
    # with ep the experts keep their full width: 8,192 × 2 × (14,336 + 28,672) × 2
    assert _peak("tests/data/hf/mixtral-8x7b/config.json", 2, ep=2).moe_workspace_bytes == 1_409_286_144


def test_forward_pass_wins_for_a_wide_mlp_and_small_vocab() -> None:
    # hidden 4,096, vocab 32,016, MLP 11,008 (CodeLlama-7b's shape), tp 1, H100:
    #   forward 8,192 × (3 × 11,008 + 4 × 4,096) × 2 = 809,500,672; sampler side 1,024 × 32,016 × 14
    #   + 132 × 32,016 × 4 + 83,886,080 = 458,981,376 + 16,904,448 + 83,886,080 = 559,771,904
    #   torch peak = 809,500,672 + 33,554,432 = 843,055,104 = 0.785 GiB (the sweep's CodeLlama-7b log: 0.77)
    dims = ActivationDims(hidden_size=4096, vocab_size=32016, dense_intermediate=11008, expert_intermediate=0,
                          experts_per_token=0)  # fmt: skip
    _, dep = _plan(LLAMA, "tp=1", "gpus_per_node=1")
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=8192, max_num_seqs=1024)
    assert p.forward_bytes == 809_500_672 > p.sampler_side_bytes == 559_771_904
    assert p.torch_peak_bytes == 843_055_104
    assert "forward pass (FITTED shape)" in p.summary()


def test_small_batches_and_other_gpus() -> None:
    # max_num_seqs 256, T 2,048 (an A100's defaults): R = 256; buffer rows min(next_pow2(min(108, 256)) = 128,
    # 108) = 108 on an A100 (108 SMs); an unknown GPU key takes 132
    dims = activation_dims({"hidden_size": 4096, "vocab_size": 128256, "intermediate_size": 14336})
    assert dims is not None
    _, dep = _plan(LLAMA, "gpu=a100-80gb", "tp=1", "gpus_per_node=1")
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=2048, max_num_seqs=256)
    assert p.requests == 256 and p.sampler_bytes == 256 * 128_256 * 14
    assert p.topk_topp_buffer_bytes == 108 * 128_256 * 4
    # R = 6 < SMs: rows min(next_pow2(6) = 8, 132) = 8
    q = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=6, max_num_seqs=1024)
    assert q.requests == 6 and q.topk_topp_buffer_bytes == 8 * 128_256 * 4


def test_float32_checkpoint_has_no_separate_copy() -> None:
    # logits already float32: 4 + 4 + 4 = 12 B per logit; activations 4 B
    dims = activation_dims({"hidden_size": 64, "vocab_size": 1000, "torch_dtype": "float32"})
    assert dims is not None and dims.dtype_bytes == 4
    _, dep = _plan(LLAMA, "tp=1", "gpus_per_node=1")
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=16, max_num_seqs=16)
    assert p.sampler_bytes == 16 * 1000 * 12 and p.hidden_kept_bytes == (16 + 32) * 64 * 4


def test_activation_dims_reads_moe_shapes_and_ignores_junk() -> None:
    # DeepSeek-style: dense layers first (intermediate_size), then routed experts of moe_intermediate_size
    ds = activation_dims({"hidden_size": 2048, "vocab_size": 102400, "intermediate_size": 10944,
                          "moe_intermediate_size": 1408, "n_routed_experts": 64, "num_experts_per_tok": 6,
                          "first_k_dense_replace": 1, "n_shared_experts": 2})  # fmt: skip
    assert ds is not None and (ds.dense_intermediate, ds.expert_intermediate, ds.experts_per_token) == (10944, 1408, 6)
    # Qwen-MoE with a shared expert and no dense layers: the shared expert is the dense MLP
    qw = activation_dims({"hidden_size": 2048, "vocab_size": 151936, "moe_intermediate_size": 1408, "num_experts": 60,
                          "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632})  # fmt: skip
    assert qw is not None and (qw.dense_intermediate, qw.expert_intermediate) == (5632, 1408)
    # junk values count as 0; no hidden / vocab size: no dims
    assert activation_dims({"hidden_size": "4096", "vocab_size": 10}) is None
    assert activation_dims({"hidden_size": 4096, "vocab_size": True}) is None
    j = activation_dims({"hidden_size": 8, "vocab_size": 8, "intermediate_size": -1, "num_experts_per_tok": 2})
    assert j is not None and (j.dense_intermediate, j.is_moe) == (0, False)


def test_plan_uses_the_profile_model_and_says_what_is_fitted() -> None:
    arch, dep = _plan(LLAMA, "tp=1", "gpus_per_node=1", "gpu_memory_utilization=0.95", "context_length=8192")
    from kvplan.engines import plan_pool

    p = plan_pool(arch, dep)
    # 0.19: no CUDA-graph estimate, not DSA: non_kv_other = the profile total
    assert p.knob("non_kv_other").value == LLAMA_TP1_PROFILE
    labels = {t.label: t for t in p.chain}
    assert labels["torch peak (profiling run)"].bytes == LLAMA_TORCH_PEAK
    assert labels["non-torch growth"].bytes == 268_435_456 and "FITTED" in labels["non-torch growth"].detail
    off = labels["no CUDA-graph estimate (before 0.21)"]
    assert off.bytes == 0 and "keeps CUDA graphs out of the KV budget" in off.detail
    assert "FITTED" in p.knob("non_kv_other").origin
    # an explicit figure wins and is one term
    q = plan_pool(arch, load_deployment(None, [f"model={LLAMA}", "engine=vllm", "engine_version=0.19.0",
                                               "gpu=h100", *GQA, "non_kv_other=3GiB"]))  # fmt: skip
    assert q.knob("non_kv_other").value == 3 * GiB
    assert "torch peak (profiling run)" not in {t.label for t in q.chain}


def test_0_21_adds_the_assumed_graph_estimate() -> None:
    arch, dep = _plan(LLAMA, "engine_version=0.33.0", "tp=1", "gpus_per_node=1")
    from kvplan.engines import plan_pool

    p = plan_pool(arch, dep)
    assert p.knob("non_kv_other").value == LLAMA_TP1_PROFILE + DEFAULT_CUDAGRAPH_ESTIMATE
    assert "ASSUMED" in {t.label: t for t in p.chain}["CUDA-graph estimate"].detail


@pytest.mark.parametrize("version", ["0.19.0", "0.33.0"])
def test_dsa_calibration_reproduces_the_recipe_point(version: str) -> None:
    # GLM-5.3 8×H200 TP8 (vocab 154,880, hidden 6,144, 8 experts of 2,048 / 8 = 256, T 8,192, R 1,024):
    #   sampler 1,024 × 154,880 × 14 = 2,220,359,680; buffer 132 × 154,880 × 4 = 81,776,640;
    #   kept 10,240 × 6,144 × 2 = 125,829,120; MoE 8,192 × 8 × (6,144 + 6,144) × 2 = 1,610,612,736;
    #   torch peak = 2,427,965,440 + 1,610,612,736 + 33,554,432 = 4,072,132,608; non-torch (tp 8) 2,330,019,758
    #   + graphs 1,618 MiB = 1,696,595,968 -> 8,098,748,334 = 6,070 MiB − DSA_CALIBRATION_BYTES
    p = make_plan("glm-5.3-8xh200-vllm", context_length="1M", engine_version=version, gpu_memory_utilization=0.92)
    labels = {t.label: t.bytes for t in p.chain}
    assert labels["torch peak (profiling run)"] == 4_072_132_608
    assert 4_072_132_608 + 2_330_019_758 + 1_696_595_968 + DSA_CALIBRATION_BYTES == DEFAULT_NON_KV_OTHER
    graphs = DEFAULT_CUDAGRAPH_ESTIMATE if version == "0.33.0" else 0
    assert p.knob("non_kv_other").value == DEFAULT_NON_KV_OTHER - DEFAULT_CUDAGRAPH_ESTIMATE + graphs
    assert (1_618 * MiB, 32 * MiB) == (DEFAULT_CUDAGRAPH_ESTIMATE, CUBLAS_WORKSPACE_BYTES)


@pytest.mark.parametrize(
    ("version", "peak", "non_torch", "logged_gib"),
    [
        # 0.15 / 0.16 sort the logits: 1,024 × 151,936 × 38 = 5,912,133,632; no Triton buffer; kept (8,192 + 2,048)
        # × 5,120 × 2 = 104,857,600; + 33,554,432 cuBLAS = 6,050,545,664 = 5.635 GiB; TP1 non-torch 130 × 2^30 // 1000
        ((0, 15, 0), 6_050_545_664, 139_586_437, 5.64),
        ((0, 16, 0), 6_050_545_664, 139_586_437, 5.64),
        # 0.17 / 0.18 Triton: 1,024 × 151,936 × 14 = 2,178,154,496 + 132 × 151,936 × 4 = 80,222,208 + 104,857,600
        # + 33,554,432 = 2,396,788,736 = 2.232 GiB; non-torch 0.13 GiB on 0.17, 0.25 GiB from 0.18
        ((0, 17, 0), 2_396_788_736, 139_586_437, 2.23),
        ((0, 18, 0), 2_396_788_736, 268_435_456, 2.23),
    ],
)
def test_the_version_sweep_of_qwen3_14b(version: tuple[int, ...], peak: int, non_torch: int, logged_gib: float) -> None:
    # llm-d-planner accuracy/results/version-sweep/runs/qwen3-14b-vllm-v0-1{5,6,7,8}-0--h100-80gb--tp1pp1dp1--8192
    # .json (3c876c8): activation_memory_gib 5.64 / 5.64 / 2.23 / 2.23, non_torch_forward_memory_gib 0.13 / 0.13 /
    # 0.13 / 0.25. Qwen3-14B: hidden 5,120, vocab 151,936, MLP 17,408 (its forward, 8,192 × (3 × 17,408 + 4 ×
    # 5,120) × 2 = 1,191,182,336 B, stays below the sampler on every release)
    dims = ActivationDims(hidden_size=5120, vocab_size=151936, dense_intermediate=17408, expert_intermediate=0,
                          experts_per_token=0)  # fmt: skip
    _, dep = _plan(LLAMA, "tp=1", "gpus_per_node=1")
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=8192, max_num_seqs=1024, version=version)
    assert p.forward_bytes == 1_191_182_336 < p.sampler_side_bytes
    assert (p.torch_peak_bytes, p.non_torch_bytes) == (peak, non_torch)
    assert round(p.torch_peak_bytes / GiB, 2) == logged_gib
    assert p.sampler_path == ("sort" if version < (0, 17, 0) else "Triton top-k/top-p")
