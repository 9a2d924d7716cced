"""The pool plan's own arithmetic (kvplan.engines.common), pinned at the figures the engines' sources give
(issue 26: mutants of Cell, Demand, Pool, PoolPlan, memory_map and check_gpu_memory that no test read).

SGLang figures: shared/reference/sglang-0.5.23.md §9 (GLM-5.3, 78 layers, 21 indexer layers, 656-B rows on an
H200 of 143,771 MiB, 88 GiB of weights); vLLM figures: reference §7 "With MTP" as in test_pinned_engines.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import Cell, Demand, Knob, Pool, check_gpu_memory, memory_map
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import MiB
from tests.conftest import make_plan

WORKED = {"pre_load_free": "143771MiB", "weights_per_gpu": "88GiB"}


def _mtp_dcp8():  # type: ignore[no-untyped-def]
    return make_plan(dcp=8, attention_backend="flashmla_kv", speculative_num_draft_tokens=3, **WORKED)


def test_sglang_dcp8_mtp_cell_by_term() -> None:
    # SGLang model_runner_kv_cache_mixin (reference §9.2): main 656 × 78 = 51,168 (not × dcp), indexer
    # 132 × 21 × 8 = 22,176; the draft pools are replicated under DCP: (656 + 132) × 8 = 5,248 + 1,056.
    # cell 79,648; what a main-KV-only plan charges: 51,168 + 5,248 = 56,416
    c = _mtp_dcp8().cell
    assert (c.main_bytes, c.indexer_bytes, c.draft_main_bytes, c.draft_indexer_bytes) == (51_168, 22_176, 5_248, 1_056)
    assert (c.total_bytes, c.main_only_bytes) == (79_648, 56_416)


def test_a_cell_without_a_draft_is_main_plus_indexer() -> None:
    # reference §9.2 dcp 1, no MTP: 51,168 + 2,772 = 53,940 B (vLLM V0 and SGLang's DeepSeek-V4 build their
    # cells without draft terms)
    assert Cell(main_bytes=51_168, indexer_bytes=2_772).total_bytes == 53_940


def test_dcp8_pages_hold_512_tokens_across_the_ranks() -> None:
    # reference §9.3 dcp8 + MTP: S = 40,737,793,114 // 79,648 // 64 × 64 = 511,424 rows = 7,991 pages of 64 rows;
    # one page holds 64 × 8 = 512 tokens of a request, so 7,991 × 512 = 4,091,392 tokens (the logged figure).
    # The implied pool: 7,991 pages of 79,648 × 64 = 5,097,472 B, 40,733,898,752 B (= 511,424 × 79,648)
    p = _mtp_dcp8()
    assert (p.logical_page_tokens, p.usable_pages, p.usable_tokens) == (512, 7_991, 4_091_392)
    (pool,) = p.hybrid_pools
    assert (pool.page_tokens, pool.capacity, pool.unit_bytes, pool.bytes) == (512, 7_991, 5_097_472, 40_733_898_752)
    assert p.pages_for(513) == 2


@pytest.mark.parametrize(
    ("demand", "tokens", "page", "units"),
    [
        # one request's pages: ceil(129 / 64) = 3 (vLLM FullAttentionSpec; SGLang's page allocator)
        (Demand("full", "token"), 129, 64, 3),
        # vLLM SlidingWindowSpec.max_memory_usage_bytes: cdiv(window tokens, block) + 1 (the window need not start
        # at a block boundary): cdiv(128, 64) + 1 = 3 whatever the length
        (Demand("swa", "window", window=128, extra=1), 10_000, 64, 3),
        # a window longer than the request: cdiv(100, 64) + 1 = 3
        (Demand("swa", "window", window=4_096, extra=1), 100, 64, 3),
        # a group's own block size (vLLM DeepSeek-V4: 256-token blocks in a pool of 64): cdiv(1,000, 256) = 4
        (Demand("c4", "token", page_tokens=256), 1_000, 64, 4),
        # three equal linear-attention groups in vLLM's one pool: 3 blocks a request whatever its length
        (Demand("linear", "request", units=3), 1_000_000, 64, 3),
        # two groups of full attention: 2 × ceil(65 / 64) = 4
        (Demand("full", "token", units=2), 65, 64, 4),
        # no tokens, no page: vLLM get_num_blocks_to_allocate cdiv(0, block) = 0; a negative count is none
        (Demand("full", "token"), 0, 64, 0),
        (Demand("full", "token"), -5, 64, 0),
        # a window of no tokens keeps only the extra block: cdiv(0, 64) + 1 = 1
        (Demand("swa", "window", window=128, extra=1), 0, 64, 1),
    ],
)
def test_demand_need(demand: Demand, tokens: int, page: int, units: int) -> None:
    assert demand.need(tokens, page) == units


def test_pool_fits_requests() -> None:
    # 1,000 blocks of 64; a 129-token request takes 3 full blocks and 3 window blocks: 1,000 // 6 = 166
    pool = Pool("KV", "block", 64, 1_000, 4_096, (Demand("full", "token"), Demand("swa", "window", 128, extra=1)))
    assert (pool.need(129), pool.fits(129), pool.bytes) == (6, 166, 4_096_000)


def test_vllm_mtp_memory_map_by_segment() -> None:
    # vLLM GLM-5.3 FP8 8xH200, 3 MTP tokens (reference §7; test_pinned_engines): 8,088 blocks × 64 = 517,632 rows
    # main 517,632 × 51,168 = 26,486,194,176; indexer × 2,772 = 1,434,875,904; draft × 788 = 407,894,016;
    # free = 28,330,388,925 available − 517,632 × 54,728 = 1,424,829; outside CUDA: NVML 150,754,820,096 − CUDA
    # 150,109,945,856 = 644,874,240; weights 101,425,652,695 (PR #893's 94.46 GiB); the reserve is the rest:
    # 150,109,945,856 − 101,425,652,695 − 28,328,964,096 − 1,424,829 = 20,353,904,236
    p = make_plan("glm-5.3-8xh200-vllm", speculative_num_draft_tokens=3)
    assert {s.label: s.bytes for s in p.memory_map} == {
        "weights": 101_425_652_695,
        "main KV": 26_486_194_176,
        "indexer": 1_434_875_904,
        "draft": 407_894_016,
        "reserve": 20_353_904_236,
        "free": 1_424_829,
        "driver": 644_874_240,
    }


def test_sglang_allocation_over_the_budget_leaves_no_free_segment() -> None:
    # reference §9.3 dcp1: the tensors take (S + 64) × 656 × 78 + 11,321 × 8,448 × 21 = 39,081,903,360 B, 2.4 MB
    # over the 39,079,490,093 B budget (the slack absorbs it): free 0, never negative; reserve = 143,771 MiB
    # (150,754,820,096) − 94,489,280,512 (88 GiB) − 39,081,903,360 = 17,183,636,224
    p = make_plan(**WORKED)
    m = {s.label: s.bytes for s in p.memory_map}
    assert (m["main KV"] + m["indexer"], m["free"], m["reserve"]) == (39_081_903_360, 0, 17_183_636_224)


def test_memory_map_weights_clipped_to_the_gpu_and_never_below_zero() -> None:
    # weights that do not load fill the GPU, no more (100 − 10 outside = 90); no weights are 0 B, not 1
    big = memory_map(nvml_total=100, outside=("driver", 10), weights=150, main=0, indexer=0, draft=0, available=0)
    none = memory_map(nvml_total=100, outside=("driver", 10), weights=0, main=20, indexer=5, draft=3, available=30)
    assert [s.bytes for s in big] == [90, 0, 0, 0, 0, 0, 10]
    assert [s.bytes for s in none] == [0, 20, 5, 3, 60, 2, 10]


def _gpu_plan(nvml: int, cuda: int):  # type: ignore[no-untyped-def]
    dep = load_deployment("glm-5.3-8xh200-sglang")
    gpu = replace(dep.gpu, key="custom", name="tiny", nvml_total_bytes=nvml, cuda_total_bytes=cuda)
    return plan_pool(load_model("glm-5.3"), replace(dep, gpu=gpu))


@pytest.mark.parametrize(("nvml", "cuda"), [(2 * MiB, MiB - 1), (MiB - 1, 2 * MiB)])
def test_either_total_under_one_mib_does_not_start(nvml: int, cuda: int) -> None:
    # SGLang's heuristic reads the total in MiB (get_device_memory_capacity); either figure under 1 MiB is refused
    with pytest.raises(PlanError, match=r"^the engine does not start: GPU 'tiny' has"):
        _gpu_plan(nvml, cuda)


def test_a_gpu_of_exactly_one_mib_is_a_verdict_not_bad_input() -> None:
    # 1 MiB is not under 1 MiB: the arithmetic runs, and GLM-5.3's weights do not load (startup_error, exit 1)
    p = _gpu_plan(MiB, MiB)
    assert p.startup_error is not None and not p.loads_weights


def test_weights_of_exactly_the_free_memory_load() -> None:
    # loading runs out of memory only when the weights are more than what is free before loading (the allocator
    # hands out exactly the bytes asked): 88 GiB into exactly 88 GiB free loads, one byte more does not
    dep = load_deployment("glm-5.3-8xh200-sglang")
    free = 88 * 1024 * MiB
    assert check_gpu_memory(dep, weights=free, free_before_load=free, free_label="pre_load_free") is None
    over = check_gpu_memory(dep, weights=free + 1, free_before_load=free, free_label="pre_load_free")
    assert over is not None and over.endswith("pre_load_free on one NVIDIA H200: loading them runs out of memory")


# ---- every mutant of the module (--sample 0): the knob types, the Demand defaults, the engine's name, 1 B free


def test_a_knob_read_as_a_count_must_be_an_integer() -> None:
    # bytes and lengths are ints: a fractional or boolean value read as one is a TypeError, not a silent float
    assert Knob("page_size", 64, "set").as_int() == 64
    for bad in (1.5, True):
        with pytest.raises(TypeError, match="is not an integer"):
            Knob("page_size", bad, "set").as_int()
    assert Knob("mem_fraction_static", 0.9, "set").as_float() == 0.9
    for bad in ("0.9", False):
        with pytest.raises(TypeError, match="is not a number"):
            Knob("mem_fraction_static", bad, "set").as_float()


def test_a_window_demand_takes_only_the_window_and_extra_it_is_given() -> None:
    # the defaults add nothing: every engine module gives a window demand its window and extra pages (SGLang + 2,
    # vLLM + 1); with neither, a request takes no page of it
    assert Demand("swa", "window").need(10_000, 64) == 0
    assert Demand("swa", "window", window=128).need(10_000, 64) == 2


def test_the_plan_names_its_engine_and_version() -> None:
    # what admit's pool check says builds the pool ("SGLang 0.5.23 builds the pool")
    assert make_plan(**WORKED).semantics == "SGLang 0.5.23"
    assert make_plan("glm-5.3-8xh200-vllm").semantics.startswith("vLLM ")


def test_one_byte_free_is_not_nothing_free() -> None:
    # free_before_load <= 0 is "nothing is left"; 1 B holds 1 B of weights and refuses 2
    dep = load_deployment("glm-5.3-8xh200-sglang")
    assert check_gpu_memory(dep, weights=1, free_before_load=1, free_label="pre_load_free") is None
    assert "loading them runs out of memory" in str(
        check_gpu_memory(dep, weights=2, free_before_load=1, free_label="x")
    )
    assert check_gpu_memory(dep, weights=1, free_before_load=0, free_label="pre_load_free") == (
        "pre_load_free is 0 B: nothing is left to load the weights into"
    )
