"""vLLM V0 (0.6-0.8) goldens, each derived from the V0 source (kvplan/engines/vllm_v0.py, versions.py V0 rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm_v0 import CUDA_CONTEXT_BYTES, moe_buffers
from kvplan.errors import InputError, PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB, MiB
from kvplan.versions import vllm_rules

ROOT = Path(__file__).resolve().parents[2]
HF = "tests/data/hf/"
LLAMA3 = HF + "llama-3.1-8b/config.json"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
H100_CUDA = 85_044_756_480
"""The catalog's CUDA total of an H100 SXM (79.20 GiB)."""


def v0(model: str, version: str, *sets: str, tp: int = 1, gpu: str = "h100") -> PoolPlan:
    given = {s.split("=", 1)[0] for s in sets}
    defaults = [g for g in GQA if g.split("=", 1)[0] not in given]
    dep = load_deployment(
        None,
        [f"model={model}", "engine=vllm", f"engine_version={version}", f"gpu={gpu}", f"tp={tp}",
         f"gpus_per_node={max(tp, 1)}", *defaults, *sets],
    )  # fmt: skip
    return plan_pool(load_model(dep.model), dep)


@pytest.mark.parametrize(
    ("tp", "block"),
    [
        (1, 2_097_152),  # 16 × 32 layers × 2 (K, V) × 8 kv heads × 128 × 2 B
        (2, 1_048_576),  # 4 kv heads per rank
        (8, 262_144),  # 1 kv head per rank
    ],
)
def test_gqa_block_bytes_follow_the_kv_heads_per_rank(tp: int, block: int) -> None:
    p = v0(LLAMA3, "0.6.3", "context_length=8192", tp=tp)
    assert p.extras["bytes_per_block"] == block
    assert p.page_tokens == 16  # CacheConfig block_size 16


def test_fp8_kv_halves_the_block() -> None:
    # 16 × 32 × 2 × 8 × 128 × 1 B
    assert v0(LLAMA3, "0.7.3", "context_length=8192", "kv_cache_dtype=fp8").extras["bytes_per_block"] == 1_048_576


def test_mha_block_and_cpu_blocks() -> None:
    # Llama-2-7b: 16 × 32 × 2 × 32 kv heads × 128 × 2 B = 8 MiB; '# CPU blocks' = swap_space 4 GiB // 8 MiB = 512
    p = v0(HF + "llama-2-7b/config.json", "0.8.1")
    assert p.extras["bytes_per_block"] == 8 * MiB
    assert p.extras["num_cpu_blocks"] == 512


@pytest.mark.parametrize(
    ("version", "gpu", "block"),
    [
        # 0.7.3: Triton MLA, block 16; the 576-element latent rounded up to 256 B (128 bf16): 640 × 2 B = 1,280 B
        ("0.7.3", "h200", 16 * 61 * 640 * 2),
        # 0.8.x on Hopper: FlashMLA forces block 64; the latent unaligned, 1,152 B per layer
        ("0.8.5", "h200", 64 * 61 * 576 * 2),
        # 0.8.x on an A100 (SM 8.0): no FlashMLA, block 16
        ("0.8.5", "a100-80gb", 16 * 61 * 576 * 2),
    ],
)
def test_mla_caches_one_latent_per_layer(version: str, gpu: str, block: int) -> None:
    p = v0(HF + "deepseek-v3/config.json", version, "context_length=8192", tp=8, gpu=gpu)
    assert p.extras["bytes_per_block"] == block


def test_flashmla_block_bytes_against_vllm_pr_14842() -> None:
    # tests/data/logs/field/vllm-v0-deepseek-r1-tp8-vllm-pr-14842.log, the unaligned run (what 0.8.0 ships):
    # '# CPU blocks: 954' = 4 GiB // (64 × 61 × 576 × 2 B = 4,497,408 B); GPU-independent on any Hopper.
    log = (ROOT / "tests/data/logs/field/vllm-v0-deepseek-r1-tp8-vllm-pr-14842.log").read_text(encoding="utf-8")
    assert "# cuda blocks: 5266, # CPU blocks: 954" in log
    p = v0(HF + "deepseek-r1/config.json", "0.8.0", "context_length=8192", tp=8, gpu="h200")
    assert p.page_tokens == 64
    assert p.extras["num_cpu_blocks"] == 954


