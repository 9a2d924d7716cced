"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/vllm_v0.py, each pinned by
a figure derived from vLLM V0's source."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.vllm_v0 import activation_peak, moe_buffers
from kvplan.models.from_hf import load_model
from kvplan.versions import vllm_rules
from tests.engines.test_vllm_v0 import HF, LLAMA3, v0


def test_fused_moe_caches_with_expert_parallel_hold_whole_experts() -> None:
    # fused_experts_impl (0.8.5 wheel): with expert parallelism a rank's w1 holds its experts whole, so N = 2 × the
    # expert width, not split by tp: Mixtral-8x7B at tp 2 / ep 2, 8,192 tokens, top_k 2: N = 2 × 14,336 = 28,672,
    # K = 4,096; cache13 max(N, K) = 28,672 + cache2 N / 2 = 14,336 -> 8,192 × 2 × 43,008 × 2 B = 1,409,286,144 B
    # (tp 2 / ep 1 splits N in two: 704,643,072 B, test_vllm_v0.test_fused_moe_caches)
    arch = load_model(HF + "mixtral-8x7b/config.json")
    assert moe_buffers(arch, vllm_rules("0.8.5"), tokens=8192, tp=2, ep=2) == 1_409_286_144


def test_each_v0_range_names_its_own_budget_rule() -> None:
    # worker/worker.py determine_num_available_blocks: 0.6.0-0.6.3 take the peak as init free − free after
    # profile_run; 0.6.5 on measure with memory_profiling (weights + torch peak increase + non-torch increase)
    # (kvplan.versions cites the wheels); the available-memory term says which one the figure used
    said = {
        version: next(t.detail for t in v0(LLAMA3, version).chain if "non-KV" in (t.detail or ""))
        for version in ("0.6.3", "0.8.5")
    }
    assert said["0.6.3"].endswith("(0.6.0-0.6.3: init free − free after the profile run)")
    assert said["0.8.5"].endswith("(memory_profiling: weights + torch peak increase + non-torch increase)")


def test_pipeline_stages_divide_the_longest_sequence() -> None:
    # worker/worker.py raise_if_cache_size_invalid (V0): max_seq_len = block_size × (num_gpu_blocks //
    # pipeline_parallel_size). num_gpu_blocks_override (max_total_tokens 16,000) = cdiv(16,000, 16) = 1,000 blocks:
    # at pp 2, 16 × 500 = 8,000 tokens < 10,000 refuses; at pp 1, 16,000 holds it
    p = v0(LLAMA3, "0.8.5", "pp=2", "nodes=2", "max_total_tokens=16000", "context_length=10000")
    assert p.extras["num_blocks"] == 1_000 and p.startup_error is not None
    assert "(10000) is larger than the maximum number of tokens that can be stored in KV cache (8000)" in (
        p.startup_error
    )
    assert v0(LLAMA3, "0.8.5", "max_total_tokens=16000", "context_length=10000").startup_error is None
    # `if max_model_len > max_seq_len`: a length of exactly 16 × 1,000 = 16,000 tokens starts
    assert v0(LLAMA3, "0.8.5", "max_total_tokens=16000", "context_length=16000").startup_error is None


def test_one_block_is_enough_to_start() -> None:
    # worker/worker.py raise_if_cache_size_invalid (V0): "if num_gpu_blocks <= 0: raise ValueError('No available
    # memory for the cache blocks...')": num_gpu_blocks_override 1 (max_total_tokens 16 = cdiv(16, 16) = 1 block)
    # starts, and a max_model_len of 16 = block_size × 1 fits it
    p = v0(LLAMA3, "0.8.5", "max_total_tokens=16", "context_length=16")
    assert (p.extras["num_blocks"], p.startup_error) == (1, None)


def test_memory_map_main_kv_is_the_pool_in_bytes() -> None:
    # cache_engine.py: a token of Llama-3.1-8B is 32 layers × (K + V) × 8 kv heads × 128 × 2 B = 131,072 B;
    # num_gpu_blocks_override 1,000 (max_total_tokens 16,000 / block 16) -> 16,000 tokens × 131,072 B = 2,097,152,000 B
    p = v0(LLAMA3, "0.8.5", "max_total_tokens=16000", "context_length=8192")
    main = next(s for s in p.memory_map if s.label == "main KV")
    assert main.bytes == 2_097_152_000
    # V0 serves no DSA indexer (refused in _row) and kvplan plans no V0 draft pool (draft_layers 0): both 0 B
    assert [s.bytes for s in p.memory_map if s.label in ("indexer", "draft")] == [0, 0]
    # cache_engine allocates the 1,000 blocks of 16 × 131,072 = 2,097,152 B each: the same 2,097,152,000 B
    assert p.allocated_bytes == 2_097_152_000


def test_chunked_prefill_is_on_by_default_only_past_32k() -> None:
    # V0 arg_utils create_engine_config: use_long_context = max_model_len > 32 * 1024 turns chunked prefill on, and
    # SchedulerConfig then defaults max_num_batched_tokens to 2048 (0.6.5-0.8.x); without it, max(max_model_len,
    # 2048). 32,768 is not past 32K: 32,768 batched tokens; 32,769 is: 2,048
    assert v0(LLAMA3, "0.8.5", "context_length=32768").extras["max_num_batched_tokens"] == 32_768
    assert v0(LLAMA3, "0.8.5", "context_length=32769").extras["max_num_batched_tokens"] == 2_048


