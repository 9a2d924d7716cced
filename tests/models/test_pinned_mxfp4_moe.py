"""MXFP4 experts as the triton_kernels backend holds them (kvplan/models/mxfp4_moe.py), pinned where gpt-oss's
shapes (hidden 2,880: 90 scale blocks, a multiple of 2 and of 3) hide a rule the mutation check moved.

triton_kernels ``HopperMXScaleLayout.swizzle_data`` (the swizzled scale copy vLLM / SGLang ``Mxfp4MoEMethod``
build for ``PrecisionConfig`` beside the registered scales) pads the output dimension to ``2 × num_warps × 2 × 8``
= 256 (num_warps 8) and the scale count to a multiple of 2.
"""

from __future__ import annotations

import pytest

from kvplan.models.arch import ParamGroup, Split
from kvplan.models.gpus import find_gpu
from kvplan.models.mxfp4_moe import (
    CHECKPOINT,
    LAYOUTS,
    Mxfp4Experts,
    backend_for,
    layer_bytes,
    layout_note,
    rank_intermediate,
)


def test_an_odd_scale_count_pads_to_two_in_the_swizzled_copy() -> None:
    # one expert, hidden 1,056 (33 blocks of 32: odd), 512 columns of I a rank (a multiple of 64: no padding):
    #   values: w13 2 × 512 × 1,056 / 2 = 540,672, w2 1,056 × 512 / 2 = 270,336 -> 811,008 B
    #   e8m0 scales kept: w13 1,024 × 33 = 33,792, w2 1,056 × 16 = 16,896 -> 50,688 B
    #   swizzled copy: w13 1,024 rows (a multiple of 256) × 33 -> 34 = 34,816; w2 1,056 -> 1,280 rows × 16 = 20,480
    #     -> 55,296 B
    #   fp32 biases (1,024 + 1,056) × 4 = 8,320 B
    layer = layer_bytes(experts=1, hidden=1_056, intermediate=512, layout=LAYOUTS["triton"])
    assert layer == 811_008 + 50_688 + 55_296 + 8_320 == 925_312


# --------------------------------------------------------------------------- fresh seed: each backend's boundary


@pytest.mark.parametrize(
    ("engine", "gpu", "backend"),
    [
        # vLLM get_mxfp4_backend: the SM100 family (current_platform.is_device_capability_family(100): 10.0 and
        # 10.3) with FlashInfer -> SM100_FI_MXFP4_BF16; B300 / GB300 are SM 10.3
        ("vllm", "b300", "flashinfer_trtllm"),
        ("sglang", "gb300", "flashinfer_trtllm"),
        # SM 12.0 (RTX 5090) is outside triton_kernels' 9.0-11.0: vLLM falls to Marlin, SGLang has no Marlin path
        ("vllm", "rtx-5090", "marlin"),
        ("sglang", "rtx-5090", "triton"),
        # SM 8.9 and the other SM90 part: Marlin below 9.0, triton_kernels on 9.0
        ("vllm", "l40s", "marlin"),
        ("vllm", "h20", "triton"),
        # ROCm: triton_kernels on both engines (vLLM mxfp4.py: current_platform.is_rocm() -> TRITON)
        ("vllm", "mi300x", "triton"),
        ("sglang", "mi300x", "triton"),
        ("unknown", "h100", None),
    ],
)
def test_backend_at_each_boundary(engine: str, gpu: str, backend: str | None) -> None:
    assert backend_for(engine, find_gpu(gpu)) == backend


def test_fp32_vectors_and_bias_bytes_of_each_layout() -> None:
    # one expert, I 256 and h 256 (every alignment met, no padding), so the layouts differ only in what they add:
    #   values 2 × 256 × 256 / 2 + 256 × 256 / 2 = 98,304; scales 512 × 8 + 256 × 8 = 6,144
    #   checkpoint and marlin: bf16 biases (512 + 256) × 2 = 1,536 -> 105,984
    #   flashinfer_trtllm: fp32 biases 3,072 + alpha, beta, clamp 3 × 4 = 12 -> 107,532
    #   triton: fp32 biases 3,072 + the swizzled scales (512 rows × 8 + 256 rows × 8 = 6,144) -> 113,664
    base = 98_304 + 6_144
    got = {name: layer_bytes(experts=1, hidden=256, intermediate=256, layout=lay) for name, lay in LAYOUTS.items()}
    assert got == {"marlin": base + 1_536, "flashinfer_trtllm": base + 3_072 + 12, "triton": base + 3_072 + 6_144}
    assert layer_bytes(experts=1, hidden=256, intermediate=256, layout=CHECKPOINT) == base + 1_536


