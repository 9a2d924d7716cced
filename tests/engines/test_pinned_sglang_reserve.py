"""SGLang's mem_fraction_static heuristics before 0.5.3 at their boundaries (kvplan.engines.sglang_reserve; issue 26).

Sources (each cited in the module): ``ServerArgs.__post_init__`` of 0.4.0-0.4.5 (a table by tp: tp >= 16 -> 0.79,
>= 8 -> 0.81, >= 4 -> 0.85, >= 2 -> 0.87, else 0.88); 0.4.6 (over 81,920 MiB: (gpu_mem − 13 × 1024) / gpu_mem, else the
table); 0.4.7 (sgl-project/sglang#5893 / #6718: base 0.88 over 81,920 MiB; 0.79 over 180,000 MiB on CUDA; over 96 GiB
min(base + 48 × 1024 × (1 − base) / gpu_mem, (gpu_mem − 18 GiB) / gpu_mem)); 0.4.8-0.5.2 (sgl-project/sglang#7054:
reserved MiB by GPU class, under 35 GiB (2.8 + tp × pp / 10) × 1024, under 90 GiB (9.5 + tp × pp / 2) × 1024, under
160 GiB (12 + tp × pp / 2) × 1024, else 32 × 1024).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.sglang_reserve import (
    _mem_fraction_0_4,
    _mem_fraction_by_tp,
    _mem_fraction_gpu_class,
    capacity_defaults,
    default_mem_fraction,
)
from kvplan.models.deployment import load_deployment

DEP = load_deployment("glm-5.3-8xh200-sglang")


@pytest.mark.parametrize(
    ("tp", "mfs"), [(32, 0.79), (16, 0.79), (15, 0.81), (8, 0.81), (4, 0.85), (3, 0.87), (2, 0.87), (1, 0.88)]
)
def test_the_0_4_table_by_tp(tp: int, mfs: float) -> None:
    assert _mem_fraction_by_tp(tp)[0] == mfs


def test_0_4_6_at_81_920_mib_keeps_the_table() -> None:
    # "gpu_mem <= 81920": exactly 81,920 MiB takes the table (tp 8 -> 0.81); 81,921 reserves 13 GiB
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.6", 81_920)[0] == 0.81
    mfs, why, reserved = _mem_fraction_0_4(DEP, "by_tp_0.4.6", 81_921)
    assert (mfs, reserved) == ((81_921 - 13_312) / 81_921, 13_312)
    assert why == "SGLang 0.4.6: (81,921 − 13,312 MiB) / 81,921 MiB (unrounded)"


def test_0_4_7_over_180_000_mib_on_cuda() -> None:
    # "gpu_mem > 180 * 1000": 180,001 MiB -> 0.79; 180,000 MiB -> min(0.88 + 49,152 × 0.12 / 180,000,
    # (180,000 − 18,432) / 180,000) = min(0.91277, 0.8976) = 161,568 / 180,000
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 180_001)[0] == 0.79
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 180_000)[0] == (180_000 - 18_432) / 180_000


def test_0_4_7_relaxed_term_binds_just_over_96_gib() -> None:
    # 98,400 MiB: min(0.88 + 49,152 × 0.12 / 98,400, (98,400 − 18,432) / 98,400) = min(0.93994, 0.81268): the cap;
    # at 0.4.7's 81,920 < gpu_mem <= 96 GiB (90,000 MiB) neither applies: base 0.88
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 98_400)[0] == (98_400 - 18_432) / 98_400
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 90_000)[0] == 0.88


@pytest.mark.parametrize(
    ("gpu_mem", "reserved"),
    [
        # tp 8, pp 1: under 35 × 1024 = 35,840 MiB: (2.8 + 0.8) × 1024 = 3,686.4; from 35,840: (9.5 + 4) × 1024
        (35_839, 3_686),
        (35_840, 13_824),
        # under 90 × 1024 = 92,160: 13,824; from 92,160: (12 + 4) × 1024 = 16,384; from 160 × 1024: 32,768
        (92_159, 13_824),
        (92_160, 16_384),
        (163_839, 16_384),
        (163_840, 32_768),
    ],
)
def test_0_4_8_gpu_classes_at_their_boundaries(gpu_mem: int, reserved: int) -> None:
    assert _mem_fraction_gpu_class(DEP, gpu_mem, 2048)[2] == reserved


def test_0_4_8_reserve_is_said_with_its_terms() -> None:
    # H200 with MTP and DP attention: 16,384 + 2,048 + 4,096 = 22,528 MiB -> round(121,243 / 143,771, 3) = 0.843
    dep = replace(DEP, speculative_num_draft_tokens=4, dp_attention=8)
    mfs, why, reserved = _mem_fraction_gpu_class(dep, 143_771, 2048)
    assert (mfs, reserved) == (0.843, 22_528)
    assert why == (
        "round((143,771 MiB − 22,528 MiB reserved) / 143,771 MiB, 3); reserved = (12 + tp×pp 8 / 2) × 1024 + "
        "EAGLE/MTP 2048 + dp attention 4096"
    )


def test_0_4_7_relaxed_term_binds_on_a_big_rocm_gpu() -> None:
    # not CUDA, so no 0.79 over 180,000 MiB; 262,144 MiB: min(0.88 + 49,152 × 0.12 / 262,144 = 0.88 + 0.0225,
    # (262,144 − 18,432) / 262,144 = 0.9297) = 0.9025: the relaxed term binds above ~202,750 MiB
    amd = replace(DEP, gpu=replace(DEP.gpu, vendor="amd"))
    assert _mem_fraction_0_4(amd, "by_tp_0.4.7", 262_144)[0] == pytest.approx(0.9025, abs=1e-12)


def test_0_4_7_just_over_81_920_mib_leaves_the_table_for_0_88() -> None:
    # 0.4.7 ServerArgs.__post_init__: "gpu_mem <= 81920" takes the table by tp × pp (tp 8 -> 0.81); 81,921 MiB is
    # over it: base 0.88, and neither the > 180,000 MiB row nor the > 96 × 1024 = 98,304 MiB cap applies
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 81_920)[0] == 0.81
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 81_921)[0] == 0.88


@pytest.mark.parametrize("version", ["0.5.3", "0.5.23"])
def test_reserve_counts_tp_times_pp_over_8_gib(version: str) -> None:
    # memory_hook.handle_gpu_memory_settings (0.5.23; server_args.py ~1020 in 0.5.3-0.5.9, reference §2.6 / §10):
    # reserved = 512 + max(chunk, 2048) × 1.5 + tp_size × pp_size / 8 × 1024 + decode max_bs × 2; pp > 1 disables the
    # prefill graph. H200 (143,771 MiB), tp 2, pp 2, chunk 8192, max_bs 256 (tp < 4):
    # 512 + 12,288 + 4 / 8 × 1,024 = 512 + 256 × 2 = 512 -> 13,824 MiB (> the 10,240 floor);
    # round((143,771 − 13,824) / 143,771, 3) = round(0.90385, 3) = 0.904 (tp // pp would give 128 MiB: 13,440, 0.907)
    dep = replace(DEP, tp=2, pp=2, dp_attention=1, speculative_num_draft_tokens=0)
    assert dep.gpu.nvml_total_bytes // 2**20 == 143_771
    mfs, _, reserved = default_mem_fraction(dep, chunk=8192, max_bs=256, version=version)
    assert (mfs, reserved) == (0.904, 13_824)


def test_0_4_7_table_is_read_at_tp_times_pp() -> None:
    # 0.4.7 ServerArgs.__post_init__ reads the table at tp_size × pp_size (sgl-project/sglang#6718): tp 2 × pp 2 = 4
    # -> 0.85 at <= 81,920 MiB (tp 2 alone would be 0.87, tp // pp = 1 0.88)
    dep = replace(DEP, tp=2, pp=2, speculative_num_draft_tokens=0)
    assert _mem_fraction_0_4(dep, "by_tp_0.4.7", 81_920)[0] == 0.85


def test_0_4_8_gpu_class_reserve_counts_tp_times_pp() -> None:
    # sgl-project/sglang#7054: under 160 GiB reserved = (12 + tp × pp / 2) × 1024; tp 2 × pp 2 -> 14 × 1024 = 14,336
    # MiB (tp // pp would give 12.5 × 1024 = 12,800); round((143,771 − 14,336) / 143,771, 3) = round(0.90029) = 0.9
    dep = replace(DEP, tp=2, pp=2, dp_attention=1, speculative_num_draft_tokens=0)
    assert _mem_fraction_gpu_class(dep, 143_771, 2048)[::2] == (0.9, 14_336)


def test_0_4_7_at_exactly_96_gib_keeps_0_88() -> None:
    # 0.4.7: "gpu_mem > 96 * 1024" — exactly 98,304 MiB is not over it: base 0.88 (over 81,920 MiB), no reserve;
    # 98,305 MiB takes min(0.88 + 49,152 × 0.12 / 98,305, (98,305 − 18,432) / 98,305) = the cap, 0.81250
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 98_304)[::2] == (0.88, 0)
    assert _mem_fraction_0_4(DEP, "by_tp_0.4.7", 98_305)[::2] == ((98_305 - 18_432) / 98_305, 18_432)


def test_the_10_gib_floor_starts_over_60_gib() -> None:
    # memory_hook.handle_gpu_memory_settings (0.5.23, reference §2.6): "if gpu_mem > 60*1024: reserved_mem =
    # max(reserved_mem, 10*1024)". tp 1, chunk 2048, decode max_bs 256, MLA prefill graph: 512 + 2,048 × 1.5 +
    # 1 / 8 × 1,024 + 256 × 2 + 1,536 = 5,760 MiB. At 61,440 MiB (= 60 × 1024, not over) it stands:
    # round(55,680 / 61,440, 3) = 0.906; at 61,441 MiB the floor binds: round(51,201 / 61,441, 3) = 0.833
    dep = replace(DEP, tp=1, dp_attention=1, speculative_num_draft_tokens=0)
    at = {
        mib: default_mem_fraction(
            replace(dep, gpu=replace(dep.gpu, nvml_total_bytes=mib * 2**20)), chunk=2048, max_bs=256, version="0.5.23"
        )
        for mib in (61_440, 61_441)
    }
    assert at[61_440][::2] == (0.906, 5_760)
    assert at[61_441][::2] == (0.833, 10_240)


def test_0_5_10_capacity_row_under_35_gib_ends_at_35_gib() -> None:
    # fresh seed 65036. ServerArgs._handle_gpu_memory_settings (0.5.10 on, reference §2 table): "elif gpu_mem <
    # 35 * 1024: # A10, 4090, 5090 (chunked_prefill_size 4k, max_bs 48 if tp < 4 else 160)", then "< 60 Gi": 4096,
    # 32 / 160. A 34 GiB (34,816 MiB) GPU at tp 1 is in the first row (48), 35,840 MiB in the second (32)
    assert capacity_defaults(34 * 1024, 1, "0.5.10") == (4096, 48)
    assert capacity_defaults(35 * 1024 - 1, 1, "0.5.10") == (4096, 48)
    assert capacity_defaults(35 * 1024, 1, "0.5.10") == (4096, 32)


def test_0_4_7_eagle_takes_5_percent_off_the_table_and_reserves_no_mib() -> None:
    # fresh seed 65036. 0.4.7 ServerArgs.__post_init__ at <= 96 GiB: the table by tp × pp (8 -> 0.81), then
    # "mem_fraction_static *= 0.95" for speculative decoding: 0.81 × 0.95; a table's fraction reserves no MiB (0)
    mfs, why, reserved = _mem_fraction_0_4(replace(DEP, speculative_num_draft_tokens=3), "by_tp_0.4.7", 81_920)
    assert (mfs, reserved) == (0.81 * 0.95, 0)
    assert why.endswith(" × 0.95 (EAGLE)")
