"""SGLang's hybrid pools (issue 13, kvplan/engines/sglang_hybrid.py): goldens per kind derived from the SGLang 0.5.23
release wheel (``sglang/srt/``), one hybrid bound by token pages and one by state slots, SGLang's own error texts.

Formulas (each cited in kvplan/engines/sglang_hybrid.py):
- memory chain as every SGLang plan (tests/engines/test_gqa_goldens.py): on an H200 (gpu_mem 143,771 MiB) at TP8,
  reserved = 512 + 8,192 × 1.5 + 8 / 8 × 1,024 + decode graph 512 × 2 + prefill graph 58 × 8 = 15,312 MiB,
  mfs = round((143,771 − 15,312) / 143,771, 3) = 0.893; at TP4 the tp term is 4 / 8 × 1,024 = 512: reserved
  14,800 MiB, mfs = round(128,971 / 143,771, 3) = 0.897; rest = (PRE − W) / GiB − PRE / GiB × (1 − mfs)
  [GiB floats]; page 1 (fa3 on SM90);
- SWA (``HybridSWAPoolConfigurator``): cell = full_per_token × full_layers + 0.8 × swa_per_token × swa_layers;
  full_tokens = int(available // cell) // page × page; swa_tokens = int(full_tokens × 0.8) // page × page;
- Mamba (``_handle_max_mamba_cache``): K = int((rest × 0.9 / 1.9 × 2^30 − per_req) // per_req);
  rest −= (K + 1) × per_req / 2^30; the token pool over the full-attention layers only;
  max_running_requests = min(..., K // 5) (``resolve_max_num_reqs``, ``_calculate_mamba_ratio`` 3 + 2).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.sglang_hybrid import (
    PREFIX_REUSE,
    HybridSizer,
    mamba_cache_size,
    mamba_slots_per_request,
    prefix_reuse_rules,
    swa_pool_error,
    swa_pool_tokens,
)
from kvplan.errors import PlanError
from kvplan.models.cache import LinearState
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB, MiB

PRE = 143_771 * MiB
W = 20 * GiB
MFS = {8: 0.893, 4: 0.897, "mla4": 0.89}
"""mem_fraction_static by tp; "mla4": an MLA backend at TP4 reserves the 1,536 MiB MLA prefill graph instead of
58 × 8 = 464: 512 + 12,288 + 512 + 1,024 + 1,536 = 15,872 MiB, round(127,899 / 143,771, 3) = 0.890."""


def _plan(model: str, **sets: object) -> PoolPlan:
    base = {"context_length": 32768, "weights_per_gpu": "20GiB", "pre_load_free": "143771MiB", **sets}
    dep = load_deployment("glm-5.3-8xh200-sglang", [f"{k}={v}" for k, v in base.items()])
    # the preset pins GLM-5.3's fp8 cache and 64-token pages: give these models SGLang's defaults
    dep = replace(dep, model=model, kv_cache_dtype="auto", page_size=sets.get("page_size"))  # type: ignore[arg-type]
    return plan_pool(load_model(model), dep)


def _rest_gib(tp: int | str = 8) -> float:
    return (PRE - W) / GiB - PRE / GiB * (1 - MFS[tp])


def _qwen3_next(tmp_path: Path) -> str:
    """A Qwen3NextForCausalLM config.json written by this test (NOT the real one: no verbatim copy was found, see
    tests/data/hf/README.md): the field names SGLang's Qwen3NextConfig reads, the released 80B-A3B dims
    (48 layers, every 4th full: 12 full + 36 Gated DeltaNet)."""
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 48, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048, "max_position_embeddings": 262144,
           "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
           "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def _kimi_linear(tmp_path: Path) -> str:
    """A KimiLinearForCausalLM config.json written by this test (no verbatim copy was found): 8 layers, KDA on the
    1-based layers 1-3 and 5-7, MLA (512 + 64 rope) on 4 and 8; KDA 32 heads × 128, kernel 4."""
    cfg = {"architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 8, "num_attention_heads": 32,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "hidden_size": 2304, "max_position_embeddings": 1048576,
           "linear_attn_config": {"kda_layers": [1, 2, 3, 5, 6, 7], "full_attn_layers": [4, 8], "num_heads": 32,
                                  "head_dim": 128, "short_conv_kernel_size": 4}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


# --------------------------------------------------------------------------- pure arithmetic


def test_swa_pool_tokens_golden() -> None:
    # cell = 4,608 + 0.8 × 4,608 = 8,294.4 B; int(10^9 // 8,294.4) = 120,563; swa = int(120,563 × 0.8) = 96,450
    assert swa_pool_tokens(10**9, full_cell=4_608, swa_cell=4_608, ratio=0.8, page=1) == (120_563, 96_450)
    # page 64: 120,563 // 64 × 64 = 120,512; int(120,512 × 0.8) = 96,409 (float 96,409.6) // 64 × 64 = 96,384
    assert swa_pool_tokens(10**9, full_cell=4_608, swa_cell=4_608, ratio=0.8, page=64) == (120_512, 96_384)


def test_mamba_slots_and_cache_size() -> None:
    # _calculate_mamba_ratio: 3 + get_mamba_tracking_slots (2 overlap / 1 without); 1 with the radix cache off
    assert mamba_slots_per_request() == 5
    assert mamba_slots_per_request(overlap=False) == 4
    assert mamba_slots_per_request(radix_cache=False) == 1
    # rest 1.9 GiB: budget 1.9 × 0.9 / 1.9 = 0.9 GiB = 966,367,641.6 B; (966,367,641.6 − 2^20) // 2^20 = 920
    assert mamba_cache_size(1.9, 1 << 20) == 920


def test_sglang_errors_in_its_own_words() -> None:
    # validate_swa_pool_size: window 128 + page 1 >= 129 swa tokens
    assert swa_pool_error(129, 128, 1) == (
        "SWA pool (129 tokens) cannot hold even one request: the prefill admission floor is sliding_window_size (128)"
        " + page_size (1). Increase --swa-full-tokens-ratio or the total KV budget."
    )
    assert swa_pool_error(130, 128, 1) is None
    # _handle_max_mamba_cache: K = int((0.01 × 0.9 / 1.9 × 2^30 − per) // per) with per = 19,316,736 B (below):
    # 5,086,165 − 19,316,736 < 0 -> K = -1
    state = LinearState("gated_deltanet", 32, 16, 128, 128, 4)
    s = HybridSizer(full_layers=12, state=state, state_layers=36, slots_per_request=5)
    rest, k, err = s.take_state(0.01, 4)
    assert (rest, k) == (0.01, 0)
    assert err == (
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=-1"
        " (total_rest_memory=0.01 GB, mamba_cache_per_req=18.42 MB)"
    )


# --------------------------------------------------------------------------- SWA: gpt-oss-120b (token-page bound)


def test_gpt_oss_swa_golden_tp8() -> None:
    p = _plan("gpt-oss-120b")
    assert p.knob("mem_fraction_static").value == MFS[8] and p.page_tokens == 1
    available = int(_rest_gib() * GiB)
    # 8 kv heads // tp 8 = 1 per rank × (64 + 64) × 2 B = 256 B per layer; 18 full + 18 sliding layers
    full_cell = swa_cell = 256 * 18  # 4,608
    full = int(available // (full_cell + 0.8 * swa_cell))
    assert (p.rows, p.logged_tokens, p.extras["swa_tokens"]) == (full, full, int(full * 0.8))
    assert (p.rows, p.extras["swa_tokens"]) == (13_641_639, 10_913_311)
    full_pool, swa_pool = p.pools
    assert (full_pool.capacity, full_pool.unit_bytes) == (full, 4_608)
    assert (swa_pool.capacity, swa_pool.unit_bytes) == (int(full * 0.8), 4_608)
    # SWAKVPool allocates swa_tokens + page rows over the 18 SWA layers
    assert p.extras["swa_alloc_bytes"] == (int(full * 0.8) + 1) * 4_608
    assert p.cell.total_bytes == full_cell and p.main_layers == 18


def test_gpt_oss_at_128k_is_bound_by_token_pages() -> None:
    p = _plan("gpt-oss-120b", context_length=131072)
    full_pool, swa_pool = p.pools
    # full: 131,072 pages a request -> 13,641,639 // 131,072 = 104 requests
    assert full_pool.need(131_072) == 131_072 and full_pool.fits(131_072) == 104
    # SWA: min(131,072, 128 + 128 eviction interval) + 2 pages = 258 -> 10,913,311 // 258 = 42,299 requests
    assert swa_pool.need(131_072) == 258 and swa_pool.fits(131_072) == 42_299
    assert min(pool.fits(131_072) for pool in p.pools) == full_pool.fits(131_072)


def test_gpt_oss_swa_follows_a_token_cap_and_fails_as_sglang_does() -> None:
    # calculate_pool_sizes_from_max_tokens: full 150, swa int(150 × 0.8) = 120 <= 128 + 1 -> SGLang's ValueError
    p = _plan("gpt-oss-120b", max_total_tokens=150)
    assert (p.rows, p.extras["swa_tokens"]) == (150, 120)
    assert p.startup_error is not None and p.startup_error.startswith("SWA pool (120 tokens) cannot hold even one")


# --------------------------------------------------------------------------- Mamba state: Qwen3-Next, Kimi-Linear


def test_qwen3_next_golden_tp4(tmp_path: Path) -> None:
    p = _plan(_qwen3_next(tmp_path), tp=4)
    assert p.knob("mem_fraction_static").value == MFS[4]
    # GDN state per layer at tp 4: conv 3 × (2 × 16 × 128 + 32 × 128) / 4 = 6,144 bf16 = 12,288 B;
    # recurrent 32 / 4 × 128 × 128 = 131,072 fp32 = 524,288 B; 536,576 × 36 layers = 19,316,736 B per request
    per = 19_316_736
    k = int((_rest_gib(4) * 0.9 / 1.9 * (1 << 30) - per) // per)
    assert p.extras["max_mamba_cache_size"] == k == 2_788
    rest = _rest_gib(4) - (k + 1) * per / (1 << 30)
    # full attention: 2 kv heads // 4 -> 1 per rank × (256 + 256) × 2 B × 12 layers = 12,288 B per token
    rows = int(rest * GiB) // 12_288
    assert p.rows == p.logged_tokens == rows
    assert p.extras["mamba_alloc_bytes"] == (k + 1) * per
    # max_running_requests: min(clamp(int(rows / 32,768 × 512), 2048, 4096) = 4,096, rows // 2, K // 5 = 557)
    assert p.max_running_requests == k // 5 == 557
    assert any("capped to 557 by the mamba state cache (max_mamba_cache_size=2788, 5 state" in n for n in p.notes)
    _, state_pool = p.pools
    assert (state_pool.unit, state_pool.capacity, state_pool.unit_bytes) == ("slot", k, per)


def test_qwen3_next_short_requests_are_bound_by_state_slots(tmp_path: Path) -> None:
    p = _plan(_qwen3_next(tmp_path), tp=4)
    full_pool, state_pool = p.pools
    # 4,096-token requests: the token pool holds rows // 4,096 of them, the state pool 2,788 // 5 = 557
    assert state_pool.need(4_096) == 5 and state_pool.fits(4_096) == 557
    assert full_pool.fits(4_096) == p.rows // 4_096 > 557
    # at 128K the token pool binds instead: rows // 131,072 < 557
    assert full_pool.fits(131_072) == p.rows // 131_072 < state_pool.fits(131_072) == 557


def test_kimi_linear_kda_with_mla_golden(tmp_path: Path) -> None:
    p = _plan(_kimi_linear(tmp_path), tp=4)
    assert p.knob("mem_fraction_static").value == MFS["mla4"]
    # KDA per layer at tp 4: conv 3 × (32 × 128 × 3) / 4 = 9,216 bf16 = 18,432 B; recurrent 8 × 128 × 128 fp32
    # = 524,288 B; 542,720 × 6 layers = 3,256,320 B per request
    per = 3_256_320
    k = int((_rest_gib("mla4") * 0.9 / 1.9 * (1 << 30) - per) // per)
    assert p.extras["max_mamba_cache_size"] == k
    # MLA bf16 (512 + 64) × 2 = 1,152 B × 2 full layers = 2,304 B per token, replicated on every rank
    assert p.cell.total_bytes == 2_304 and p.mla_layout is not None
    assert p.rows == int((_rest_gib("mla4") - (k + 1) * per / (1 << 30)) * GiB) // 2_304
    assert p.max_running_requests == k // 5


# --------------------------------------------------------------------------- refusals (one line, exit 2)


def test_deepseek_v4_is_planned_on_sglang() -> None:
    """Was refused until DSV4PoolConfigurator's pools landed (goldens: tests/engines/test_sglang_v4.py)."""
    assert len(_plan("deepseek-v4-flash").pools) == 3


