"""kvplan.engines.vllm_dsv4 pinned: what the DeepSeek-V4 plan says, figure by figure (mutation check).

The pages and groups are test_vllm_v4's, derived there from vllm-0.33.0 (``models/deepseek_v4/``,
``v1/core/kv_cache_planning.py _get_packed_kv_cache_groups``): DeepSeek-V4-Flash's 43 layers make 167 specs in 5
groups; the widest is the 62-spec group of 21 C4 compressed (37,440 B) + 20 C128 compressed (1,728 B) + 21 C4
indexer K (8,640 B) pages = 786,240 + 34,560 + 181,440 = 1,002,240 B a block id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.engines.test_vllm_v4 import VLLM, plan

HF = Path(__file__).resolve().parents[1] / "data" / "hf"


def test_the_notes_carry_the_pages_and_groups() -> None:
    notes = plan("deepseek-v4-flash", tp=2).notes
    assert (
        "vLLM DeepSeek-V4 (0.33.0, fp8_ds_mla, block-outermost BLHNC layout): 167 cache specs in 5 KV cache groups"
        " packed into one block id pool (_get_packed_kv_cache_groups); one block id = the widest group's pages ="
        " 1,002,240 B (62 layers' pages)"
    ) in notes
    # every kind once, sorted by name: (block tokens, page after the 576 B padding)
    assert (
        "vLLM DeepSeek-V4 pages (block tokens, bytes after the 576 B padding): C128 compressed 256 tokens 1,728 B;"
        " C128 compressor state 8 tokens 32,832 B; C4 compressed 256 tokens 37,440 B; C4 compressor state 4 tokens"
        " 32,832 B; C4 indexer K 256 tokens 8,640 B; C4 indexer compressor state 4 tokens 8,640 B; window 128 64"
        " tokens 37,440 B"
    ) in notes
    # max_in_flight_tokens: 2 batches (async scheduling at pp 1) × max_num_batched_tokens 8,192 = 16,384
    assert any(n.startswith("vLLM sizes every window group") and "(16,384: max_in_flight_tokens" in n for n in notes)


@pytest.mark.parametrize(("gpu", "sm"), [("a100-80gb", 80), ("rtx-pro-6000", 120)])
def test_off_the_flashmla_path_is_refused(gpu: str, sm: int) -> None:
    # models/deepseek_v4/nvidia/model.py: SM12x takes FlashInfer, and FlashMLA (the fp8_ds_mla path kvplan read)
    # runs on SM90 / SM10x only; an SM80 or SM120 GPU is refused in one line naming its SM
    with pytest.raises(InputError, match=rf"DeepSeek-V4 off the FlashMLA path \(SM{sm}: only SM90 / SM10x planned\)"):
        plan("deepseek-v4-flash", tp=2, gpu=gpu)


# Fresh seed 23925 (25 of 30): what one request takes of each group, and the labels that name the groups.


def test_each_group_is_labelled_with_its_layer_counts() -> None:
    # DeepSeek-V4-Flash's compress_ratios over its 43 layers: 21 × 4, 20 × 128, 2 × 0 (tests/data/hf). Every layer
    # owns a DeepseekV4SWACache: 43 window specs, one balanced bucket split in 2 groups of 22 and 21 (pattern[i::2]);
    # the full-attention bucket holds the 21 C4 compressed, 21 C4 indexer K and 20 C128 compressed specs; the 4-token
    # window bucket the 21 C4 compressor states and 21 indexer compressor states; the 8-token one the 20 C128 states
    kinds = [d.kind for d in plan("deepseek-v4-flash", tp=2).pools[0].demands]
    assert kinds == [
        "22 window 128",
        "21 window 128",
        "21 C4 compressed + 21 C4 indexer K + 20 C128 compressed",
        "21 C4 compressor state + 21 C4 indexer compressor state",
        "20 C128 compressor state",
    ]


def test_a_window_group_holds_window_minus_one_plus_the_tokens_in_flight() -> None:
    # SlidingWindowSpec.max_admission_blocks_per_request (v1/kv_cache_interface.py): cdiv(min(sliding_window - 1 +
    # max_in_flight_tokens, max_model_len), block) + 1. Synchronous scheduling (max_concurrent_batches 1 at pp 1)
    # and max_num_batched_tokens 8,193: 8,193 in flight, an odd count, so window - 1 + in flight lands on a block
    # edge where window + in flight would spill into one more block:
    #   SWA (window 128, block 64): cdiv(127 + 8,193 = 8,320, 64) + 1 = 130 + 1 = 131, two groups: 262
    #   full attention, max_model_len 131,072: cdiv(131,072, 256) = 512
    #   C4 states (window 8, block 4): cdiv(7 + 8,193 = 8,200, 4) + 1 = 2,050 + 1 = 2,051
    #   C128 states (window 128, block 8): cdiv(8,320, 8) + 1 = 1,040 + 1 = 1,041
    # 262 + 512 + 2,051 + 1,041 = 3,866 blocks for a 128K request
    p = plan("deepseek-v4-flash", tp=2, async_scheduling="false", max_num_batched_tokens=8193)
    pool = p.pools[0]
    assert [d.window for d in pool.demands] == [8320, 8320, 0, 8200, 8320]
    assert pool.need(131_072) == 3866


def test_a_v4_config_without_compressed_layers_is_refused(tmp_path: Path) -> None:
    # _get_packed_kv_cache_groups splits balanced buckets by repeats only when a bucket mixes page sizes (the C4 /
    # C128 pattern); without one the state-bucket anchor decides, which kvplan does not model: every ratio 0 leaves
    # the 43 window specs alone, refused in one line rather than planned by a rule nobody read
    data = json.loads((HF / "deepseek-v4-flash" / "config.json").read_text())
    data["compress_ratios"] = [0] * len(data["compress_ratios"])
    (tmp_path / "config.json").write_text(json.dumps(data))
    dep = load_deployment(VLLM, ["kv_cache_dtype=auto", "kv_cache_memory=40GiB"])
    with pytest.raises(InputError, match="DeepSeek-V4 layers without a C4 / C128 repeat pattern"):
        plan_pool(load_model(str(tmp_path / "config.json")), dep)


@pytest.mark.parametrize("version", ["0.32.0", "0.32.9"])
def test_v4_before_the_0_33_0_wheel_is_refused(version: str) -> None:
    # DeepseekV4ForCausalLM's cache specs were read in vllm-0.33.0 only (V4_SINCE): any 0.32.x is refused in one line
    with pytest.raises(InputError, match=r"DeepSeek-V4 compressed-attention layers before vLLM 0\.33\.0"):
        plan("deepseek-v4-flash", tp=2, engine_version=version)


def test_v4_holds_no_mamba_state() -> None:
    # every DeepSeek-V4 spec is an MLAAttentionSpec or a SlidingWindowMLASpec (the compressor states included,
    # compressor.py CompressorStateCache): no MambaSpec, so the plan's per-request state is 0 B
    assert plan("deepseek-v4-flash", tp=2).extras["state_bytes"] == 0


# Fresh seed 54729 (25 of 29): the backend and kv dtype a user sets, and where the plan says they came from.


def test_the_v4_backend_set_by_hand_is_planned_and_any_other_refused() -> None:
    # models/deepseek_v4/nvidia/model.py: DeepseekV4FlashMLAAttention runs FLASHMLA_SPARSE_DSV4 on SM90 / SM10x;
    # setting that backend plans as the default does (origin 'set'); another MLA backend is not a path kvplan read
    p = plan("deepseek-v4-flash", tp=2, attention_backend="FLASHMLA_SPARSE_DSV4")
    assert p.knob("attention_backend").value == "FLASHMLA_SPARSE_DSV4"
    assert p.knob("attention_backend").origin == "set"
    with pytest.raises(InputError, match="DeepSeek-V4 with attention backend FLASHMLA_SPARSE "):
        plan("deepseek-v4-flash", tp=2, attention_backend="FLASHMLA_SPARSE")


@pytest.mark.parametrize(
    ("dtype", "origin"),
    [
        ("fp8_ds_mla", "set"),  # the format itself: kept as given
        ("auto", "default: auto -> fp8_ds_mla (_resolve_dsv4_kv_cache_dtype)"),  # rewritten by the engine
        ("fp8", "default: fp8 -> fp8_ds_mla (_resolve_dsv4_kv_cache_dtype)"),
    ],
)
def test_the_kv_dtype_origin_says_when_vllm_rewrites_it(dtype: str, origin: str) -> None:
    # attention.py _resolve_dsv4_kv_cache_dtype turns 'auto' and 'fp8*' into fp8_ds_mla; fp8_ds_mla stays
    k = plan("deepseek-v4-flash", tp=2, kv_cache_dtype=dtype).knob("kv_cache_dtype")
    assert (k.value, k.origin) == ("fp8_ds_mla", origin)
