"""SGLang 0.4.0 -> 0.5.9 as data (kvplan/versions.py SGLANG rows), each rule change checked on its own.

Every expected figure is derived in its comment from the rule the row cites (read in the sglang release wheels:
``ServerArgs.__post_init__`` / ``_handle_gpu_memory_settings``, ``profile_max_num_token`` /
``get_cell_size_per_token``, ``NSATokenToKVPool``). GPU totals are the catalog's nvidia-smi figures in MiB:
H100 81,559, H200 143,771, B200 183,359, L4 23,034, L40S 46,068; MI300X 205,822,885,888 B = 196,288 MiB.
"""

from __future__ import annotations

from functools import cache

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB
from kvplan.versions import SGLANG, sglang_rules

LLAMA = "tests/data/hf/llama-3.1-8b/config.json"
DSV32 = "tests/data/hf/deepseek-v3.2/config.json"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
# weights and pre-load memory pinned so that the pool arithmetic below does not depend on the weight estimate
PINNED = ("weights_per_gpu=15GiB", "pre_load_free=78GiB")


@cache
def _arch(path: str) -> ModelArch:
    return load_model(path)  # the DeepSeek config's per-tensor weights take a second or two: once per module


def _plan(model: str, version: str, gpu: str, *sets: str, tp: int = 1) -> PoolPlan:
    dep = load_deployment(
        None,
        [
            f"model={model}",
            "engine=sglang",
            f"engine_version={version}",
            f"gpu={gpu}",
            f"gpus_per_node={max(tp, 1)}",
            f"tp={tp}",
            *GQA,
            *sets,
        ],
    )
    return plan_pool(_arch(model), dep)


def _mfs(version: str, gpu: str, *sets: str, tp: int = 1) -> float:
    value = _plan(LLAMA, version, gpu, *sets, tp=tp).knob("mem_fraction_static").value
    assert isinstance(value, float)
    return value


# --------------------------------------------------------------------------- which row a version takes


@pytest.mark.parametrize(
    ("version", "label"),
    [
        ("0.4.0", "0.4.0-0.4.5"),
        ("0.4.5.post3", "0.4.0-0.4.5"),
        ("0.4.6", "0.4.6"),
        ("0.4.6.post5", "0.4.6"),
        ("0.4.7.post1", "0.4.7"),
        ("0.4.8", "0.4.8-0.5.2"),
        ("0.4.9.post6", "0.4.8-0.5.2"),
        ("0.4.10.post2", "0.4.8-0.5.2"),
        ("0.5.0rc2", "0.4.8-0.5.2"),
        ("0.5.2", "0.4.8-0.5.2"),
        ("0.5.3.post3", "0.5.3"),
        ("0.5.4.post3", "0.5.4"),
        ("0.5.5.post3", "0.5.5"),
        ("0.5.6", "0.5.6"),
        ("0.5.6.post2", "0.5.6.post1-0.5.6.post2"),
        ("0.5.7", "0.5.7-0.5.8"),
        ("0.5.8", "0.5.7-0.5.8"),
        ("0.5.8.post1", "0.5.8.post1-0.5.9"),
        ("0.5.9", "0.5.8.post1-0.5.9"),
        ("0.5.10", "0.5.10-0.5.23"),
    ],
)
def test_each_sglang_release_takes_its_row(version: str, label: str) -> None:
    assert sglang_rules(version).label == label


def test_every_sglang_release_from_0_4_0_to_0_5_23_is_modelled_and_cited() -> None:
    # rows are contiguous from 0.4.0 to 0.5.24 and each cites the PR or wheel it was read from
    assert SGLANG[0].since == (0, 4, 0) and SGLANG[-1].until == (0, 5, 24)
    for row in SGLANG:
        assert row.modelled and ("#" in row.cite or "wheel" in row.cite), row.label
    for minor in range(0, 11):
        sglang_rules(f"0.4.{minor}")
    for minor in range(0, 24):
        sglang_rules(f"0.5.{minor}")
    with pytest.raises(InputError, match="outside every range"):
        sglang_rules("0.3.6")


# --------------------------------------------------------------------------- the memory-fraction heuristics


def test_0_4_0_to_0_4_5_table_by_tp_whatever_the_gpu() -> None:
    # ServerArgs 0.4.0-0.4.5: tp >= 8 -> 0.81 on an H200 as on an H100 (no GPU-memory term)
    assert _mfs("0.4.5", "h200", tp=8) == 0.81
    assert _mfs("0.4.5", "h100-sxm", tp=8) == 0.81


