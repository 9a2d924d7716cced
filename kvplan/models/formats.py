"""Cache formats: bytes per token per layer (DESIGN §2.2).

| format        | formula                                              | GLM-5.x |
|---------------|------------------------------------------------------|---------|
| bf16          | (kv_lora_rank + rope) × 2                            | 1152    |
| fp8_ds_mla    | kv_lora_rank + kv_lora_rank/128 × 4 + rope × 2       | 656     |
| fp8 (raw)     | kv_lora_rank + rope                                  | 576     |
| indexer K     | ceil((index_head_dim + index_head_dim/128 × 4) / kpool) | 132  |

fp8_ds_mla = 512 fp8 NoPE values + 4 fp32 scales (one per 128 values) + 64 bf16 RoPE values = 512 + 16 + 128.
"""

from __future__ import annotations

from enum import Enum

from kvplan.units import cdiv

QUANT_BLOCK = 128
"""Elements per fp32 scale in both the fp8_ds_mla NoPE part and the indexer K cache."""
FP32_BYTES = 4
BF16_BYTES = 2


class MlaLayout(str, Enum):
    """How one token of one MLA layer is stored."""

    BF16 = "bf16"
    FP8_DS_MLA = "fp8_ds_mla"
    FP8_RAW = "fp8"

    def bytes_per_token_layer(self, kv_lora_rank: int, qk_rope_head_dim: int) -> int:
        if self is MlaLayout.BF16:
            return (kv_lora_rank + qk_rope_head_dim) * BF16_BYTES
        if self is MlaLayout.FP8_DS_MLA:
            return kv_lora_rank + kv_lora_rank // QUANT_BLOCK * FP32_BYTES + qk_rope_head_dim * BF16_BYTES
        return kv_lora_rank + qk_rope_head_dim

    @property
    def description(self) -> str:
        return {
            MlaLayout.BF16: "bf16 latent + rope",
            MlaLayout.FP8_DS_MLA: "FlashMLA fp8_ds_mla: fp8 NoPE + fp32 scale per 128 + bf16 RoPE",
            MlaLayout.FP8_RAW: "raw fp8 latent + rope (trtllm / FlashInfer)",
        }[self]


def indexer_bytes_per_token_layer(index_head_dim: int, index_kpool: int = 1) -> int:
    """fp8 K plus one fp32 scale per 128 elements, shared by ``index_kpool`` tokens.

    >>> indexer_bytes_per_token_layer(128)
    132
    """
    return cdiv(index_head_dim + index_head_dim // QUANT_BLOCK * FP32_BYTES, index_kpool)
