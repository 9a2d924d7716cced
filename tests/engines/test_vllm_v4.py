"""DeepSeek-V4 on vLLM 0.33.0 (kvplan/engines/vllm_hybrid.py ``_v4``): goldens derived from the wheel's source
(vllm-0.33.0, paths under ``vllm/``) and the verbatim configs (tests/data/hf/deepseek-v4-*/config.json).

Specs per layer (fp8_ds_mla, FlashMLA path on SM90 / SM10x; 584 B entry = 448 + 64 × 2 + 7 + 1; every page padded
to a multiple of 576 B by ``_apply_alignment_padding``):

- SWA (``DeepseekV4SWACache``, every layer): block 64, window 128, page 64 × 584 = 37,376 -> 37,440 B;
- compressed KV (``DeepseekV4MLAAttention.get_kv_cache_spec``, ratio > 1): block 256 (the V4 indexer and sparse
  MLA backends take 256 only), 256 / ratio states: C4 64 × 584 -> 37,440 B, C128 2 × 584 = 1,168 -> 1,728 B;
- compressor state (``CompressorStateCache``, fp32, 2 × coff × 512): C4 block 4 window 8, 4 × 2,048 × 4 =
  32,768 -> 32,832 B; C128 block 8 window 128, 8 × 1,024 × 4 = 32,768 -> 32,832 B;
- indexer K (C4): block 256, 64 states × 132 B = 8,448 -> 8,640 B; its compressor state: block 4 window 8,
  4 × 512 × 4 = 8,192 -> 8,640 B.

Grouping: ``_get_packed_kv_cache_groups`` (the V4 indexer backend allows only block-outermost layouts). Per request:
Σ groups cdiv(max_memory_usage_bytes, page) (``get_max_concurrency_for_kv_cache_config``); a window group
cdiv(min(window - 1 + 2 × mnbt, L), block) + 1 (``SlidingWindowSpec.max_admission_blocks_per_request``).
"""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm_hybrid import approximate_gcd, pack_v4_groups, v4_specs
from kvplan.errors import InputError, PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

runner = CliRunner(env={"KVPLAN_FORMAT": None})
VLLM = "glm-5.3-8xh200-vllm"
KV40 = "40GiB"  # --kv-cache-memory-bytes: a fixed budget, so the goldens test the pool arithmetic alone


def plan(model: str, **sets: object) -> PoolPlan:
    base: dict[str, object] = {"kv_cache_dtype": "auto", "max_num_batched_tokens": 8192, "kv_cache_memory": KV40}
    dep = load_deployment(VLLM, [f"{k}={v}" for k, v in {**base, **sets}.items()])
    return plan_pool(load_model(model), dep)


def test_v4_flash_spec_pages() -> None:
    specs = v4_specs(load_model("deepseek-v4-flash"))
    # 43 layers (compress_ratios[:43]: 2 × 0, 21 × 4, 20 × 128): 43 SWA + 41 compressed + 41 compressor states
    # + 21 indexer K + 21 indexer compressor states = 167 specs
    assert len(specs) == 167
    pages = Counter((s.kind, s.block, s.page) for s in specs)
    assert pages == {
        ("window 128", 64, 37_440): 43,
        ("C4 compressed", 256, 37_440): 21,
        ("C128 compressed", 256, 1_728): 20,
        ("C4 compressor state", 4, 32_832): 21,
        ("C128 compressor state", 8, 32_832): 20,
        ("C4 indexer K", 256, 8_640): 21,
        ("C4 indexer compressor state", 4, 8_640): 21,
    }


def test_v4_flash_packed_groups() -> None:
    groups = pack_v4_groups(v4_specs(load_model("deepseek-v4-flash")))
    # buckets: SWA (43, one page: balanced), block-256 MLA (21 / 20 / 21 by page: unbalanced, one group),
    # C4 states (21 + 21: balanced, mixed: floor 21), C128 states (20: balanced);
    # repeats = approximate_gcd([43, 21, 20], 21) = 22 -> SWA cdiv(43, 22) = 2 groups (22 + 21 layers via [i::2]),
    # C4 states cdiv(21, 22) = 1, C128 cdiv(20, 22) = 1: 5 groups
    assert [len(g) for g in groups] == [22, 21, 62, 42, 20]
    # bytes per block id = the widest group: 21 × 37,440 + 21 × 8,640 + 20 × 1,728 = 786,240 + 181,440 + 34,560
    assert max(sum(s.page for s in g) for g in groups) == 1_002_240
    assert approximate_gcd([43, 21, 20], 21) == 22