def test_0_4_6_reserves_13_gib_above_80_gib() -> None:
    # H100: 81,559 <= 81,920 -> the tp table, tp 1 -> 0.88
    assert _mfs("0.4.6", "h100-sxm") == 0.88
    # H200: (143,771 − 13 × 1024) / 143,771 = 130,459 / 143,771, unrounded
    assert _mfs("0.4.6", "h200", tp=8) == (143_771 - 13_312) / 143_771


def test_0_4_7_relaxed_fraction_on_big_gpus() -> None:
    # H200 (sgl-project/sglang#5893): base 0.88 (> 81,920 MiB), then > 96 GiB:
    # min(0.88 + 49,152 × 0.12 / 143,771, (143,771 − 18,432) / 143,771) = min(0.92103, 0.87180) = 125,339 / 143,771
    assert _mfs("0.4.7", "h200", tp=8) == (143_771 - 18 * 1024) / 143_771
    # with EAGLE the reserve is 20 GiB: (143,771 − 20,480) / 143,771
    assert _mfs("0.4.7", "h200", "speculative_num_draft_tokens=4", tp=8) == (143_771 - 20 * 1024) / 143_771
    # B200 (#6718): 183,359 > 180,000 on CUDA -> 0.79
    assert _mfs("0.4.7", "b200", tp=8) == 0.79
    # MI300X is not CUDA: 196,288 MiB > 96 GiB -> min(0.88 + 49,152 × 0.12 / 196,288, 177,856 / 196,288)
    assert _mfs("0.4.7", "mi300x", tp=8) == min(0.88 + 49_152 * (1 - 0.88) / 196_288, (196_288 - 18_432) / 196_288)
    # H100 tp 8: the table by tp × pp -> 0.81; with EAGLE × 0.95
    assert _mfs("0.4.7", "h100-sxm", tp=8) == 0.81
    assert _mfs("0.4.7", "h100-sxm", "speculative_num_draft_tokens=4", tp=8) == 0.81 * 0.95


@pytest.mark.parametrize(
    ("gpu", "tp", "sets", "expected"),
    [
        # H100 (< 90 GiB): (9.5 + 1 / 2) × 1024 = 10,240 -> round(71,319 / 81,559, 3) = round(0.87445, 3)
        ("h100-sxm", 1, (), 0.874),
        # H200 (< 160 GiB): (12 + 8 / 2) × 1024 = 16,384 -> round(127,387 / 143,771, 3) = round(0.88604, 3)
        ("h200", 8, (), 0.886),
        # B200: 32 × 1024 = 32,768 -> round(150,591 / 183,359, 3) = round(0.82129, 3)
        ("b200", 8, (), 0.821),
        # L4 (< 35 GiB): (2.8 + 4 / 10) × 1024 = 3,276.8 -> round(19,757.2 / 23,034, 3) = round(0.85774, 3)
        ("l4", 4, (), 0.858),
        # H200 + EAGLE 2,048 + dp attention 4,096: 22,528 -> round(121,243 / 143,771, 3) = round(0.84331, 3)
        ("h200", 8, ("speculative_num_draft_tokens=4", "dp_attention=8"), 0.843),
    ],
)
def test_0_4_8_to_0_5_2_reserve_by_gpu_class(gpu: str, tp: int, sets: tuple[str, ...], expected: float) -> None:
    assert _mfs("0.5.2", gpu, *sets, tp=tp) == expected
    assert _mfs("0.4.8", gpu, *sets, tp=tp) == expected


def test_0_5_3_reserve_formula() -> None:
    # H100 tp 1, chunk 8192, max_bs 256: 512 + 8192 × 1.5 + 256 × 2 + 1 / 8 × 1024 = 13,440 MiB (over the 10 GiB
    # floor) -> round(68,119 / 81,559, 3) = round(0.83521, 3) = 0.835
    p = _plan(LLAMA, "0.5.3", "h100-sxm")
    assert p.knob("mem_fraction_static").value == 0.835
    assert p.extras["mem_fraction_reserved_mib"] == 13_440


