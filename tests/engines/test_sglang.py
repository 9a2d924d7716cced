"""SGLang 0.5.23 goldens, each derived from shared/reference/sglang-0.5.23.md §2 and §9.

The worked examples there assume pre_model_load_memory = 143,771 MiB (the H200's NVML total, 140.4014 GiB)
and 88.0 GiB of weights per GPU; we set both explicitly so the numbers are comparable.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines import plan_pool
from kvplan.models.arch import ModelArch
from kvplan.models.deployment import load_deployment
from kvplan.units import GiB
from tests.conftest import make_plan

WORKED = {"pre_load_free": "143771MiB", "weights_per_gpu": "88GiB"}


def test_default_mem_fraction_static_h200_tp8() -> None:
    # reserved = 512 + max(8192, 2048) × 1.5 + 8 × 1 / 8 × 1024 + decode graph 512 × 2 + MLA prefill graph 1536
    #          = 512 + 12288 + 1024 + 1024 + 1536 = 16,384 MiB
    # mfs = round((143,771 − 16,384) / 143,771, 3) = round(0.88604, 3) = 0.886
    p = make_plan(**WORKED)
    assert p.knob("mem_fraction_static").value == 0.886
    assert p.knob("mem_fraction_static").defaulted
    assert p.extras["mem_fraction_reserved_mib"] == 16_384


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        # tp 4: max_bs 512: 512 + 12288 + 512 + 1024 + 1536 = 15,872 -> (143771 − 15872) / 143771 = 0.8896 -> 0.890
        (4, 0.890),
        # tp 2: max_bs 256: 512 + 12288 + 256 + 512 + 1536 = 15,104 -> 0.89494 -> 0.895
        (2, 0.895),
        # tp 1: 512 + 12288 + 128 + 512 + 1536 = 14,976 -> 0.89583 -> 0.896
        (1, 0.896),
    ],
)
def test_default_mem_fraction_by_tp(tp: int, expected: float) -> None:
    assert make_plan(tp=tp, **WORKED).knob("mem_fraction_static").value == expected


def test_cell_fp8_ds_mla_dcp1() -> None:
    # 656 B × 78 layers + 132 B × 21 full indexer layers = 51,168 + 2,772 = 53,940 B per token
    p = make_plan(**WORKED)
    assert (p.cell.main_bytes, p.cell.indexer_bytes, p.cell.total_bytes) == (51_168, 2_772, 53_940)
    assert p.mla_layout.value == "fp8_ds_mla"


def test_worked_example_dcp1() -> None:
    # slack = 140.4014 GiB × (1 − 0.886) = 16.0058 GiB; available = (140.4014 − 88) − 16.0058 GiB
    # = 36.3956 GiB = 39,079,490,093 B (reference §9.3, computed in GiB floats as SGLang does)
    # rows = 39,079,490,093 // 53,940 = 724,499 -> // 64 × 64 = 724,480
    p = make_plan(**WORKED)
    assert p.available_bytes == 39_079_490_093
    assert p.rows == 724_480
    assert p.logged_tokens == 724_480
    # index_buf_size = (724,480 + 64) × 1 − 64 = 724,480; pages = (724,480 + 64 + 1) // 64 = 11,321
    assert p.extras["index_buf_size"] == 724_480
    assert p.extras["index_pages_per_layer"] == 11_321
    # allocated = (S + 64) × 656 × 78 + 11,321 × 8,448 × 21 = 37,073,326,080 + 2,008,577,... = 39,081,903,360
    assert p.allocated_bytes == (724_480 + 64) * 656 * 78 + 11_321 * 8_448 * 21 == 39_081_903_360
    # max_running_requests: int(724,480 / 1,048,576 × 512) = 353 -> clamp to 2048; min(2048, S // 2) = 2048
    assert p.max_running_requests == 2048


def test_worked_example_dcp8_forced_656() -> None:
    # dcp 8 disables the prefill graph: reserved 14,848 MiB -> mfs = round(128,923 / 143,771, 3) = 0.897
    # cell = 51,168 + 2,772 × 8 (indexer replicated) = 73,344 B per per-rank row
    # available = (52.4014 − 140.4014 × 0.103) GiB = 37.9400 GiB = 40,737,793,114 B
    # rows = 40,737,793,114 // 73,344 = 555,434 -> 555,392; logged = 555,392 × 8 = 4,443,136
    p = make_plan(dcp=8, attention_backend="flashmla_kv", **WORKED)
    assert p.knob("mem_fraction_static").value == 0.897
    assert p.cell.total_bytes == 73_344
    assert p.rows == 555_392
    assert p.logged_tokens == 4_443_136
    # index_buf_size = (555,392 + 64) × 8 − 64 = 4,443,584 -> pages = (4,443,584 + 65) // 64 = 69,432
    assert p.extras["index_buf_size"] == 4_443_584
    assert p.extras["index_pages_per_layer"] == 69_432


def test_worked_example_dcp8_trtllm_default() -> None:
    # dcp > 1 sets both DSA backends to trtllm -> raw 576-B rows: 576 × 78 + 22,176 = 67,104 B
    # rows = 40,737,793,114 // 67,104 = 607,082 -> 607,040; logged 4,856,320
    p = make_plan(dcp=8, **WORKED)
    assert p.mla_layout.value == "fp8"
    assert p.cell.total_bytes == 67_104
    assert (p.rows, p.logged_tokens) == (607_040, 4_856_320)


def test_worked_example_bf16_h200_default_dtype() -> None:
    # auto on SM90 -> bf16: 576 × 2 × 78 + 2,772 = 92,628 B; 39,079,490,093 // 92,628 = 421,897 -> 421,888
    p = make_plan(kv_cache_dtype="auto", **WORKED)
    assert p.knob("kv_cache_dtype").value == "bfloat16"
    assert p.cell.total_bytes == 92_628
    assert p.rows == 421_888


def test_worked_example_mtp() -> None:
    # MTP (1 NextN layer): + int(51,168 × 1 / 78) + 132 × 1 = +656 + 132 -> 54,728 B
    # rows = 39,079,490,093 // 54,728 = 714,068 -> 714,048
    p = make_plan(speculative_num_draft_tokens=3, **WORKED)
    assert (p.cell.draft_main_bytes, p.cell.draft_indexer_bytes) == (656, 132)
    assert p.cell.total_bytes == 54_728
    assert p.rows == 714_048


def test_worked_example_mtp_dcp8() -> None:
    # dcp 8: draft pools are replicated: + (656 + 132) × 8 = +6,304 -> 73,344 + 6,304 = 79,648
    # rows = 40,737,793,114 // 79,648 = 511,472 -> 511,424; logged 4,091,392
    p = make_plan(dcp=8, attention_backend="flashmla_kv", speculative_num_draft_tokens=3, **WORKED)
    assert p.cell.total_bytes == 79_648
    assert (p.rows, p.logged_tokens) == (511_424, 4_091_392)


def test_published_sglang_30923_cell_sizes() -> None:
    # SGLang PR #30923 measured 55,224 -> 47,700 B/token for 78 layers with the 576-B layout:
    # 0.5.9: (512 + 64) × 78 + 132 × 78 (indexer on every layer) = 44,928 + 10,296 = 55,224
    # 0.5.23: 576 × 78 + 132 × 21 (full layers only)             = 44,928 +  2,772 = 47,700
    old = make_plan(engine_version="0.5.9", attention_backend="trtllm", **WORKED)
    new = make_plan(attention_backend="trtllm", **WORKED)
    assert old.cell.total_bytes == 55_224
    assert new.cell.total_bytes == 47_700
    # capacity: 39,079,490,093 // 47,700 -> 819,276 -> 819,264 vs 0.5.9 at mfs 0.897 (its own heuristic)
    assert new.rows == 39_079_490_093 // 47_700 // 64 * 64 == 819_264


def test_sglang_059_over_commits_656_rows() -> None:
    # 0.5.9 budgets (512 + 64) B per layer even where the pool allocates 656-B fp8_ds_mla rows
    p = make_plan(engine_version="0.5.9", **WORKED)
    assert p.cell.main_bytes == 576 * 78
    assert p.allocated_bytes > p.available_bytes
    assert any("over-commits" in n for n in p.notes)


def test_sglang_059_mem_fraction_with_eagle() -> None:
    # 0.5.9: 512 + 8192 × 1.5 + 512 × 2 + 1024 = 14,848 -> 0.897; + 2048 with EAGLE/MTP -> 16,896 -> 0.882
    assert make_plan(engine_version="0.5.9", **WORKED).knob("mem_fraction_static").value == 0.897
    mtp = make_plan(engine_version="0.5.9", speculative_num_draft_tokens=3, **WORKED)
    assert mtp.knob("mem_fraction_static").value == 0.882


def test_39_indexer_layers_instead_of_21(glm53: ModelArch) -> None:
    # cell = 51,168 + 132 × 39 = 56,316 B; rows = 39,079,490,093 // 56,316 = 693,932 -> 693,888
    # capacity change: 693,888 − 724,480 = −30,592 tokens (−4.2 %)
    flags = tuple(i < 39 for i in range(78))
    p39 = plan_pool(replace(glm53, indexer_full=flags), load_deployment(None, [f"{k}={v}" for k, v in WORKED.items()]))
    p21 = make_plan(**WORKED)
    assert p39.cell.total_bytes == 56_316
    assert p39.rows == 693_888
    assert p21.rows - p39.rows == 30_592


def test_one_million_token_request_bytes() -> None:
    # 1,048,576 tokens = 16,384 pages of 64; × 53,940 B = 56,560,189,440 B (52.68 GiB) per GPU:
    # main 1,048,576 × 51,168 = 53,653,536,768; indexer 1,048,576 × 2,772 = 2,906,652,672
    from kvplan.plan.budget import footprint

    f = footprint(make_plan(**WORKED), 1 << 20)
    assert f.pages == 16_384
    assert (f.main_bytes, f.indexer_bytes, f.total_bytes) == (53_653_536_768, 2_906_652_672, 56_560_189_440)


def test_default_deployment_rejects_1m() -> None:
    # Default: pre-load free = CUDA total 143,156 MiB − 1 GiB runtime overhead = 142,132 MiB = 138.80 GiB;
    # weights 94.46 GiB (measured); slack = 138.80 × 0.114 = 15.823 GiB;
    # available = 138.80 − 94.46 − 15.823 = 28.517 GiB = 30,620,424,077 B -> // 53,940 // 64 × 64 = 567,616
    p = make_plan()
    assert p.available_bytes == 30_620_424_077
    assert p.rows == 567_616 < 1 << 20
    assert p.available_bytes / GiB == pytest.approx(28.5175, abs=1e-4)


def test_weights_leave_nothing() -> None:
    p = make_plan(weights_per_gpu="130GiB")
    assert p.rows == 0
    assert p.startup_error is not None and "Loaded weights leave no GPU memory" in p.startup_error
