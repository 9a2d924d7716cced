"""DeepSeek-V4 on SGLang 0.5.23 (kvplan.engines.sglang_dsv4) at the boundaries its mutants moved (issue 26).

Deployment as tests/unit/test_sglang_v4.py: H200 TP8, pre-load free 143,771 MiB, 20 GiB of weights; DeepSeek-V4-Flash
(43 layers: 21 C4, 20 C128), page 256 (``model_overrides/deepseek_v4.py``), max_running_requests 256
(``deepseek_v4_hook.apply_deepseek_v4_defaults``), context 1,048,576.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model


def _plan(model: str, **sets: object) -> PoolPlan:
    base = {"weights_per_gpu": "20GiB", "pre_load_free": "143771MiB", **sets}
    dep = load_deployment("glm-5.3-8xh200-sglang", [f"{k}={v}" for k, v in base.items()])
    return plan_pool(load_model(model), replace(dep, model=model))


def test_req_to_token_with_and_without_mtp() -> None:
    # ReqToTokenPool (memory_pool.py): (256 + 1) × (1,048,576 + extra) int32; allocation_sizing.py
    # get_req_to_token_extra_context_len: 4 without speculative decoding -> 257 × 1,048,580 × 4 = 1,077,940,240 B;
    # 3 draft tokens at page 256: max(4 + 3, 2 × max(2, 3) + 256 − 1) = 261 -> 257 × 1,048,837 × 4 = 1,078,204,436 B
    # (before: + 4 whatever the draft, 1,077,940,240 B)
    assert _plan("deepseek-v4-flash").extras["req_to_token_bytes"] == 1_077_940_240
    mtp = _plan("deepseek-v4-flash", speculative_num_draft_tokens=3)
    assert mtp.extras["req_to_token_bytes"] == 1_078_204_436
