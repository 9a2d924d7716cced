"""Speculative decoding (MTP) on DeepSeek-V4 with vLLM 0.33.0 (issue 13), on tests/unit/test_vllm_v4.py's specs and
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
from kvplan.models.load import load_deployment, load_model


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
