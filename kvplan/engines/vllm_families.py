"""What vLLM does differently for a model family, one record per family: the sizers ask the record, never the
architecture name (kvplan.engines.vllm_defaults, vllm_budget, vllm_hybrid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan.models.arch import QWEN3_NEXT_FAMILY, ModelArch

HybridMtp = Literal["planned", "no_draft", "not_planned"]
"""Speculative decoding (MTP) on a hybrid: kvplan plans its draft groups, vLLM has no MTP draft for the family
(refused with the engine's error), or kvplan does not model its draft groups (refused, one line)."""


@dataclass(frozen=True)
class VllmFamily:
    name: str
    architectures: tuple[str, ...] = ()
    """Architecture names of the family, exactly as config.json writes them."""
    prefix: str = ""
    """Or every architecture that starts with it."""
    hybrid_mtp: HybridMtp = "not_planned"
    sm10x_kv_dtype: str = "auto"
    """kv_cache_dtype 'auto' on SM10x: the model's own default (``GlmMoeDsa`` sets fp8_e4m3)."""
    graph_estimate_source: str = ""
    """Where the assumed CUDA-graph estimate was read, when it was read on this family."""

    def matches(self, architecture: str) -> bool:
        return architecture in self.architectures or bool(self.prefix and architecture.startswith(self.prefix))


FAMILIES = (
    # qwen3_next_mtp: the MTP layer's attention joins the full-attention groups (kvplan.engines.vllm_mamba)
    VllmFamily("Qwen3-Next", architectures=QWEN3_NEXT_FAMILY, hybrid_mtp="planned"),
    # config/speculative.py: model_type kimi_linear maps to no MTP model (only kimi_k3 -> kimi_k3_mtp)
    VllmFamily("Kimi-Linear", architectures=("KimiLinearForCausalLM",), hybrid_mtp="no_draft"),
    # GlmMoeDsa on SM10x: the model's config sets an fp8_e4m3 KV cache by default
    VllmFamily("GlmMoeDsa", prefix="GlmMoeDsa", sm10x_kv_dtype="fp8_e4m3"),
    VllmFamily(
        "DeepSeek-V4",
        prefix="DeepseekV4",
        graph_estimate_source="ASSUMED: DeepSeek-V4-Flash vLLM 0.25.0 log (DEFAULT_CUDAGRAPH_ESTIMATE)",
    ),
)
OTHER = VllmFamily("other")


def family_of(arch: ModelArch) -> VllmFamily:
    """The model's family record (OTHER: vLLM's defaults)."""
    return next((f for f in FAMILIES if f.matches(arch.architecture)), OTHER)