def test_v4_flash_pool_and_concurrency() -> None:
    p = plan("deepseek-v4-flash", context_length=131_072)
    assert p.extras["bytes_per_block"] == 1_002_240 and p.extras["kv_cache_groups"] == 5
    # num_blocks = 40 GiB // 1,002,240 = 42,949,672,960 // 1,002,240 = 42,853
    assert p.extras["num_blocks"] == 42_853
    # per request at 131,072 (in flight 2 × 8,192 = 16,384): SWA 2 × (cdiv(min(127 + 16,384, L), 64) + 1)
    # = 2 × (258 + 1) = 518; MLA cdiv(131,072, 256) = 512; C4 states cdiv(7 + 16,384, 4) + 1 = 4,098 + 1 = 4,099;
    # C128 states cdiv(127 + 16,384, 8) + 1 = 2,064 + 1 = 2,065; total 518 + 512 + 4,099 + 2,065 = 7,194
    assert p.extras["blocks_per_request"] == 7_194
    # GPU KV cache size = int(42,853 / 7,194 × 131,072): 42,853 × 131,072 = 5,616,828,416; / 7,194 = 780,765.7
    assert p.logged_tokens == 780_765
    (pool,) = p.pools
    # the null block excluded: 42,852 // 7,194 = 5 requests of 128K (6 × 7,194 = 43,164 > 42,852)
    assert (pool.capacity, pool.unit_bytes, pool.page_tokens) == (42_852, 1_002_240, 256)
    assert pool.need(131_072) == 7_194 and pool.fits(131_072) == 5
    assert (p.kv_dtype, p.startup_error) == ("fp8_ds_mla", None)


def test_v4_short_request_is_bound_by_its_own_length() -> None:
    (pool,) = plan("deepseek-v4-flash", context_length=131_072).pools
    # 1,000 tokens: SWA 2 × (cdiv(1,000, 64) + 1) = 2 × 17 = 34; MLA cdiv(1,000, 256) = 4;
    # C4 states cdiv(1,000, 4) + 1 = 251; C128 states cdiv(1,000, 8) + 1 = 126; 34 + 4 + 251 + 126 = 415
    assert pool.need(1_000) == 415


def test_v4_pro_packed_block() -> None:
    p = plan("deepseek-v4-pro", context_length=131_072)
    # 61 layers: 31 × C128 (layers 0, 1 and the odd ones), 30 × C4; MLA bucket 31 / 30 / 30 by page: unbalanced;
    # widest group 30 × 37,440 + 30 × 8,640 + 31 × 1,728 = 1,123,200 + 259,200 + 53,568 = 1,435,968 B
    assert p.extras["bytes_per_block"] == 1_435_968 and p.extras["kv_cache_groups"] == 5
    # 42,949,672,960 // 1,435,968 = 29,909 blocks; per request the same 7,194 (same window and in-flight)
    assert (p.extras["num_blocks"], p.extras["blocks_per_request"]) == (29_909, 7_194)
    assert p.pools[0].fits(131_072) == 29_908 // 7_194 == 4


def test_v4_max_model_len_error_in_vllm_words() -> None:
    # 1 GiB: 1,073,741,824 // 1,002,240 = 1,071 blocks; check = 1 GiB - 1,002,240 < 7,194 × 1,002,240 = 7.21 GB
    p = plan("deepseek-v4-flash", context_length=131_072, kv_cache_memory="1GiB")
    assert p.startup_error is not None and p.startup_error.startswith(
        "To serve at least one request with the model's max seq len (131072), (6.71 GiB KV cache is needed"
    )


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        ({"kv_cache_dtype": "bf16"}, "DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got bf16"),
        ({"page_size": 128}, "take kernel block size 256 only"),
    ],
)
def test_v4_engine_refusals(sets: dict[str, object], says: str) -> None:
    with pytest.raises(PlanError, match=says):
        plan("deepseek-v4-flash", **sets)


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        ({"engine_version": "0.25.0"}, "before vLLM 0.33.0"),
        ({"dcp": 2}, "decode context parallel"),
    ],
)
def test_v4_unplanned_stays_refused(sets: dict[str, object], says: str) -> None:
    with pytest.raises(InputError, match=says):
        plan("deepseek-v4-flash", **sets)


@pytest.mark.parametrize(
    ("gpu", "blocks"),
    [
        # H200 (max_num_batched_tokens 8,192 by device memory): in flight 16,384 -> 7,194 blocks (as above)
        ("h200", "7,194 blocks"),
        # B200 (16,384 by device memory): in flight 32,768; SWA 2 × (cdiv(127 + 32,768, 64) + 1) = 2 × 515 = 1,030;
        # MLA 512; C4 states cdiv(7 + 32,768, 4) + 1 = 8,195; C128 states cdiv(127 + 32,768, 8) + 1 = 4,113;
        # 1,030 + 512 + 8,195 + 4,113 = 13,850
        ("b200", "13,850 blocks"),
    ],
)
def test_admit_128k_verdict(gpu: str, blocks: str) -> None:
    # issue 13 "Done when": the default H200 TP8 vLLM preset and B200 (weights given: the V4 presets carry no
    # parameter count); both reach a verdict on the one block pool
    r = runner.invoke(
        app,
        ["admit", "--ctx", "128K", "--model", "deepseek-v4-flash", "-d", VLLM, "--set", f"gpu={gpu}",
         "--set", "weights_per_gpu=20GiB"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ADMITTED" in r.output and blocks in r.output and "FLASHMLA_SPARSE_DSV4" in r.output
