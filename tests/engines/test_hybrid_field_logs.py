"""Real start-up logs of hybrid models (issue 13, "Tests that must exist"): each log's memory figures fed to kvplan's
hybrid pool planner, and the pool, blocks, "Maximum concurrency" or refusal it prints checked against kvplan.

The logs (tests/data/logs/field/, provenance and the arithmetic in each header; bodies verbatim):

- ``vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2-gmu095.log``: vLLM 0.19.0, gpt-oss-20b (12 sliding + 12 full
  layers), H100 TP2, gpu_memory_utilization 0.95: the twin of the 0.9 run tests/engines/test_vllm_hybrid.py reads;
- ``vllm-hybrid-deepseek-v4-flash-gh200-tp2-vllm-issue-44376.log``: DeepSeek-V4-Flash on 2 × GH200 96 GB, TP2,
  refused at start-up (max_model_len 30,000); the engine version is not printed.

vLLM rules used (kvplan/engines/vllm_hybrid.py, each cited there): bytes per block = the widest KV cache group's
pages; num_blocks = available // bytes per block; 0.19.0 logs "GPU KV cache size" = num_blocks // groups × block;
"Maximum concurrency" = num_blocks / the blocks of one max-length request (Σ groups); the refusal prints
bytes_per_block × those blocks as "needed" and the largest length whose blocks fit the printed available memory.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB
from tests.runbook.conftest import body, run_doctor

DATA = Path(__file__).resolve().parents[1] / "data"
FIELD = DATA / "logs" / "field"
GPT_OSS_20B = str(DATA / "vllm_hybrid" / "gpt-oss-20b")
V4_FLASH = str(DATA / "hf" / "deepseek-v4-flash")
VLLM = "glm-5.3-8xh200-vllm"
GPT_OSS_LOG = "vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2-gmu095.log"
V4_LOG = "vllm-hybrid-deepseek-v4-flash-gh200-tp2-vllm-issue-44376.log"

GPT_OSS_SETS = ("engine_version=0.19.0", "gpu=h100-sxm", "tp=2", "kv_cache_dtype=auto", "context_length=8192",
                "max_num_batched_tokens=8192", "page_size=16")  # fmt: skip
"""The gpt-oss log's deployment: its non-default args (tp 2, max_model_len 8,192) and vLLM's defaults on an H100
(block 16 for FLASH_ATTN, max_num_batched_tokens 8,192 under `vllm serve`)."""

V4_SETS = ("engine_version=0.33.0", "gpu=gh200-96gb", "tp=2", "kv_cache_dtype=fp8", "page_size=256",
           "context_length=30000", "max_num_batched_tokens=8192", "weights_per_gpu=80GiB")  # fmt: skip
"""The V4 log's deployment under kvplan's only V4 rules (vLLM 0.33.0): block 256, fp8, max_model_len 30,000. The
run used the LLM class, whose default max_num_batched_tokens on a 96 GB GPU is 16,384, all in flight before vLLM
0.25 (window - 1 + max_num_batched_tokens); 0.33.0 keeps 2 × max_num_batched_tokens in flight, so 8,192 here gives
the same 16,384-token windows. weights_per_gpu only keeps the GPU check quiet: the budget is the log's."""


def _log(name: str) -> str:
    return body(FIELD / name)


def _gib(text: str, pattern: str) -> float:
    found = re.search(pattern, text)
    assert found, pattern
    return float(found[1])


def _plan(model: str, sets: tuple[str, ...], *more: str) -> PoolPlan:
    return plan_pool(load_model(model), load_deployment(VLLM, [*sets, *more]))


def _window(printed_gib: float) -> tuple[int, int]:
    """The bytes a GiB figure printed with 2 decimals can stand for: [x - 0.005, x + 0.005) GiB."""
    return math.ceil((printed_gib - 0.005) * GiB), math.ceil((printed_gib + 0.005) * GiB) - 1


# --------------------------------------------------------------------------- gpt-oss-20b, vLLM 0.19.0, H100 TP2