def test_flashmla_block_64_overrides_a_set_block_size() -> None:
    # platforms/cuda.py sets block_size = 64 whenever FlashMLA is used and it is not 64
    p = v0(HF + "deepseek-v3/config.json", "0.8.5", "context_length=8192", "page_size=16", tp=8, gpu="h200")
    assert p.page_tokens == 64
    p = v0(HF + "deepseek-v3/config.json", "0.8.5", "context_length=8192", "attention_backend=TRITON_MLA", tp=8)
    assert p.page_tokens == 16


@pytest.mark.parametrize("version", ["0.6.4", "0.7.0"])
def test_mla_before_0_7_3_is_refused(version: str) -> None:
    with pytest.raises(PlanError, match=r"0\.7\.3"):
        v0(HF + "deepseek-v3/config.json", version, "context_length=8192", tp=8)


def test_dsa_is_refused_on_v0() -> None:
    with pytest.raises(PlanError, match="DSA"):
        v0(HF + "glm-5.3/config.json", "0.8.5", "context_length=8192", tp=8)


@pytest.mark.parametrize(
    ("version", "ctx", "mnbt"),
    [
        ("0.6.3", None, 512),  # 131,072 > 32K: chunked prefill on, SchedulerConfig 512 (to 0.6.4)
        ("0.6.4", None, 512),
        ("0.6.5", None, 2048),  # 2048 from 0.6.5
        ("0.8.5", None, 2048),
        ("0.7.3", 8192, 8192),  # no chunked prefill: max(max_model_len, 2048)
        ("0.7.3", 1024, 2048),
    ],
)
def test_max_num_batched_tokens_default(version: str, ctx: int | None, mnbt: int) -> None:
    sets = () if ctx is None else (f"context_length={ctx}",)
    assert v0(LLAMA3, version, *sets).extras["max_num_batched_tokens"] == mnbt


def test_blocks_from_the_budget_arithmetic() -> None:
    # total × util = 85,044,756,480 × 0.9 = 76,540,280,832.0; − weights 16,000,000,000 − non-KV other 2 GiB
    # (2,147,483,648) = 58,392,797,184; // 2,097,152 = 27,843 blocks (27,843.99...: the floor), × 16 tokens.
    p = v0(LLAMA3, "0.7.3", "context_length=8192", "weights_per_gpu=16000000000B", "non_kv_other=2GiB")
    assert p.deployment.gpu.cuda_total_bytes == H100_CUDA
    assert p.extras["num_blocks"] == 27_843
    assert p.logged_tokens == 27_843 * 16
    assert p.usable_pages == 27_843  # V0 has no null block


def test_the_sub_ranges_differ_by_the_cuda_context_only_in_0_6_4() -> None:
    # Same deployment, same max_num_batched_tokens (8192, no chunked prefill): 0.6.4 counts every non-torch byte,
    # the CUDA context too (ASSUMED 500 MiB); 0.6.0-0.6.3 (init free − free after profile) and 0.6.5+
    # (memory_profiling) count the same weights + profile run + non-torch growth.
    non_kv = {v: v0(LLAMA3, v, "context_length=8192").extras["non_kv_bytes"] for v in ("0.6.3", "0.6.4", "0.6.5")}
    assert non_kv["0.6.4"] - non_kv["0.6.5"] == CUDA_CONTEXT_BYTES == 524_288_000
    assert non_kv["0.6.3"] == non_kv["0.6.5"]


