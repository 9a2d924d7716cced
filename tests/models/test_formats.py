from __future__ import annotations

import pytest

from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer

# GLM-5.x / DeepSeek-V3.2 MLA: kv_lora_rank 512, qk_rope_head_dim 64.


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (MlaLayout.BF16, 1152),  # (512 + 64) × 2 B
        (MlaLayout.FP8_DS_MLA, 656),  # 512 fp8 + 512/128 × 4 B scales + 64 × 2 B bf16 rope = 512 + 16 + 128
        (MlaLayout.FP8_RAW, 576),  # 512 + 64, one byte each
    ],
)
def test_mla_row_bytes(layout: MlaLayout, expected: int) -> None:
    assert layout.bytes_per_token_layer(512, 64) == expected


def test_indexer_row_bytes() -> None:
    assert indexer_bytes_per_token_layer(128) == 132  # 128 fp8 + one fp32 scale per 128
    assert indexer_bytes_per_token_layer(128, 4) == 33  # ceil(132 / 4): kpool shares a row over 4 tokens
    assert indexer_bytes_per_token_layer(256) == 264  # 256 + 2 scales × 4 B
