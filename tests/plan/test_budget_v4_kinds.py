"""budget's kind table for DeepSeek-V4 (kvplan.plan.budget.kind_costs): every compressed-attention layer keeps a
128-token window of 584-B entries, and a C4 / C128 layer also one entry per 4 / 128 tokens of context.

deepseek-v4-flash (tests/data/hf/deepseek-v4-flash/config.json, compress_ratios of the 43 decoder layers): 2 window-only
layers, 21 C4 and 20 C128. Entry = 448 fp8 + 64 rope × 2 + 448 / 64 scales + 1 = 584 B (cache.CompressedAttention).
"""

from __future__ import annotations

from kvplan.plan.budget import kind_costs
from tests.conftest import make_plan


def test_deepseek_v4_flash_kinds() -> None:
    p = make_plan(model="deepseek-v4-flash", weights_per_gpu="20GiB")
    kinds = {k.kind: k for k in kind_costs(p)}
    # window-only: 2 layers × 584 B = 1,168 B a token, at most 128 tokens: 149,504 B a request
    w0 = kinds["window 128 (window-only layers)"]
    assert (w0.layers, w0.bytes_per_token, w0.request_max_bytes) == (2, 1_168, 149_504)
    # C4: 21 layers × 584 / 4 = 3,066 B per token of context; C128: 20 × 584 / 128 = 91.25 -> 91 B (floored)
    assert kinds["compressed attention C4 + window 128"].bytes_per_token == 21 * 584 // 4 == 3_066
    assert kinds["compressed attention C128 + window 128"].bytes_per_token == 20 * 584 // 128 == 91
    # their windows: 128 × 21 × 584 = 1,569,792 B and 128 × 20 × 584 = 1,495,040 B a request at most
    assert kinds["window 128 (C4 layers)"].request_max_bytes == 128 * 21 * 584 == 1_569_792
    assert kinds["window 128 (C128 layers)"].request_max_bytes == 128 * 20 * 584 == 1_495_040