@pytest.mark.parametrize(
    ("version", "chunk", "max_bs"),
    [
        ("0.4.5", 2048, None),  # 0.4.0-0.4.6: 23,034 MiB < 25,000 -> 2048 (max_bs plays no part in the mfs)
        ("0.4.8", 2048, None),  # < 35 GiB: 2048
        ("0.5.3", 2048, 16),  # _handle_gpu_memory_settings of 0.5.3: < 35 GiB -> 2048, max_bs 16 at tp < 4
        ("0.5.5", 2048, 24),  # 0.5.5: 24
        ("0.5.9", 2048, 24),
        ("0.5.23", 4096, 48),  # 0.5.23 memory_hook: 4096 and 48
    ],
)
def test_capacity_defaults_on_a_24_gb_gpu(version: str, chunk: int, max_bs: int | None) -> None:
    p = _plan(LLAMA, version, "l4", "weights_per_gpu=15GiB", "pre_load_free=21GiB")
    assert p.knob("chunked_prefill_size").value == chunk
    if max_bs is not None:
        assert p.knob("cuda_graph_max_bs").value == max_bs


def test_0_5_9_on_a_24_gb_gpu_takes_its_own_capacity_table() -> None:
    # regression: 0.5.9 used 0.5.23's < 35 GiB row (chunk 4096, max_bs 48): 512 + 6144 + 96 + 128 = 6,880 MiB -> 0.701
    # 0.5.9's own: chunk 2048, max_bs 24: 512 + 3072 + 48 + 128 = 3,760 MiB -> round(19,274 / 23,034, 3) = 0.837
    p = _plan(LLAMA, "0.5.9", "l4", "weights_per_gpu=15GiB", "pre_load_free=21GiB")
    assert p.knob("mem_fraction_static").value == 0.837
    assert p.extras["mem_fraction_reserved_mib"] == 3_760


def test_0_5_3_reserve_takes_at_least_a_2048_token_chunk() -> None:
    # --chunked-prefill-size 1024: max(1024, 2048) × 1.5 = 3,072 (0.5.9 charged 1024 × 1.5 before the fix)
    # 512 + 3072 + 24 × 2 + 128 = 3,760 MiB on an L4 at tp 1
    p = _plan(LLAMA, "0.5.9", "l4", "chunked_prefill_size=1024", "weights_per_gpu=15GiB", "pre_load_free=21GiB")
    assert p.extras["mem_fraction_reserved_mib"] == 3_760


def test_0_4_7_chunk_16k_over_180_000_mib() -> None:
    # #6718: gpu_mem > 180,000 MiB -> chunked_prefill_size 16384 (B200); 0.4.6 still 8192
    assert _plan(LLAMA, "0.4.7", "b200", *PINNED).knob("chunked_prefill_size").value == 16384
    assert _plan(LLAMA, "0.4.6", "b200", *PINNED).knob("chunked_prefill_size").value == 8192
    # 0.4.8: 8192 under 160 GiB (L40S 46,068 MiB), 16384 above
    l40s = ("weights_per_gpu=15GiB", "pre_load_free=40GiB")
    assert _plan(LLAMA, "0.4.8", "l40s", *l40s).knob("chunked_prefill_size").value == 8192


# --------------------------------------------------------------------------- DSA (NSA) rules


def _dsv32(version: str, *sets: str) -> PoolPlan:
    return _plan(DSV32, version, "b200", "dp_attention=8", *sets, tp=8)


def test_dsa_arrives_in_0_5_3_for_deepseek_only() -> None:
    with pytest.raises(InputError, match=r"has no DSA .*DeepSeek-V3\.2 needs 0\.5\.3"):
        _dsv32("0.5.2")
    # GLM-5 (GlmMoeDsaForCausalLM) is not is_deepseek_nsa in 0.5.8; the message names what SGLang lacks and where
    # the pool arrived (the 0.5.8.post1 line, whose dated images serve GLM-5)
    dep = load_deployment("glm-5.3-8xh200-sglang", ["engine_version=0.5.8"])
    with pytest.raises(
        InputError, match=r"has no GlmMoeDsaForCausalLM model: its DSA pool came with the 0\.5\.8\.post1"
    ):
        plan_pool(load_model(dep.model), dep)


def test_0_5_3_leaves_the_index_k_out_and_forces_0_8() -> None:
    # budget cell = 61 × (512 + 64) × 1 B = 35,136 B (fp8, forced on SM100), no index K; mfs 0.8 over the user's 0.9
    p = _dsv32("0.5.3", "mem_fraction_static=0.9")
    assert (p.cell.main_bytes, p.cell.indexer_bytes) == (35_136, 0)
    assert p.knob("mem_fraction_static").value == 0.8
    assert p.mla_layout is not None and p.mla_layout.value == "fp8_ds_mla"
    # the index K is still allocated on all 61 layers: 132 B × 64-token pages
    assert p.indexer_layers == 61 and p.extras["indexer_alloc_bytes"] > 0