@pytest.mark.parametrize(
    ("sets", "what"),
    [
        ({"engine_version": "0.5.9"}, r"hybrid pools \(read from SGLang 0.5.23 only"),
        ({"speculative_num_draft_tokens": 4}, "speculative decoding with a hybrid model"),
    ],
)
def test_what_is_not_planned_is_refused(sets: dict[str, object], what: str) -> None:
    with pytest.raises(PlanError, match=rf"kvplan does not yet plan {what}"):
        _plan("gpt-oss-120b", **sets)


# --------------------------------------------------------------------------- the knobs


def test_swa_full_tokens_ratio_knob() -> None:
    p = _plan("gpt-oss-120b", swa_full_tokens_ratio=0.5)
    available = int(_rest_gib() * GiB)
    # cell = 4,608 + 0.5 × 4,608 = 6,912 B; full = int(available // 6,912); swa = int(full × 0.5)
    full = int(available // 6_912.0)
    assert (p.rows, p.extras["swa_tokens"]) == (full, int(full * 0.5))
    assert p.knob("swa_full_tokens_ratio").origin == "set"


def test_max_mamba_cache_size_knob(tmp_path: Path) -> None:
    p = _plan(_qwen3_next(tmp_path), tp=4, max_mamba_cache_size=100)
    # the explicit size is used as is: rest −= (100 + 1) × 19,316,736 B; the token pool gets the rest
    per = 19_316_736
    assert p.extras["max_mamba_cache_size"] == 100
    assert p.rows == int((_rest_gib(4) - 101 * per / (1 << 30)) * GiB) // 12_288
    # running requests: 100 // 5 = 20
    assert p.max_running_requests == 20
    assert p.knob("max_mamba_cache_size").origin == "set"


def test_prefix_reuse_rules_follow_the_kinds(tmp_path: Path) -> None:
    assert prefix_reuse_rules(_plan("gpt-oss-120b")) == (PREFIX_REUSE["sliding-window"],)
    assert prefix_reuse_rules(_plan(_qwen3_next(tmp_path), tp=4)) == (PREFIX_REUSE["linear-attention state"],)
    assert prefix_reuse_rules(_plan("llama-3.1-8b")) == ()
