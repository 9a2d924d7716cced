"""How far an estimated weights-per-GPU figure has missed the engines' own load lines, by the path it took.

A weights figure is read (set by the user, a measured point, the checkpoint's safetensors headers) or estimated
(per tensor from config.json, parameter groups). An estimate carries the largest error its path showed against
published load lines (vLLM ``Model loading took``, SGLang ``Load weight end ... mem usage``), every row of
tests/models/test_weights_published.py and tests/models/test_v4_measured_weights.py, known gaps included, so that a
verdict resting on it can say how far it could be off (tests/models/test_weights_band.py recomputes each band from
those rows).
"""

from __future__ import annotations

from kvplan import record
from kvplan.models.arch import ModelArch
from kvplan.models.mxfp4_moe import Mxfp4Experts


@record
class WeightsBand:
    ppm: int
    """The largest |predicted − published| / published of the path, parts per million."""
    path: str
    worst: str
    """The published row that set it."""

    @property
    def percent(self) -> str:
        return percent(self.ppm)


def percent(ppm: int) -> str:
    """'±0.8 %' for 8,023 ppm."""
    return f"±{ppm / 10_000:.1f} %"


PER_TENSOR = WeightsBand(8_023, "per tensor from config.json", "SGLang 0.4.4 Llama-3.1-8B, 1×H100: −0.80 %")
PER_TENSOR_DSA = WeightsBand(59_769, "per tensor from config.json (DSA)", "vLLM 0.28 GLM-5.3 fp8, 8×H200: −5.98 %")
MXFP4 = WeightsBand(21_974, "MXFP4 experts as the MoE backend holds them", "vLLM 0.19 gpt-oss-20b, 2×H100: −2.20 %")
GROUPS = WeightsBand(
    28_272, "parameter groups", "vLLM DeepSeek-V4-Flash, 8×H100 (vllm#41027), its load buffers counted: −2.83 %"
)
"""The checkpoint's groups plus what vLLM's DeepSeek-V4 model code allocates while loading (its top-k and MTP
hidden buffers, kvplan.engines.vllm_dsv4_memory, at the run's max_num_batched_tokens) against "Model loading
took": TP8 at 8,192 −2.83 %, TP2 EP2 at 32,768 (vllm#40821) −0.71 %; −4.15 % before the buffers were counted."""

READ_SUMMARY = "safetensors headers"
"""What the weights summary says when every tensor was read from the checkpoint (kvplan.models.safetensors)."""


def band_for(arch: ModelArch, origin: str) -> WeightsBand | None:
    """The band of the weights knob whose origin is ``origin``; None where the figure is read, not estimated."""
    if not origin.startswith("default: estimated") or READ_SUMMARY in arch.weights_said:
        return None
    if any(isinstance(g, Mxfp4Experts) for g in arch.param_groups):
        return MXFP4
    if "per tensor from config.json" in arch.weights_said:
        return PER_TENSOR_DSA if arch.has_indexer else PER_TENSOR
    return GROUPS


def headline_tag(arch: ModelArch, origin: str) -> str:
    """' (weights estimated ±0.8 %)' for a verdict resting on an estimate, '' otherwise."""
    band = band_for(arch, origin)
    return f" (weights estimated {band.percent})" if band else ""
