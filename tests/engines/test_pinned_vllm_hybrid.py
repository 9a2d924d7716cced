"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/vllm_hybrid.py, each
pinned by a figure derived from vLLM's source (vllm/v1/core/kv_cache_utils.py and kv_cache_planning.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.vllm_hybrid import group_size_of
from kvplan.errors import InputError
from kvplan.models.cache import FullAttention, Layer, SlidingWindow
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.engines.test_vllm_hybrid import _qwen3_next, plan
from tests.engines.test_vllm_v4 import plan as v4_plan


def test_no_length_fits_estimates_zero() -> None:
    # kv_cache_utils.py _estimate_max_model_len_from_groups: `if not fits(1): return 0` ("Returns 0 if even 1
    # token doesn't fit"). gpt-oss-120b TP1: bytes per block 589,824 (test_vllm_hybrid); one token takes a full
    # block + a window's cdiv(min(127 + 16,384, 1), 16) + 1 = 2 blocks = 3 × 589,824 = 1,769,472 B; the check has
    # 1 MiB − one block = 1,048,576 − 589,824 = 458,752 B. check_enough_kv_cache_memory then leaves its estimate
    # sentence out (`if estimated_max_len > 0: estimated_msg = ...`): vLLM never prints "is 0."
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, kv_cache_memory="1MiB")
    assert p.startup_error is not None
    assert "memory (0.0 GiB). Try increasing" in p.startup_error and "estimated maximum" not in p.startup_error


@pytest.mark.parametrize("blocks", [*range(101, 105), 3_639, *range(5_130, 5_134)])
def test_estimated_length_is_the_longest_that_fits(blocks: int) -> None:
    # _estimate_max_model_len_from_groups binary-searches the largest L with bytes_per_block × blocks(L) <= the
    # check; gpt-oss-120b TP1 (589,824 B a block): blocks(L) = cdiv(L, 16) full + cdiv(min(127 + 16,384, L), 16)
    # + 1 window. With `blocks` B in the check (kv memory = B + 1 blocks, the null block reserved first):
    # L <= 16,511: 2 × cdiv(L, 16) + 1 <= B -> L = 16 × ((B - 1) // 2); past it cdiv(L, 16) + 1,033 <= B ->
    # L = 16 × (B - 1,033). From B = 5,130 (L 65,552) a search that skips mid + 1 stops one token short
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, kv_cache_memory=f"{(blocks + 1) * 589_824}B")
    longest = 16 * (blocks - 1_033) if blocks - 1_033 > 16_511 // 16 else 16 * ((blocks - 1) // 2)
    assert p.startup_error is not None
    assert f"the estimated maximum model length is {longest}." in p.startup_error


def test_group_size_takes_the_largest_only_under_one_and_a_half() -> None:
    # kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: group_size = min, and `if max_num_layers <
    # min_num_layers * 1.5: group_size = max_num_layers` (strictly under: 12 sw + 13 full pads to 13)
    assert group_size_of([12, 17]) == 17
    assert group_size_of([12, 18]) == 12  # 18 = 1.5 × 12 is not under it


def test_qwen3_next_on_sm120_keeps_the_flashinfer_checkpoint_block(tmp_path: Path) -> None:
    # qwen_gdn_linear_attn._resolve_gdn_prefill_backend ('auto'): FlashInfer on SM90 and on SM10x / SM12x with
    # head_k_dim 128, which adds one prefill checkpoint block per GDN group. The RTX PRO 6000 Blackwell is SM120,
    # so its figures are the H200's (test_vllm_hybrid.test_qwen3_next_mamba_alignment_and_groups): block
    # lcm(16, 64) × 5 = 320 and 820 + 3 groups × (2 + 1 checkpoint) = 829 blocks a request; the A100's Triton
    # backend has no checkpoint (272, 970)
    p = plan(_qwen3_next(tmp_path), gpu="rtx-pro-6000", tp=4, context_length=262_144, weights_per_gpu="40GiB")
    assert (p.extras["block_size"], p.extras["blocks_per_request"]) == (320, 829)


def test_sliding_note_counts_the_concurrent_batches() -> None:
    # VllmConfig.max_in_flight_tokens = max_concurrent_batches × max_num_batched_tokens: async scheduling (the
    # default) keeps 2 batches in flight, so a window holds 128 - 1 + 2 × 8,192 = 16,511 tokens
    p = plan("gpt-oss-120b", tp=1, context_length=131_072)
    assert any(
        "= 128 - 1 + 16,384 (2 concurrent batches × max_num_batched_tokens 8,192), at most max_model_len: 16,511 "
        "tokens + 1 block" in n
        for n in p.notes
    )


