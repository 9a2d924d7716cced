"""MXFP4 MoE experts (gpt-oss) as each engine backend allocates them on one GPU, not as the checkpoint stores them.

The checkpoint holds, per MoE layer and expert, ``gate_up_proj_blocks`` (2·I × h/2 B: two e2m1 values a byte),
``gate_up_proj_scales`` (2·I × h/32 B: one e8m0 scale per 32 values), ``gate_up_proj_bias`` (2·I bf16), and the
same for ``down_proj`` (h × I/2, h × I/32, h). What the GPU holds after the load (vLLM ``Model loading took``,
SGLang ``Load weight end ... mem usage``) depends on the MoE backend, read from the source (above ``Layout``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan import record
from kvplan.models.arch import ParamGroup, Split
from kvplan.models.deploy import Gpu

MXFP4_BLOCK = 32
"""Values per e8m0 scale."""
HOPPER_SCALE_ALIGN = 2 * 8 * 2 * 8
"""triton_kernels ``HopperMXScaleLayout``: SWIZZLE_ALIGN_M = 2 × num_warps × 2 × 8 with num_warps 8."""


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


# How each backend lays the experts out:
#
# vLLM ``model_executor/layers/quantization/mxfp4.py`` (``Mxfp4MoEMethod.create_weights`` pads, then
# ``process_weights_after_loading`` repacks; ``get_mxfp4_backend`` picks the backend):
#
# - ``triton`` (SM90 with ``triton_kernels`` and torch >= 2.8; the "Using Triton backend" log of vLLM 0.14.1 and the
#   'TRITON' of 0.19.0 on H100): I padded to a multiple of 64; the biases become fp32 (``w13_bias.to(torch.float32)``);
#   ``_swizzle_mxfp4`` builds new weight tensors (the bf16 originals are deleted) and a swizzled copy of the scales
#   for ``PrecisionConfig`` while ``layer.w13_weight_scale`` / ``w2_weight_scale`` stay registered: the scales are
#   held twice. triton_kernels ``HopperMXScaleLayout.swizzle_data`` pads the copy's output dimension to
#   ``2 × num_warps × 2 × 8`` = 256 (num_warps 8) and its scale count to 2. The value swizzle
#   (``HopperMXValueLayout``, mma v3) pads bytes to 16 × 32 tiles: nothing for gpt-oss (every dimension a multiple
#   of 32), not modelled for other shapes.
# - ``marlin`` (SM90 before torch 2.8 / without triton_kernels, SM80-89 and SM120; vLLM 0.10.1 on H100 in
#   vllm-project/vllm#23278, "Weight-only FP4 compression will be used leveraging the Marlin kernel"): I padded to
#   128 and h to 256 ("n % 256 == 0 and k % 128 == 0"); ``prepare_moe_fp4_layer_for_marlin`` repacks in place of
#   the originals, scales once (e8m0), biases bf16.
# - ``flashinfer_trtllm`` (SM100 with FlashInfer, ``SM100_FI_MXFP4_BF16``, vLLM's default on Blackwell): I and h
#   padded to 256; weights and scales shuffled in place of the originals (one copy), biases fp32, and three fp32
#   vectors of E (alpha, beta, clamp limit).
#
# SGLang (``srt/layers/quantization/mxfp4.py``, ``Mxfp4MoEMethod``): the triton_kernels path is vLLM's (I padded to
# 64, fp32 biases, ``layer.w13_weight_scale`` kept beside the swizzled ``PrecisionConfig`` scales), and FlashInfer
# (``USE_FLASHINFER_MXFP4_MOE``, Blackwell) pads I and h to 256 like vLLM's trtllm path.
#
# Per rank: vLLM ``GptOssModel.load_weights`` gives each of t expert ranks ``cdiv(I / 32, t) × 32`` of the
# intermediate dimension (whole experts under expert parallelism are not modelled: the split here is always the
# intermediate one, what both engines do by default). Checked against vLLM's published load lines in
# tests/models/test_weights_published.py.
@record
class Layout:
    """How one backend pads and repacks the experts of a rank."""

    name: str
    intermediate_align: int
    hidden_align: int
    bias_bytes: int
    swizzled_scale_copy: bool
    """A second, padded copy of the scales (triton_kernels ``PrecisionConfig``) beside the registered ones."""
    fp32_vectors: int
    """fp32 vectors of one value per expert (FlashInfer's gemm1 alpha, beta and clamp limit)."""
    source: str


CHECKPOINT = Layout("checkpoint", 1, 1, 2, False, 0, "the safetensors layout (blocks, e8m0 scales, bf16 biases)")
LAYOUTS = {
    "triton": Layout(
        "triton", 64, 1, 4, True, 0, "Mxfp4MoEMethod TRITON: fp32 biases, scales kept + swizzled copy (pad 256)"
    ),
    "marlin": Layout("marlin", 128, 256, 2, False, 0, "Mxfp4MoEMethod MARLIN: I to 128, h to 256, repacked in place"),
    "flashinfer_trtllm": Layout(
        "flashinfer_trtllm", 256, 256, 4, False, 3, "Mxfp4MoEMethod SM100_FI_MXFP4_BF16: I and h to 256, fp32 biases"
    ),
}


def backend_for(engine: str | None, gpu: Gpu) -> str | None:
    """The MXFP4 MoE backend the engine picks on ``gpu`` by default (vLLM ``get_mxfp4_backend``; SGLang
    ``Mxfp4MoEMethod``): FlashInfer's trtllm-gen on SM100/SM103, triton_kernels on SM90 (and on AMD: ROCm's
    padding, ``get_padding_alignment``, is not modelled), Marlin elsewhere (vLLM; SGLang has no Marlin path
    and runs triton_kernels). None without an engine (the checkpoint layout)."""
    if engine not in ("vllm", "sglang"):
        return None
    if gpu.vendor == "amd":
        return "triton"
    if gpu.sm in (100, 103):
        return "flashinfer_trtllm"
    if gpu.sm == 90 or engine == "sglang":
        return "triton"
    return "marlin"


def rank_intermediate(intermediate: int, ways: int) -> int:
    """vLLM ``GptOssModel.load_weights``: ``cdiv(I / 32, tp) × 32`` columns of I a rank."""
    return -(-(intermediate // MXFP4_BLOCK) // max(ways, 1)) * MXFP4_BLOCK


def layer_bytes(*, experts: int, hidden: int, intermediate: int, layout: Layout) -> int:
    """One MoE layer's expert bytes on a rank holding ``intermediate`` columns of every expert."""
    i = _up(intermediate, layout.intermediate_align)
    h = _up(hidden, layout.hidden_align)
    values = 2 * i * h // 2 + h * i // 2  # w13 (2I × h) and w2 (h × I), two e2m1 a byte
    scales = 2 * i * (h // MXFP4_BLOCK) + h * (i // MXFP4_BLOCK)
    if layout.swizzled_scale_copy:  # rows padded to 256, scale columns to 2 (HopperMXScaleLayout)
        scales += _up(2 * i, HOPPER_SCALE_ALIGN) * _up(h // MXFP4_BLOCK, 2)
        scales += _up(h, HOPPER_SCALE_ALIGN) * _up(i // MXFP4_BLOCK, 2)
    biases = (2 * i + h) * layout.bias_bytes
    return experts * (values + scales + biases + 4 * layout.fp32_vectors)


@record(kw_only=True)
class Mxfp4Experts(ParamGroup):
    """The routed experts of an MXFP4 MoE model: the checkpoint layout without an engine, the backend's with one."""

    experts: int
    hidden: int
    intermediate: int
    moe_layers: int

    def layout_bytes(self, split: Split, layout: Layout) -> int:
        layers = -(-self.moe_layers // max(split.pp, 1))
        i = rank_intermediate(self.intermediate, split.experts)
        return layers * layer_bytes(experts=self.experts, hidden=self.hidden, intermediate=i, layout=layout)

    def bytes_per_gpu(self, split: Split) -> int:
        return self.layout_bytes(split, CHECKPOINT)

    def bytes_on(self, split: Split, *, engine: str | None, with_mtp: bool, moe_backend: str | None = None) -> int:
        layout = LAYOUTS.get(moe_backend or "") if engine else None
        return self.layout_bytes(split, layout or CHECKPOINT)


def layout_note(groups: Sequence[ParamGroup], engine: str | None, backend: str | None) -> str:
    """Said on the weights line of a model with MXFP4 experts: which backend's layout the figure is."""
    if not backend or not any(isinstance(g, Mxfp4Experts) for g in groups):
        return ""
    return f"MXFP4 experts as {engine}'s {backend} MoE backend holds them ({LAYOUTS[backend].source})"