def test_the_chain_counts_pool_tokens_and_cpu_blocks() -> None:
    # num_gpu_blocks_override 1,000 blocks of 16 tokens: "16,000 = # GPU blocks × 16"; a block of Llama-3.1-8B is
    # 16 × 131,072 B = 2,097,152 B, so swap_space 4 GiB holds 4,294,967,296 // 2,097,152 = 2,048 CPU blocks
    p = v0(LLAMA3, "0.8.5", "max_total_tokens=16000", "context_length=8192")
    assert next(t.detail for t in p.chain if t.label == "pool tokens per GPU") == "16,000 = # GPU blocks × 16"
    assert next(t.detail for t in p.chain if t.label == "# CPU blocks") == "2,048 = swap_space 4 GiB // bytes per block"
    assert p.extras["num_cpu_blocks"] == 2_048


def test_allow_long_context_says_nothing_within_the_model_positions() -> None:
    # config.py _get_and_verify_max_len (V0): VLLM_ALLOW_LONG_MAX_MODEL_LEN only matters past the derived 131,072;
    # at 8,192 no long-context warning is logged, at 200,000 it is (and the engine starts)
    short = v0(LLAMA3, "0.8.5", "context_length=8192", "allow_long_context=true")
    assert not [n for n in short.notes if "above the derived" in n]
    long = v0(LLAMA3, "0.8.5", "context_length=200000", "allow_long_context=true")
    assert [n for n in long.notes if n.startswith("context length 200,000 is above the derived 131,072")]
    assert long.startup_error is None


def test_a_moe_forward_pass_carries_its_fused_moe_caches() -> None:
    # Mixtral-8x7B at tp 2, 8,192 tokens, 256 prompts (V0 profile_run). Forward: no dense MLP, 3 [T, hidden] tensors
    # (FORWARD_HIDDEN_TENSORS_V0, models/llama.py) 8,192 × 3 × 4,096 × 2 B = 201,326,592 + fused_experts_impl's
    # caches 704,643,072 (test_vllm_v0.test_fused_moe_caches) = 905,969,664 B, over the sampler side 256 × 32,000
    # × 38 B + (8,192 + 256) × 4,096 × 2 B = 380,502,016 B; + the 32 MiB cuBLAS workspace = 939,524,096 B
    arch = load_model(HF + "mixtral-8x7b/config.json")
    peak, how = activation_peak(arch, vllm_rules("0.8.5"), tp=2, ep=1, max_num_batched_tokens=8192, max_num_seqs=256)
    assert peak == 939_524_096
    assert how.startswith("forward pass: ") and how.endswith(
        "forward 8,192 tokens + fused-MoE caches 704,643,072 B) + cuBLAS 32 MiB (FITTED on V1)"
    )


def test_no_model_dimensions_no_profile_run_estimate() -> None:
    # without hidden_size / vocab_size kvplan cannot size the dummy forward or the sampler: it counts 0 B and says
    # so, rather than a made-up figure
    arch = replace(load_model(LLAMA3), activation=None)
    assert activation_peak(arch, vllm_rules("0.8.5"), tp=1, ep=1, max_num_batched_tokens=8192, max_num_seqs=256) == (
        0,
        "no hidden / vocab size in the config: profile run not estimated (0 B)",
    )


def test_non_kv_memory_over_the_request_leaves_no_blocks_and_no_bytes() -> None:
    # determine_num_available_blocks: (total × 0.9 − non-KV) // block; an H100's 76,540,280,832 B requested less
    # weights + 70 GiB of activations (91,256,004,608 B) is negative: 0 blocks, 'No available memory for the cache
    # blocks', and 0 B of KV memory (not a negative or a 1 B budget); no indexer in V0: 0 B a layer
    p = v0(LLAMA3, "0.8.5", "non_kv_other=70GiB")
    assert (p.extras["requested_bytes"], p.extras["non_kv_bytes"]) == (76_540_280_832, 91_256_004_608)
    assert (p.available_bytes, p.extras["num_blocks"]) == (0, 0)
    assert p.startup_error is not None and p.startup_error.startswith("No available memory for the cache blocks.")
    assert (p.indexer_bytes_per_layer, p.indexer_layers, p.draft_layers) == (0, 0, 0)


def test_fused_moe_caches_stop_at_the_32k_chunk() -> None:
    # envs.VLLM_FUSED_MOE_CHUNK_SIZE defaults to 32,768 (0.6.0-0.8.5): fused_experts_impl takes at most 32,768
    # rows a call. Mixtral-8x7B at tp 2: N = 2 × 14,336 / 2 = 14,336, top_k 2, (max(N, 4,096) + N / 2) × 2 B =
    # 43,008 B a (token, expert) -> 86,016 B a token; 40,000 tokens count 32,768 of them: 2,818,572,288 B
    arch = load_model(HF + "mixtral-8x7b/config.json")
    assert moe_buffers(arch, vllm_rules("0.8.5"), tokens=40_000, tp=2, ep=1) == 32_768 * 86_016 == 2_818_572_288