def test_v4_window_groups_hold_window_minus_one_plus_in_flight() -> None:
    # SlidingWindowSpec.max_admission_blocks_per_request: cdiv(min(window - 1 + in_flight, L), block) + 1, with
    # in_flight = 2 batches × 8,193 = 16,386 (an odd max_num_batched_tokens, so that window - 1 lands on a block
    # edge the off-by-one would cross). DeepSeek-V4-Flash at L = 524,288, its groups (test_vllm_v4):
    #   2 SWA groups, window 128, block 64: cdiv(127 + 16,386 = 16,513, 64) + 1 = 259 + 1 = 260 each -> 520
    #   C4 / C128 compressed + C4 indexer K, full, block 256: cdiv(524,288, 256) = 2,048
    #   C4 compressor states, window 8, block 4: cdiv(7 + 16,386 = 16,393, 4) + 1 = 4,099 + 1 = 4,100
    #   C128 compressor state, window 128, block 8: cdiv(16,513, 8) + 1 = 2,065 + 1 = 2,066
    # 520 + 2,048 + 4,100 + 2,066 = 8,734 blocks a request; no MambaSpec, so no state bytes
    p = v4_plan("deepseek-v4-flash", max_num_batched_tokens=8193)
    assert p.context_len == 524_288
    assert (p.extras["blocks_per_request"], p.extras["state_bytes"]) == (8_734, 0)


def test_glm5_next_indexer_kernel_block_aligns_the_packed_block() -> None:
    # GLM-5.3-Flash on vLLM 0.33.0, --block-size 256 with 3 MTP drafts (the MTP layer makes 12 MLA layers,
    # test_hybrid_spec_glm5_next): _align_hybrid_block_size gives 256 × cdiv(542,720 state B, 256 × 512 B) = 1,280;
    # the MLA + indexer group packs 12 × (1,280 × 512 + 1,280 / 4 kpool × 132) = 12 × 697,600 = 8,371,200 B.
    # utils/deep_gemm.get_paged_mqa_page_sizes off SM120 = (32, 64): the indexer's kernel block is kpool × 64 = 256
    # tokens, not the whole 1,280-token block, so its stride alignment is 256 / 4 × 132 = 8,448 B; lcm with the
    # 512 B MLA row = 16,896 -> cdiv(8,371,200, 16,896) × 16,896 = 496 × 16,896 = 8,380,416 B a block id
    dep = load_deployment("glm-5.3-8xh200-vllm", ["page_size=256", "speculative_num_draft_tokens=3"])
    p = plan_pool(load_model("glm-5.3-flash"), dep)
    assert (p.extras["block_size"], p.extras["bytes_per_block"]) == (1_280, 8_380_416)


@pytest.mark.parametrize(
    ("version", "held"),
    [
        # from 0.26.0 VllmConfig.max_in_flight_tokens = max_concurrent_batches (2: async scheduling at pp 1) ×
        # max_num_batched_tokens 8,192 = 16,384; a window keeps 128 - 1 + 16,384 = 16,511 tokens
        (
            "0.33.0",
            "128 - 1 + 16,384 (2 concurrent batches × max_num_batched_tokens 8,192), at most max_model_len: 16,511",
        ),
        # before 0.26.0 only max_num_batched_tokens: 128 - 1 + 8,192 = 8,319, no batches named
        ("0.25.0", "128 - 1 + 8,192 (max_num_batched_tokens 8,192), at most max_model_len: 8,319"),
    ],
)
def test_the_sliding_window_note_counts_groups_and_in_flight_tokens(version: str, held: str) -> None:
    # gpt-oss-120b: 18 full-attention + 18 sliding layers, group size 18 (_get_kv_cache_groups_uniform_page_size):
    # cdiv(18, 18) + cdiv(18, 18) = 2 KV cache groups sharing one block pool
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, engine_version=version)
    (note,) = (n for n in p.notes if n.startswith("vLLM hybrid KV cache manager: "))
    assert note.startswith("vLLM hybrid KV cache manager: 2 KV cache groups of 18 layers share one block pool;")
    assert f"window - 1 + in-flight tokens = {held} tokens + 1 block" in note


def test_two_sliding_layers_to_one_full_make_three_groups(tmp_path: Path) -> None:
    # gpt-oss-120b's config with layer_types 2 sliding : 1 full over its 36 layers: 24 sliding, 12 full.
    # _get_kv_cache_groups_uniform_page_size: the largest bucket (24) is not under 1.5 × the smallest (12), so the
    # group size is 12: cdiv(12, 12) = 1 full group + cdiv(24, 12) = 2 sliding groups = 3 KV cache groups
    cfg = json.loads((Path(__file__).parents[1] / "data" / "hf" / "gpt-oss-120b" / "config.json").read_text())
    cfg["layer_types"] = ["sliding_attention", "sliding_attention", "full_attention"] * 12
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    sets = ["kv_cache_dtype=auto", "max_num_batched_tokens=8192", "kv_cache_memory=40GiB", "tp=1"]
    p = plan_pool(load_model(str(tmp_path)), load_deployment("glm-5.3-8xh200-vllm", [*sets, "context_length=131072"]))
    assert (p.extras["group_size"], p.extras["kv_cache_groups"]) == (12, 3)
    assert any(n.startswith("vLLM hybrid KV cache manager: 3 KV cache groups of 12 layers") for n in p.notes)


