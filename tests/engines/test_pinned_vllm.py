"""engines/vllm.py pinned where a fresh mutation seed (61139) found survivors outside the hybrid paths: the plan's
memory map (JSON ``memory_map``) and the note on a DSA config whose ``indexer_types`` vLLM does not read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm import indexer_layer_flags
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan

GLM53 = Path(__file__).resolve().parents[1] / "data" / "hf" / "glm-5.3" / "config.json"


def test_memory_map_of_a_gqa_plan() -> None:
    # Llama-3.1-8B bf16 on one H100, vLLM 0.19.0: a pool token holds 32 layers × 8 kv heads × (128 + 128) × 2 B =
    # 131,072 B, so the "main KV" segment is the pool's rows × 131,072; "driver" is what NVML counts and CUDA does
    # not: the catalog's H100 NVML total 81,559 MiB − its CUDA total 81,105 MiB (vLLM logs 'total_gpu_memory
    # (79.19GiB)') = 454 MiB = 476,053,504 B
    p = make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", engine_version="0.19.0", kv_cache_dtype="auto",
                  page_size="default", gpu="h100", tp=1, gpus_per_node=1)  # fmt: skip
    seg = {s.label: s.bytes for s in p.memory_map}
    assert p.rows % 16 == 0
    assert seg["main KV"] == p.rows * 131_072
    assert seg["driver"] == 476_053_504
    assert seg["indexer"] == seg["draft"] == 0


def test_a_note_when_indexer_types_disagrees_with_the_freq_rule(tmp_path: Path) -> None:
    # vLLM places GLM's indexers by index_topk_freq / index_skip_topk_offset and never reads indexer_types: GLM-5.3's
    # freq 4, offset 3 give max(i − 3 + 1, 0) % 4 == 0 on 21 of its 78 layers (0, 1, 2, 6, 10, …, 74). A config
    # whose indexer_types lists every layer "full" gets vLLM's 21 and a note naming both counts
    data = json.loads(GLM53.read_text(encoding="utf-8"))
    assert sum(t == "full" for t in data["indexer_types"]) == 21
    data["indexer_types"] = ["full"] * len(data["indexer_types"])
    (tmp_path / "config.json").write_text(json.dumps(data), encoding="utf-8")
    arch = load_model(str(tmp_path / "config.json"))
    p = make_plan("glm-5.3-8xh200-vllm", model=arch)
    assert p.indexer_layers == 21
    assert any("21 indexer layers where indexer_types lists 78" in n for n in p.notes)
    # the published list agrees with the rule: no note
    assert not any("indexer_types" in n for n in make_plan("glm-5.3-8xh200-vllm").notes)


def _llama_h100(**sets: object) -> PoolPlan:
    return make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", kv_cache_dtype="auto", page_size="default",
                     gpu="h100", tp=1, gpus_per_node=1, **sets)  # fmt: skip


def test_auto_fit_with_no_block_to_spare_refuses() -> None:
    # --max-model-len -1 with --num-gpu-blocks-override 1: the null block takes the only block, so
    # _auto_fit_max_model_len finds no length ("not enough KV cache memory for even one token") and vLLM refuses
    p = _llama_h100(context_length=-1, num_gpu_blocks_override=1)
    assert str(p.startup_error).startswith("Cannot auto-fit max_model_len: not enough KV cache memory")


def test_max_model_len_equal_to_the_positions_is_allowed() -> None:
    # vLLM config/model.py refuses a user max_model_len only when it is GREATER than the derived one
    # (max_position_embeddings 131,072 for Llama-3.1-8B): 131,072 starts, 131,073 is refused before profiling
    assert _llama_h100(context_length=131_072).startup_error is None
    assert str(_llama_h100(context_length=131_073).startup_error).startswith(
        "User-specified max_model_len (131073) is greater than the derived max_model_len"
    )


def test_long_context_note_only_above_the_positions() -> None:
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (allow_long_context): 131,073 starts with vLLM's warning, which the plan notes;
    # 131,072 is the derived length itself: no warning, no note
    above = "is above the derived 131,072"
    assert not any(above in n for n in _llama_h100(context_length=131_072, allow_long_context="true").notes)
    assert any(above in n for n in _llama_h100(context_length=131_073, allow_long_context="true").notes)


def test_the_hybrid_size_term_switches_at_0_20_1() -> None:
    # vLLM 0.20.1 logs "GPU KV cache size" as int(max concurrency × max_model_len) (get_kv_cache_capacity); 0.20.0
    # and before as num_blocks // len(groups) × block (_report_kv_cache_config). gpt-oss-120b on one H200 at
    # 131,072 with 40 GiB of KV: 72,817 blocks of 2 groups of 16-token pages.
    #   0.20.0: 72,817 // 2 × 16 = 582,528 tokens
    #   0.20.1: int(72,817 / 8,713 blocks per request × 131,072) = int(1,095,405.7…) = 1,095,405 tokens
    from tests.engines.test_vllm_hybrid import plan as hybrid_plan

    old = hybrid_plan("gpt-oss-120b", tp=1, context_length=131_072, engine_version="0.20.0").chain[-1]
    new = hybrid_plan("gpt-oss-120b", tp=1, context_length=131_072, engine_version="0.20.1").chain[-1]
    assert old.label == new.label == "GPU KV cache size"
    assert old.detail.startswith("582,528 tokens = num_blocks // 2 groups × 16;")
    assert new.detail.startswith("1,095,405 tokens = int(num_blocks / 8,713 blocks per request × 131,072);")


def test_dp_attention_splits_a_gqa_models_heads_over_the_ranks_tp() -> None:
    # vLLM data parallel: tp 8 with 2 DP ranks is tensor parallel 4 inside each rank; FullAttentionSpec keeps
    # num_kv_heads // tp_size = 8 // 4 = 2 heads of Llama-3.1-70B a GPU: 80 layers × 2 × (128 + 128) × 1 B (fp8) =
    # 40,960 B a token, twice tp 8's 20,480 (1 head a GPU)
    assert make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-70b", dp_attention=2).cell.total_bytes == 40_960
    assert make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-70b").cell.total_bytes == 20_480


def test_the_allocated_pool_is_every_block_in_bytes() -> None:
    # GLM-5.3 8xH200 vLLM at gpu_memory_utilization 0.98: 37,966,413,904 B // 3,452,160 B a block (64 × 53,940)
    # = 10,997 blocks (test_vllm_memory_remedy_searches_up_to_0_98); vLLM allocates every block, the null block
    # included: 10,997 × 3,452,160 = 37,963,403,520 B
    p = make_plan("glm-5.3-8xh200-vllm", gpu_memory_utilization=0.98)
    assert (p.usable_pages, p.allocated_bytes) == (10_996, 37_963_403_520)


@pytest.mark.parametrize(
    ("kv_bytes", "error"),
    [
        # Llama-3.1-8B fp8 at tp 8 on FLASH_ATTN: block 16 × 1 KV head × (128 + 128) × 1 B × 32 layers = 131,072 B.
        # get_kv_cache_configs reserves the null block before check_enough_kv_cache_memory: a budget of exactly one
        # block leaves 0 B, "No available memory" (available_memory <= 0)
        (131_072, "No available memory for the cache blocks."),
        # one byte more: 1 B left, no block fits, so estimate_max_model_len is 0 and vLLM leaves its sentence out
        (131_073, "(0.06 GiB KV cache is needed, which is larger than the available KV cache memory (0.0 GiB). Try"),
        # two blocks: one after the null block, 16 tokens, said
        (262_144, "Based on the available memory, the estimated maximum model length is 16. Try"),
    ],
)
def test_a_budget_of_a_block_or_less_is_vllms_no_memory_refusal(kv_bytes: int, error: str) -> None:
    p = make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", kv_cache_memory=f"{kv_bytes}B", context_length=8192)
    assert p.extras["bytes_per_block"] == 131_072
    assert p.startup_error is not None and error in p.startup_error


def test_vllm_indexer_layers_follow_freq_and_offset_with_offset_2_by_default() -> None:
    # vLLM models/deepseek_v2.py: skip_topk = max(layer_id - index_skip_topk_offset + 1, 0) % index_topk_freq != 0,
    # index_skip_topk_offset = getattr(config, "index_skip_topk_offset", 2); a layer without skip_topk owns an indexer
    # (reference/vllm-0.33.0.md). GLM-5.3's freq 4, offset 3 over 78 layers: max(i - 2, 0) % 4 == 0 at 0, 1, 2
    # and 6, 10, ..., 74: 21 layers
    arch = load_model("glm-5.3")
    on = [i for i, f in enumerate(indexer_layer_flags(arch)) if f]
    assert on == [0, 1, 2, *range(6, 78, 4)]
    # a config without index_skip_topk_offset takes vLLM's 2: max(i - 1, 0) % 4 == 0 at 0, 1 and 5, 9, ..., 77
    on = [i for i, f in enumerate(indexer_layer_flags(replace(arch, index_skip_topk_offset=None))) if f]
    assert on == [0, 1, *range(5, 78, 4)]
