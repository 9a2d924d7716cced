"""MXFP4 experts per backend (kvplan.models.mxfp4_moe): which backend each engine picks on which GPU, and the
bytes of the layouts no published load line pins (the published ones: tests/models/test_weights_published.py)."""

from __future__ import annotations

import pytest

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.models.mxfp4_moe import CHECKPOINT, LAYOUTS, backend_for, layer_bytes, rank_intermediate


@pytest.mark.parametrize(
    ("engine", "gpu", "backend"),
    [
        # vLLM get_mxfp4_backend: SM100 family with FlashInfer -> SM100_FI_MXFP4_BF16; SM90 with triton_kernels ->
        # TRITON (the 0.14.1 / 0.19.0 logs); below SM90 (and SM120, outside triton_kernels' 9.0-11.0) -> MARLIN
        ("vllm", "h100", "triton"),
        ("vllm", "h200", "triton"),
        ("vllm", "b200", "flashinfer_trtllm"),
        ("vllm", "a100", "marlin"),
        # SGLang Mxfp4MoEMethod: triton_kernels unless FlashInfer MXFP4 (Blackwell); no Marlin path
        ("sglang", "h100", "triton"),
        ("sglang", "a100", "triton"),
        ("sglang", "b200", "flashinfer_trtllm"),
        (None, "h100", None),
    ],
)
def test_backend_for(engine: str | None, gpu: str, backend: str | None) -> None:
    assert backend_for(engine, find_gpu(gpu)) == backend


def test_rank_intermediate() -> None:
    # vLLM GptOssModel.load_weights: cdiv(2,880 / 32, tp) × 32 -> 2,880, 1,440, 736 (23 blocks), 384 (12 blocks)
    assert [rank_intermediate(2880, t) for t in (1, 2, 4, 8)] == [2880, 1440, 736, 384]


def test_flashinfer_layout_gpt_oss_120b_b200() -> None:
    # SM100_FI_MXFP4_BF16 (Mxfp4MoEMethod.create_weights: I and h rounded up to 256 -> 3,072 both): w13 128 × 6,144
    # × 1,536 = 1,207,959,552 B, scales 128 × 6,144 × 96 = 75,497,472, fp32 bias 128 × 6,144 × 4 = 3,145,728; w2
    # 128 × 3,072 × 1,536 = 603,979,776, scales 128 × 3,072 × 96 = 37,748,736, fp32 bias 1,572,864; gemm1 alpha,
    # beta and clamp limit 3 × 128 × 4 = 1,536 -> 1,929,905,664 B a layer
    layer = layer_bytes(experts=128, hidden=2880, intermediate=2880, layout=LAYOUTS["flashinfer_trtllm"])
    assert layer == 1_929_905_664
    arch = load_model("gpt-oss-120b")
    # + 4,288,670,336 B outside the experts (test_weights_published derives it) = 73,765,274,240 B (68.70 GiB)
    got = arch.estimated_weights_per_gpu(Split.of(tp=1), engine="vllm", moe_backend="flashinfer_trtllm")
    assert got == 36 * layer + 4_288_670_336 == 73_765_274_240


def test_triton_tp4_pads_the_rank_intermediate() -> None:
    # tp 4: I a rank 736, padded to 768 (64); h 2,880 stays. w13 128 × 1,536 × 1,440 = 283,115,520, scales 128 ×
    # 1,536 × 90 = 17,694,720 and the swizzled copy 128 × 1,536 (a multiple of 256) × 90 = 17,694,720; w2 128 ×
    # 2,880 × 384 = 141,557,760, scales 128 × 2,880 × 24 = 8,847,360, copy 128 × 3,072 × 24 = 9,437,184; fp32
    # biases 128 × (1,536 + 2,880) × 4 = 2,260,992 -> 480,608,256 B a layer
    layer = layer_bytes(experts=128, hidden=2880, intermediate=736, layout=LAYOUTS["triton"])
    assert layer == 480_608_256


def test_no_engine_is_the_checkpoint() -> None:
    # without an engine (the loader's fit check) the experts are the checkpoint's: 65,282,370,176 B at tp 1
    arch = load_model("gpt-oss-120b")
    assert arch.estimated_weights_per_gpu(Split.of(tp=1)) == 65_282_370_176
    assert arch.estimated_weights_per_gpu(Split.of(tp=1), engine=None, moe_backend="triton") == 65_282_370_176


def test_triton_tp8_gpt_oss_120b() -> None:
    # tp 8 (the 8×H200 presets): I a rank cdiv(90, 8) × 32 = 384 (a multiple of 64). w13 128 × 768 × 1,440 =
    # 141,557,760 B, scales 128 × 768 × 90 = 8,847,360 and the swizzled copy the same (768 = 3 × 256); w2 128 ×
    # 2,880 × 192 = 70,778,880, scales 128 × 2,880 × 12 = 4,423,680, copy 128 × 3,072 × 12 = 4,718,592; fp32
    # biases 128 × (768 + 2,880) × 4 = 1,867,776 -> 241,041,408 B a layer
    layer = layer_bytes(experts=128, hidden=2880, intermediate=384, layout=LAYOUTS["triton"])
    assert layer == 241_041_408
    # the checkpoint layout a rank: 141,557,760 + 8,847,360 + 70,778,880 + 4,423,680 + bf16 biases 128 × 3,648 × 2
    # = 933,888 -> 226,541,568 B; 36 × (241,041,408 − 226,541,568) = 521,994,240 B more, and the rest of the model
    arch = load_model("gpt-oss-120b")
    tp8 = Split.of(tp=8)
    ckpt = layer_bytes(experts=128, hidden=2880, intermediate=384, layout=CHECKPOINT)
    assert ckpt == 226_541_568
    assert arch.estimated_weights_per_gpu(tp8, engine="sglang", moe_backend="triton") == 9_266_716_352
    assert arch.estimated_weights_per_gpu(tp8) == 9_266_716_352 - 36 * (241_041_408 - 226_541_568)