def test_a_sliding_page_unlike_the_full_page_is_refused() -> None:
    # gpt-oss-120b with its sliding layers narrowed to 4 kv heads (no loaded config does this: the loader gives both
    # kinds the config's heads, so the model is built here). FLASH_ATTN block 16 at TP1: full page 16 × 8 × (64 +
    # 64) × 2 = 32,768 B, sliding page 16 × 4 × 128 × 2 = 16,384 B. v1/core/kv_cache_utils.py
    # unify_kv_cache_spec_page_size: 32,768 % 16,384 == 0, so vLLM raises the sliding layers' block_size to 16 × 2
    # = 32 tokens: two block sizes in one pool, a window group's cdiv(16,511, 32) + 1 = 518 blocks where one 16-token
    # block for every group says 1,033. _sliding plans one block for all groups: refused, one line (exit 2)
    arch = load_model("gpt-oss-120b")
    narrow = {
        c: replace(c, num_kv_heads=4) for layer in arch.layers for c in layer.caches if isinstance(c, SlidingWindow)
    }
    layers = tuple(Layer(layer.index, tuple(narrow.get(c, c) for c in layer.caches)) for layer in arch.layers)
    sets = [
        "kv_cache_dtype=auto",
        "max_num_batched_tokens=8192",
        "kv_cache_memory=40GiB",
        "tp=1",
        "context_length=131072",
    ]
    with pytest.raises(InputError, match="sliding-window layers whose page differs from the full-attention page"):
        plan_pool(replace(arch, layers=layers), load_deployment("glm-5.3-8xh200-vllm", sets))


def test_mtp_on_a_state_hybrid_of_another_family_is_refused() -> None:
    # config/speculative.py SpeculativeConfig.hf_config_override picks the MTP draft by the target's model_type:
    # qwen3_next -> qwen3_next_mtp (Qwen3NextMTP, whose attention layer kvplan adds to the full-attention groups,
    # kvplan.engines.vllm_mamba). The same Gated DeltaNet layers under an architecture of no family kvplan knows
    # (the family record is looked up by architecture, kvplan.engines.vllm_families) get another draft module whose
    # groups are not modelled: refused, one line, with no window anywhere (the guard's two halves apart)
    arch = load_model("qwen3-next-80b-a3b")
    sets = ["kv_cache_dtype=auto", "max_num_batched_tokens=8192", "kv_cache_memory=40GiB", "tp=4",
            "context_length=262144", "weights_per_gpu=40GiB", "speculative_num_draft_tokens=1"]  # fmt: skip
    dep = load_deployment("glm-5.3-8xh200-vllm", sets)
    # planned: the MTP layer's attention joins the 12 full layers (13), beside 36 GDN layers: group size 13 (36 is
    # not under 1.5 × 13), cdiv(13, 13) + cdiv(36, 13) = 1 + 3 = 4 groups (_get_kv_cache_groups_uniform_page_size)
    planned = plan_pool(arch, dep).extras
    assert (planned["group_size"], planned["kv_cache_groups"]) == (13, 4)
    with pytest.raises(InputError, match="speculative decoding on a hybrid model other than Qwen3-Next"):
        plan_pool(replace(arch, architecture="OtherLinearForCausalLM"), dep)


def test_a_window_beside_state_without_full_attention_is_refused() -> None:
    # Qwen3-Next's 12 full-attention layers made sliding (window 4,096) beside its 36 Gated DeltaNet layers, no full
    # layer left (built here: the loader reads no sliding type for this family). kvplan plans a window beside full
    # attention (_sliding) or state beside attention (plan_mamba), not a window beside state: refused whether or not
    # a full layer is there too, never planned as a sliding model with the state left out
    arch = load_model("qwen3-next-80b-a3b")
    slide = {c: SlidingWindow(c.num_kv_heads, c.head_dim, c.v_head_dim, c.num_attention_heads, window=4_096)
             for layer in arch.layers for c in layer.caches if isinstance(c, FullAttention)}  # fmt: skip
    layers = tuple(Layer(layer.index, tuple(slide.get(c, c) for c in layer.caches)) for layer in arch.layers)
    sets = ["kv_cache_dtype=auto", "max_num_batched_tokens=8192", "kv_cache_memory=40GiB", "tp=4",
            "context_length=262144", "weights_per_gpu=40GiB"]  # fmt: skip
    with pytest.raises(InputError, match="sliding-window layers beside linear-attention state"):
        plan_pool(replace(arch, layers=layers), load_deployment("glm-5.3-8xh200-vllm", sets))


def test_a_sliding_plan_has_no_state_bytes() -> None:
    # gpt-oss-120b: full attention and sliding window, no MambaSpec layer (v1/core/kv_cache_utils.py pads no state
    # page): 0 B of state a request; its pages are both 16 × 8 × 128 × 2 = 32,768 B (test_vllm_hybrid)
    p = plan("gpt-oss-120b", tp=1, context_length=131_072)
    assert (p.extras["state_bytes"], p.extras["page_bytes"]) == (0, 32_768)