def test_gpt_oss_20b_gmu095_pool_from_the_logged_memory() -> None:
    text = _log(GPT_OSS_LOG)
    avail = _gib(text, r"Available KV cache memory: ([\d.]+) GiB")
    logged = re.search(r"GPU KV cache size: ([\d,]+) tokens", text)
    conc = re.search(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", text)
    assert logged and conc and avail == 63.28
    logged_tokens = int(logged[1].replace(",", ""))
    p = _plan(GPT_OSS_20B, GPT_OSS_SETS, f"kv_cache_memory={avail}GiB")
    # page 16 × 4 kv heads (8 / tp 2) × (64 + 64) × 2 B = 16,384 B; 12 full + 12 sliding layers: 2 groups of 12;
    # bytes per block 12 × 16,384 = 196,608
    assert (p.extras["kv_cache_groups"], p.extras["group_size"], p.extras["bytes_per_block"]) == (2, 12, 196_608)
    # 63.28 GiB = 67,946,382,622 B // 196,608 = 345,593 blocks; 0.19.0 logs 345,593 // 2 × 16 = 2,764,736 tokens
    assert (p.extras["num_blocks"], p.logged_tokens) == (345_593, 2_764_736)
    # the printed 63.28 stands for 67,941,013,914 .. 67,951,751,331 B: 345,565 .. 345,620 blocks; the log's
    # 2,764,768 tokens = 172,798 × 16 is num_blocks 345,596 or 345,597, inside that window
    lo, hi = (b // 196_608 for b in _window(avail))
    assert (lo, hi) == (345_565, 345_620) and lo <= logged_tokens // 16 * 2 <= hi
    # the mid value is 2,764,736 vs 2,764,768: -0.0012 %, inside 0.01 %
    assert abs(p.logged_tokens - logged_tokens) * 10_000 < logged_tokens
    # one 8,192-token request: full 512 + sliding cdiv(min(127 + 8,192, 8,192), 16) + 1 = 513 -> 1,025 blocks;
    # the log's blocks / 1,025 = 345,596 / 1,025 = 337.1668 -> its "337.17x"
    (pool,) = p.pools
    assert pool.need(8_192) == 1_025
    assert conc[1] == "8,192" and f"{logged_tokens // 16 * 2 / pool.need(8_192):.2f}" == conc[2] == "337.17"


def test_gpt_oss_20b_utilisation_step_matches_the_twin_log() -> None:
    # the same non-KV memory in both runs (weights 7.01 + torch peak 2.87 + non-torch 2.07 = 11.95 GiB, printed by
    # both), so 0.95 - 0.9 of the GPU is all the pool gains. The logs: 0.95 -> 345,596 / 345,597 blocks (this
    # log), 0.9 -> 323,972 / 323,973 (vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2.log): 21,623 .. 21,625 blocks
    twin = _log("vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2.log")
    blocks = {}
    for name, text in (("0.95", _log(GPT_OSS_LOG)), ("0.9", twin)):
        found = re.search(r"GPU KV cache size: ([\d,]+) tokens", text)
        assert found
        blocks[name] = int(found[1].replace(",", "")) // 16 * 2
    logged_step = blocks["0.95"] - blocks["0.9"]
    assert logged_step == 21_624
    fixed = ("weights_per_gpu=7.01GiB", "non_kv_other=4.94GiB")  # the logged non-KV, so only the util differs
    step = {u: _plan(GPT_OSS_20B, GPT_OSS_SETS, *fixed, f"gpu_memory_utilization={u}") for u in ("0.95", "0.9")}
    kv_step = step["0.95"].extras["num_blocks"] - step["0.9"].extras["num_blocks"]
    # kvplan: ceil(85,044,756,480 × 0.95) - ceil(85,044,756,480 × 0.9) = 4,252,237,824 B (the catalog's H100 CUDA
    # total, 81,105 MiB) = 21,628.0 blocks of 196,608 B
    assert kv_step in (21_627, 21_628)
    # the GPU of the log reports 79.19 GiB (79.185 .. 79.195) against the catalog's 79.2041: 0.05 × at most
    # 0.0191 GiB = 0.00096 GiB = 5.2 blocks, plus one block for each num_blocks floor and the log's ± 1
    assert abs(kv_step - logged_step) <= 5 + 2 + 1


def test_gpt_oss_20b_torch_peak_is_the_logged_one() -> None:
    # vLLM 0.19.0 logs a torch peak of 2.87 GiB for gpt-oss-20b at TP1 and TP2 (the llm-d-planner logs): the
    # Triton top-k/top-p sampler (1,024 × 201,088 logits × 14 B) + the top-k/top-p buffer + the kept hidden states
    # + the 32 MiB cuBLAS workspace. gpt-oss's 'TRITON' Mxfp4 MoE backend (MoEPrepareAndFinalizeNoDPEPMonolithic,
    # both lines in the log) takes no modular fused-MoE workspace; counting one (8,192 × 4 × (2,880 + 2,880) × 2 B
    # = 0.35 GiB at TP2) gave 3.22 GiB and a config-alone pool 0.53 % short (before ActivationDims.moe_monolithic)
    text = _log(GPT_OSS_LOG)
    logged = _gib(text, r"torch peak memory increase: ([\d.]+)GiB")
    assert logged == 2.87
    p = _plan(GPT_OSS_20B, GPT_OSS_SETS, "weights_per_gpu=7.01GiB", "gpu_memory_utilization=0.95")
    (peak,) = (t.bytes for t in p.chain if t.label.startswith("torch peak"))
    lo, hi = _window(logged)
    assert peak is not None and lo <= peak <= hi


def test_gpt_oss_20b_doctor_with_the_stated_deployment() -> None:
    d = run_doctor(_log(GPT_OSS_LOG), sets=(f"model={GPT_OSS_20B}", "engine=vllm", *GPT_OSS_SETS,
                                            "gpu_memory_utilization=0.95"), model=GPT_OSS_20B)  # fmt: skip
    # the config's memory (kvplan's profile, stated weights) is not the log's: a 'memory' headline, never a cause;
    # the log's budget over its 345,597 blocks fixes a block at 196,590 .. 196,621 B, and kvplan's 196,608 is in it
    assert d.headline.kind == "memory" and d.headline.cause is None
    assert d.byte_fact is not None and d.byte_fact.config == 196_608 and d.byte_fact.agrees


# --------------------------------------------------------------------------- DeepSeek-V4-Flash, 2 × GH200, TP2

NEEDED_GIB, AVAIL_GIB, EST_LEN, MAX_LEN = 6.66, 5.44, 13_528, 30_000


def _v4_logged() -> tuple[float, float, int, int]:
    text = _log(V4_LOG)
    found = re.search(
        r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, .*available KV cache memory \(([\d.]+) GiB\)\."
        r" .*estimated maximum model length is (\d+)\.",
        text,
    )
    assert found
    return float(found[2]), float(found[3]), int(found[4]), int(found[1])


def _block_id_bytes_window(needed: int, at_estimate: int, past_estimate: int) -> tuple[int, int]:
    """The bytes per block id that print the log's three figures with kvplan's block counts.

    'needed' = b × the blocks of one 30,000-token request, printed 6.66: b in [6.655, 6.665) GiB / needed.
    The estimate 13,528 is the largest length whose blocks fit the printed available memory A (5.44: A in
    [5.435, 5.445) GiB): blocks(13,528) × b <= A < blocks(13,529) × b.
    """
    need_lo, need_hi = _window(NEEDED_GIB)
    avail_lo, avail_hi = _window(AVAIL_GIB)
    lo = max(math.ceil(need_lo / needed), avail_lo // past_estimate + 1)
    hi = min(need_hi // needed, avail_hi // at_estimate)
    return lo, hi


def test_v4_flash_block_counts_reproduce_the_logged_refusal() -> None:
    assert _v4_logged() == (NEEDED_GIB, AVAIL_GIB, EST_LEN, MAX_LEN)
    p = _plan(V4_FLASH, V4_SETS, f"kv_cache_memory={AVAIL_GIB}GiB")
    (pool,) = p.pools
    # kvplan's V4 groups with 16,384 tokens in flight (tests/engines/test_vllm_v4.py): at 30,000 tokens SWA 2 × 259
    # = 518, compressed MLA + indexer cdiv(30,000, 256) = 118, C4 states cdiv(16,391, 4) + 1 = 4,099, C128 states
    # cdiv(16,511, 8) + 1 = 2,065: 6,800 block ids
    assert [d.need(MAX_LEN, pool.page_tokens) for d in pool.demands] == [259, 259, 118, 4_099, 2_065]
    # at 13,528 (every window capped by the length): 213 + 213 + 53 + 3,383 + 1,692 = 5,554; at 13,529: 5,556
    needed, at_est, past_est = pool.need(MAX_LEN), pool.need(EST_LEN), pool.need(EST_LEN + 1)
    assert (needed, at_est, past_est) == (6_800, 5_554, 5_556)
    # the three printed figures hold together for one bytes-per-block-id b: needed 6,800 × b in [6.655, 6.665)
    # GiB -> b in 1,050,846 .. 1,052,424; 5,554 × b <= A < 5,556 × b with A in [5.435, 5.445) GiB -> b in
    # 1,050,358 .. 1,052,669: together 1,050,846 .. 1,052,424 B, so the logged counts are kvplan's
    assert _block_id_bytes_window(needed, at_est, past_est) == (1_050_846, 1_052_424)
    # and with its own block id (1,002,240 B) kvplan refuses the deployment too, from the log's memory
    assert p.startup_error is not None and "max seq len (30000)" in p.startup_error


@pytest.mark.xfail(
    strict=True,
    reason="the logging build's DeepSeek-V4 block id costs 1,050,846 .. 1,052,424 B (the test above: its needed"
    " 6.66 GiB, available 5.44 GiB and estimate 13,528 tokens with kvplan's block counts); kvplan's vLLM 0.33.0"
    " packing (kvplan/engines/vllm_hybrid.py pack_v4_groups) gives 21 × 37,440 + 21 × 8,640 + 20 × 1,728 ="
    " 1,002,240 B, 4.9 % less, so it prints 6.35 GiB and 14,192 tokens. The log does not print its version (the"
    " thread is about v0.22); kvplan refuses V4 before 0.33.0, whose V4 specs were not read",
)
def test_v4_flash_block_id_bytes_are_the_logged_ones() -> None:
    p = _plan(V4_FLASH, V4_SETS, f"kv_cache_memory={AVAIL_GIB}GiB")
    (pool,) = p.pools
    lo, hi = _block_id_bytes_window(pool.need(MAX_LEN), pool.need(EST_LEN), pool.need(EST_LEN + 1))
    assert lo <= p.extras["bytes_per_block"] <= hi


def test_v4_flash_doctor_reads_the_refusal() -> None:
    # with the stated deployment (kvplan's 0.33.0 rules): a refusal kvplan also predicts, never a cause
    d = run_doctor(_log(V4_LOG), sets=(f"model={V4_FLASH}", "engine=vllm", *V4_SETS), model=V4_FLASH)
    assert d.headline.kind == "refused" and d.headline.cause is None
