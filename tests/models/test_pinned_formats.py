"""Cache formats (kvplan/models/formats.py) pinned where the mutation check moves the scale tile: one fp32 scale
per 128 values, in FlashMLA's fp8_ds_mla NoPE part and in DeepSeek's indexer fp8 K cache (DeepSeek-V3.2
``inference/kernel.py`` ``act_quant`` block_size 128; vLLM ``v1/attention/backends/mla/flashmla_sparse.py``
656-byte rows = 512 + 512 / 128 × 4 + 64 × 2)."""

from __future__ import annotations

from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer


def test_one_fp32_scale_per_128_values_at_a_wide_latent() -> None:
    # 16,384 values carry 16,384 / 128 = 128 scales × 4 B = 512 B (a tile of 127 would give 129 scales, 516 B;
    # at the real 512 both tiles give 4 scales)
    assert MlaLayout.FP8_DS_MLA.bytes_per_token_layer(16_384, 64) == 16_384 + 512 + 64 * 2 == 17_024
    assert indexer_bytes_per_token_layer(16_384) == 16_384 + 512 == 16_896
    # one token a row unless kpool shares it: ceil(132 / 1) = 132
    assert indexer_bytes_per_token_layer(128, 1) == indexer_bytes_per_token_layer(128) == 132
