"""Speculative decoding (MTP) on DeepSeek-V4 with vLLM 0.33.0 (issue 13), on tests/engines/test_vllm_v4.py's specs and
its fixed 40 GiB budget (--kv-cache-memory-bytes, so the goldens test the pool arithmetic alone).

The MTP layer (``models/deepseek_v4/nvidia/mtp.py``: a DeepseekV4DecoderLayer at layer_id num_hidden_layers) has
compress_ratio 1 (``attention.py``: "we do this for because MTP layer is not included in the compress ratio list"),
so it owns a ``DeepseekV4SWACache`` only: one more window-128 spec (block 64, page 37,440 B). Nothing else in the V4
specs reads num_speculative_tokens for classic MTP (the DSpark SWA index width is DSpark's only), and one MTP module
retains no extra window tokens (``VllmConfig.num_prefill_lookahead_tokens`` 1 -> extra_retained_tokens 0).
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm_hybrid import approximate_gcd, pack_v4_groups, v4_specs
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model


def plan(model: str, **sets: object) -> PoolPlan:
    base: dict[str, object] = {"kv_cache_dtype": "auto", "max_num_batched_tokens": 8192, "kv_cache_memory": "40GiB"}
    dep = load_deployment("glm-5.3-8xh200-vllm", [f"{k}={v}" for k, v in {**base, **sets}.items()])
    return plan_pool(load_model(model), dep)


def test_v4_flash_mtp_groups() -> None:
    flash = load_model("deepseek-v4-flash")
    specs = v4_specs(flash, flash.num_mtp_layers)
    assert len(specs) == 167 + 1 and specs[-1].layer == "43.swa" and specs[-1].page == 37_440
    # SWA bucket 44: repeats = approximate_gcd([44, 21, 20], 21) = 22 (padding 0 + 1 + 2) -> 2 SWA groups of 22:
    # the MTP window fills the second group's padding slot, so the widest group (the block-256 one) is unchanged
    assert approximate_gcd([44, 21, 20], 21) == 22
    groups = pack_v4_groups(specs)
    assert [len(g) for g in groups] == [22, 22, 62, 42, 20]
    assert max(sum(s.page for s in g) for g in groups) == 1_002_240


def test_v4_flash_mtp_pool_as_without() -> None:
    p = plan("deepseek-v4-flash", context_length=131_072, speculative_num_draft_tokens=1)
    # 40 GiB // 1,002,240 = 42,853 blocks, 7,194 a 128K request (test_vllm_v4.py): the same as without MTP
    assert (p.extras["bytes_per_block"], p.extras["num_blocks"], p.extras["blocks_per_request"]) == (
        1_002_240, 42_853, 7_194
    )  # fmt: skip
    assert any("1 MTP layer's window" in n for n in p.notes)


def test_v4_pro_mtp_groups() -> None:
    pro = load_model("deepseek-v4-pro")
    groups = pack_v4_groups(v4_specs(pro, pro.num_mtp_layers))
    # 61 + 1 = 62 windows: repeats approximate_gcd([62, 30, 31], 31) = 31 -> 2 SWA groups of 31 (61 alone: 31 + 30)
    assert approximate_gcd([62, 30, 31], 31) == 31
    assert [len(g) for g in groups][:2] == [31, 31]
    assert (
        plan("deepseek-v4-pro", context_length=131_072, speculative_num_draft_tokens=1).extras["bytes_per_block"]
        == 1_435_968
    )


def test_dcp_stays_refused_with_mtp() -> None:
    with pytest.raises(InputError, match="decode context parallel"):
        plan("deepseek-v4-flash", dcp=2, speculative_num_draft_tokens=1)


# --------------------------------------------------------------------------- SGLang 0.5.23 (DSV4PoolConfigurator)
#
# On tests/engines/test_sglang_v4.py's chain (H200 TP8, pre-load free 143,771 MiB, weights 20 GiB: available
# 113,149,217,865 B) with --speculative-num-draft-tokens 4:
# - ``get_compress_state_ring_size`` with speculative decoding: C4 16 rows, C128 256 rows; each serves
#   ring − window + 2 draft tokens (``get_compress_state_write_pad``): C4 16 − 8 + 2 = 10, C128 256 − 128 + 2 = 130;
# - SWA page: 149,760 × 43 + 16 × 10,240 × 21 = 6,439,680 + 3,440,640 = 9,880,320 B (38,595 B a token);
# - bytes_per_full_token = (0.1 × 38,595 + 3,899.25) × (43 + 1) / 43 ("Reserve the draft worker by inflating
#   per-token bytes by (target+draft)/target");
# - C128 state (fixed, max_running_requests 256: apply_deepseek_v4_defaults runs before the speculative hook's 48):
#   ceil(257 × 256 + 257, 128) × 128 = 66,176 rows × 2 × 512 × 4 B × 20 layers = 5,421,137,920 B.

AVAILABLE = 113_149_217_865


def _sglang(model: str, **sets: object) -> PoolPlan:
    from dataclasses import replace

    base = {"weights_per_gpu": "20GiB", "pre_load_free": "143771MiB", **sets}
    dep = load_deployment("glm-5.3-8xh200-sglang", [f"{k}={v}" for k, v in base.items()])
    return plan_pool(load_model(model), replace(dep, model=model))


def test_sglang_v4_flash_mtp_golden() -> None:
    p = _sglang("deepseek-v4-flash", speculative_num_draft_tokens=4)
    assert p.available_bytes == AVAILABLE
    fixed = -(-(257 * 256 + 257) // 128) * 128 * 2 * 512 * 4 * 20
    assert fixed == 5_421_137_920 == next(t.bytes for t in p.chain if t.label == "C128 compress-state pool")
    per_token = (0.1 * (9_880_320 / 256) + 998_208 / 256) * (44 / 43)
    full = int((AVAILABLE - fixed) / per_token) // 256 * 256
    swa = int(full * 0.1) // 256 * 256
    assert (p.rows, p.extras["swa_tokens"]) == (full, swa) == (13_569_024, 1_356_800)
    assert p.extras["c4_state_rows"] == swa // 256 * 16
    assert p.extras["c128_state_rows"] == 257 * 256
    assert p.knob("max_running_requests").as_int() == 256
    # the draft worker's reservation: the inflation's share of the full tokens' bytes
    assert p.extras["draft_alloc_bytes"] == int(full * per_token) - int(full * per_token / (44 / 43))
    # 128K: 512 compressed-KV pages of 53,004 -> 103 at once (the SWA pool holds 5,300 // 3 = 1,766; C128 rings 256)
    assert p.pools[0].capacity == full // 256 == 53_004
    assert p.pools[0].fits(131_072) == 103


def test_sglang_v4_draft_tokens_past_the_c4_ring_in_sglangs_words() -> None:
    from kvplan.errors import PlanError

    with pytest.raises(PlanError, match=r"speculative_num_draft_tokens=11 exceeds what the c4 compress state ring"):
        _sglang("deepseek-v4-flash", speculative_num_draft_tokens=11)
    assert _sglang("deepseek-v4-flash", speculative_num_draft_tokens=10).rows > 0
