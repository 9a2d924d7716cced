"""MXFP4 experts as the triton_kernels backend holds them (kvplan/models/mxfp4_moe.py), pinned where gpt-oss's
shapes (hidden 2,880: 90 scale blocks, a multiple of 2 and of 3) hide a rule the mutation check moved.

triton_kernels ``HopperMXScaleLayout.swizzle_data`` (the swizzled scale copy vLLM / SGLang ``Mxfp4MoEMethod``
build for ``PrecisionConfig`` beside the registered scales) pads the output dimension to ``2 × num_warps × 2 × 8``
= 256 (num_warps 8) and the scale count to a multiple of 2.
"""

from __future__ import annotations

from kvplan.models.mxfp4_moe import LAYOUTS, layer_bytes


def test_an_odd_scale_count_pads_to_two_in_the_swizzled_copy() -> None:
    # one expert, hidden 1,056 (33 blocks of 32: odd), 512 columns of I a rank (a multiple of 64: no padding):
    #   values: w13 2 × 512 × 1,056 / 2 = 540,672, w2 1,056 × 512 / 2 = 270,336 -> 811,008 B
    #   e8m0 scales kept: w13 1,024 × 33 = 33,792, w2 1,056 × 16 = 16,896 -> 50,688 B
    #   swizzled copy: w13 1,024 rows (a multiple of 256) × 33 -> 34 = 34,816; w2 1,056 -> 1,280 rows × 16 = 20,480
    #     -> 55,296 B
    #   fp32 biases (1,024 + 1,056) × 4 = 8,320 B
    layer = layer_bytes(experts=1, hidden=1_056, intermediate=512, layout=LAYOUTS["triton"])
    assert layer == 811_008 + 50_688 + 55_296 + 8_320 == 925_312