def test_0_5_4_budgets_the_index_k_on_every_layer() -> None:
    # cell = 61 × 576 + 61 × 132 = 35,136 + 8,052 B; the mem fraction from the reserve with dp attention 8:
    # 512 + 16384 × 1.5 + 512 × 2 + 8 / 8 × 1024 + 512 × 8 × 3 + 512 × 8 × 1.5 = 45,568 -> round(137,791 / 183,359, 3)
    p = _dsv32("0.5.4")
    assert (p.cell.main_bytes, p.cell.indexer_bytes) == (35_136, 8_052)
    assert p.knob("mem_fraction_static").value == 0.751
    assert p.extras["mem_fraction_reserved_mib"] == 45_568


def test_0_5_3_to_0_5_5_force_dp_attention_for_nsa() -> None:
    # server_args: enable_dp_attention = True, dp_size = tp_size; 0.5.6 allows the TP mode
    forced = _plan(DSV32, "0.5.5", "b200", tp=8)
    assert forced.deployment.dp_attention == 8 and any("turns on DP attention" in n for n in forced.notes)
    tp_mode = _plan(DSV32, "0.5.6", "b200", tp=8)
    assert tp_mode.deployment.dp_attention == 1
    # without the dp terms: 512 + 24,576 + 1,024 + 1,024 = 27,136 MiB -> round(156,223 / 183,359, 3) = 0.852
    assert tp_mode.knob("mem_fraction_static").value == 0.852


def test_fp8_nsa_rows_are_656_b_on_any_backend_until_0_5_9() -> None:
    # 0.5.8 on B200: NSATokenToKVPool's override dim 512 + 512 / 128 × 4 + 64 × 2 = 656 B whatever the backend;
    # 0.5.9 gives trtllm (the SM100 default) raw 576-B rows
    assert _dsv32("0.5.8").mla_bytes_per_layer == 576  # the budget charges the raw row in both
    assert _dsv32("0.5.8").extras["mla_alloc_bytes"] % 656 == 0
    p9 = _dsv32("0.5.9")
    assert p9.mla_layout is not None and p9.mla_layout.value == "fp8"


@pytest.mark.parametrize(
    ("version", "tokens", "kv_size_gb", "extra"),
    [
        # main before #11309 (0.5.3): the log's KV size counts the MLA rows only:
        # (1,462,784 + 64) × 656 × 61 = 58,537,325,568 B = 54.5172 GiB -> "54.52 GB"
        ("0.5.3", 1_462_784, "54.52", "mla_alloc_bytes"),
        # #11309 (0.5.4): MLA + index K: (975,424 + 64) × 656 × 61 + 15,242 pages × 64 × 132 × 61
        # = 46,889,757,184 B = 43.6694 GiB -> "43.67 GB"
        ("0.5.4", 975_424, "43.67", "allocated"),
    ],
)
def test_pr_11309_kv_sizes_to_the_printed_digit(version: str, tokens: int, kv_size_gb: str, extra: str) -> None:
    p = _dsv32(version, f"max_total_tokens={tokens}")
    assert p.logged_tokens == tokens
    size = p.allocated_bytes if extra == "allocated" else p.extras[extra]
    assert isinstance(size, int)
    assert f"{size / GiB:.2f}" == kv_size_gb


def test_pr_11309_the_two_runs_differ_as_the_rules_say() -> None:
    # tests/data/logs/field/sglang-deepseek-v3.2-exp-b200-sglang-pr-11309*.log: 975,424 / 1,462,784 = 0.66683; the
    # rules alone (same weights and pre-load in both plans) give (0.751 P − W) / 43,188 over (0.8 P − W) / 35,136
    a = _dsv32("0.5.3", "weights_per_gpu=93GiB", "pre_load_free=177GiB")
    b = _dsv32("0.5.4", "weights_per_gpu=93GiB", "pre_load_free=177GiB")
    # (0.751 × 177 − 93) / 43,188 ÷ ((0.8 × 177 − 93) / 35,136) = 39.927 / 43,188 ÷ (48.6 / 35,136) = 0.6684
    assert abs(b.rows / a.rows - 975_424 / 1_462_784) < 0.005