def test_marlin_pads_i_to_128_and_h_to_256() -> None:
    # I 32 -> 128, h 2,880 -> 3,072 (Mxfp4MoEMethod.create_weights, MARLIN: "n % 256 == 0 and k % 128 == 0"):
    #   values 2 × 128 × 3,072 / 2 + 3,072 × 128 / 2 = 393,216 + 196,608 = 589,824
    #   scales 256 × 96 + 3,072 × 4 = 24,576 + 12,288 = 36,864; bf16 biases (256 + 3,072) × 2 = 6,656 -> 633,344
    assert layer_bytes(experts=1, hidden=2_880, intermediate=32, layout=LAYOUTS["marlin"]) == 633_344


def test_flashinfer_pads_i_and_h_to_256() -> None:
    # I 32 -> 256, h 2,880 -> 3,072: values 2 × 256 × 3,072 / 2 + 3,072 × 256 / 2 = 1,179,648; scales 512 × 96 +
    # 3,072 × 8 = 73,728; fp32 biases (512 + 3,072) × 4 = 14,336; 3 fp32 vectors 12 -> 1,267,724
    assert layer_bytes(experts=1, hidden=2_880, intermediate=32, layout=LAYOUTS["flashinfer_trtllm"]) == 1_267_724


def test_rank_intermediate_rounds_whole_blocks_up() -> None:
    # vLLM GptOssModel.load_weights: cdiv(I / 32, tp) × 32. I 2,880 = 90 blocks: tp 7 -> 13 blocks = 416; ways 0
    # reads as 1 (no split)
    assert rank_intermediate(2_880, 7) == 416
    assert rank_intermediate(2_880, 0) == 2_880


def test_a_pipeline_stage_holds_its_share_of_the_moe_layers() -> None:
    # gpt-oss-120b's checkpoint experts a layer: 128 × (values 2 × 2,880 × 2,880 / 2 + 2,880 × 2,880 / 2 =
    # 12,441,600; e8m0 scales 5,760 × 90 + 2,880 × 90 = 777,600; bf16 biases 8,640 × 2 = 17,280) = 1,694,269,440 B;
    # 36 layers = 60,993,699,840 B (test_mxfp4_layout's 65,282,370,176 less the 4,288,670,336 outside the experts).
    # vLLM get_pp_indices gives pp stages 36 // pp layers and the remainder one more each: the largest stage holds
    # ceil(36 / pp) -> 18 at pp 2, 8 at pp 5
    experts = Mxfp4Experts(name="routed_experts", params=1, bytes_per_param_num=1, split="experts", experts=128,
                           hidden=2_880, intermediate=2_880, moe_layers=36)  # fmt: skip
    assert experts.bytes_per_gpu(Split.of(tp=1)) == 36 * 1_694_269_440 == 60_993_699_840
    assert experts.bytes_per_gpu(Split.of(tp=1, pp=2)) == 18 * 1_694_269_440
    assert experts.bytes_per_gpu(Split.of(tp=1, pp=5)) == 8 * 1_694_269_440


def test_the_layout_note_only_for_mxfp4_experts_under_a_backend() -> None:
    experts = Mxfp4Experts(name="routed_experts", params=1, bytes_per_param_num=1, split="experts", experts=128,
                           hidden=2_880, intermediate=2_880, moe_layers=36)  # fmt: skip
    dense = ParamGroup(name="dense", params=1, bytes_per_param_num=2)
    note = layout_note((dense, experts), "vllm", "triton")
    assert note == f"MXFP4 experts as vllm's triton MoE backend holds them ({LAYOUTS['triton'].source})"
    # no MXFP4 experts (a bf16 model on the same GPU), or no backend (no engine: the checkpoint layout): no note
    assert layout_note((dense,), "vllm", "triton") == ""
    assert layout_note((dense, experts), None, None) == ""