def test_profile_run_sampler_side() -> None:
    # Llama-3.1-8B, T = 8,192 tokens in 256 prompts: sampler 256 × 128,256 × 38 B (the sort's peak) = 1,247,674,368
    # + hidden kept (8,192 + 256) × 4,096 × 2 B = 69,206,016 → 1,316,880,384; the forward pass 8,192 × (3 × 14,336
    # + 3 × 4,096) × 2 B = 905,969,664 is smaller; + cuBLAS 32 MiB = 1,350,434,816 (1.258 GiB: the 1.26 GiB that
    # vllm-project/vllm#10511 logs for Meta-Llama-3-8B, the same shapes).
    assert v0(LLAMA3, "0.8.5", "context_length=8192").extras["activation_bytes"] == 1_350_434_816


def test_profile_run_forward_side() -> None:
    # Llama-2-7b (vocab 32,000), T = 4,096: sampler 256 × 32,000 × 38 + (4,096 + 256) × 4,096 × 2 = 346,947,584;
    # forward 4,096 × (3 × 11,008 + 3 × 4,096) × 2 = 371,195,904 wins; + 32 MiB = 404,750,336.
    assert v0(HF + "llama-2-7b/config.json", "0.8.1").extras["activation_bytes"] == 404_750_336


@pytest.mark.parametrize(
    ("ctx", "act", "logged_gib"),
    [
        # T = max_model_len (no chunked prefill under 32K): T × (3 × 14,336 + 3 × 4,096) × 2 B + 32 MiB
        (20_000, 20_000 * 55_296 * 2 + 32 * MiB, 17.06 - 14.9888),  # 2,245,394,432 B = 2.091 GiB
        (29_000, 29_000 * 55_296 * 2 + 32 * MiB, 17.98 - 14.9888),  # 3,240,722,432 B = 3.018 GiB
    ],
)
def test_forward_side_against_vllm_issue_10517(ctx: int, act: int, logged_gib: float) -> None:
    # tests/data/logs/doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log (0.6.4, RTX 3090): peak_torch_memory
    # 17.06 / 17.98 GiB includes the weights 'took 14.9888 GB' (GiB): 2.07 / 2.99 GiB of profile run.
    p = v0(LLAMA3, "0.6.4", f"context_length={ctx}", gpu="rtx-3090")
    assert p.extras["activation_bytes"] == act
    assert abs(act / GiB - logged_gib) < 0.035


@pytest.mark.parametrize(
    ("version", "bytes_"),
    [
        # Mixtral-8x7B at tp 2, 8,192 tokens: N = 2 × 14,336 / 2 = 14,336, K = 4,096, top_k 2.
        ("0.7.3", 8192 * 2 * (14_336 + 4_096 + 7_168) * 2),  # three caches: 838,860,800
        ("0.8.5", 8192 * 2 * (14_336 + 7_168) * 2),  # cache13 max(N, K) + cache2: 704,643,072
    ],
)
def test_fused_moe_caches(version: str, bytes_: int) -> None:
    arch = load_model(HF + "mixtral-8x7b/config.json")
    assert moe_buffers(arch, vllm_rules(version), tokens=8192, tp=2, ep=1) == bytes_


def test_moe_chunk_caps_the_rows() -> None:
    # M = min(tokens, 32,768): 65,536 tokens cost what 32,768 do
    arch, rules = load_model(HF + "mixtral-8x7b/config.json"), vllm_rules("0.8.5")
    assert moe_buffers(arch, rules, tokens=65_536, tp=2, ep=1) == moe_buffers(arch, rules, tokens=32_768, tp=2, ep=1)
    assert moe_buffers(load_model(LLAMA3), rules, tokens=8192, tp=1, ep=1) == 0  # dense


def test_max_model_len_that_does_not_fit_is_the_v0_startup_error() -> None:
    # util 0.3: 85,044,756,480 × 0.3 = 25,513,426,944 − weights 16,000,000,000 − 2 GiB = 7,365,943,296 B
    # // 2,097,152 = 3,512 blocks × 16 = 56,192 tokens < 131,072
    p = v0(LLAMA3, "0.6.5", "gpu_memory_utilization=0.3", "weights_per_gpu=16000000000B", "non_kv_other=2GiB")
    assert p.extras["num_blocks"] == 3_512
    assert p.startup_error is not None
    assert (
        "max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (56192)"
        in (p.startup_error)
    )


def test_no_memory_for_blocks() -> None:
    # util 0.2: 17,008,951,296 − 16,000,000,000 − 2 GiB < 0
    p = v0(LLAMA3, "0.6.5", "gpu_memory_utilization=0.2", "weights_per_gpu=16000000000B", "non_kv_other=2GiB")
    assert p.extras["num_blocks"] == 0
    assert p.startup_error is not None and p.startup_error.startswith("No available memory for the cache blocks")


def test_num_gpu_blocks_override() -> None:
    # max_total_tokens 16,000 → ceil(16,000 / 16) = 1,000 blocks
    assert v0(LLAMA3, "0.7.3", "context_length=8192", "max_total_tokens=16000").extras["num_blocks"] == 1_000


def test_dcp_is_refused() -> None:
    with pytest.raises(PlanError, match="decode context parallel"):
        v0(LLAMA3, "0.7.3", "context_length=8192", "dcp=2", tp=2)


def test_dp_attention_is_refused() -> None:
    # vLLM's data parallel came with the V1 engine (0.8 release notes: "Data Parallel" for V1); kvplan's V0 plan
    # would split the KV heads over dp ranks that V0 never builds, so it refuses instead of a pool twice too small
    with pytest.raises(PlanError, match="does not model dp_attention 2"):
        v0(LLAMA3, "0.7.3", "context_length=8192", "dp_attention=2", tp=2)


def test_0_8_says_v1_is_the_default_engine() -> None:
    notes = " ".join(v0(LLAMA3, "0.8.3", "context_length=8192").notes)
    assert "0.8.x" in notes and "starts the V1 engine" in notes and "engine_version 0.9.0" in notes
    assert not any("V1 engine" in n for n in v0(LLAMA3, "0.7.3", "context_length=8192").notes)


@pytest.mark.parametrize("version", ["0.5.5", "0.5.99", "0.4.3"])
def test_before_0_6_is_still_refused(version: str) -> None:
    with pytest.raises(InputError, match="outside every range"):
        v0(LLAMA3, version)


def test_memory_chain_says_each_assumption() -> None:
    chain = {t.label: t for t in v0(LLAMA3, "0.6.4", "context_length=8192").chain}
    assert "CUDA context 500 MiB (ASSUMED)" in chain["non-torch"].detail
    assert "FITTED" in chain["torch peak (profile run)"].detail
    assert chain["bytes per block"].bytes == 2 * MiB
    assert chain["requested"].bytes == int(H100_CUDA * 0.9)
    assert chain["non-torch"].bytes == 16 * GiB // 100 + CUDA_CONTEXT_BYTES


@pytest.mark.parametrize("tp", [1, 2])
def test_activation_peak_against_vllm_pr_10511(tp: int) -> None:
    # tests/data/logs/field/vllm-v0-meta-llama-3-8b-h100-vllm-pr-10511.log: 'PyTorch activation peak memory 1.26GiB'
    # at tp 1 and 2 (printed %.2f: 1.255 .. 1.265 GiB). kvplan: the sampler side, the same at any tp,
    # 256 × 128,256 × 38 B + (8,192 + 256) × 4,096 × 2 B + 32 MiB = 1,350,434,816 B = 1.2577 GiB.
    log = (ROOT / "tests/data/logs/field/vllm-v0-meta-llama-3-8b-h100-vllm-pr-10511.log").read_text(encoding="utf-8")
    assert log.count("PyTorch activation peak memory       1.26GiB") == 2
    act = v0(LLAMA3, "0.6.5", "context_length=8192", tp=tp).extras["activation_bytes"]
    assert act == 1_350_434_816
    assert 1.255 * GiB <= act < 1.265 * GiB
