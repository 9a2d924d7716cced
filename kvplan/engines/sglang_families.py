"""What SGLang 0.5.23 does differently for each hybrid architecture it serves, one record per architecture (pure):
the hybrid sizer asks the record, never the architecture's name."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.arch import ModelArch


@dataclass(frozen=True)
class SglangHybridFamily:
    """One architecture's overrides in SGLang's hybrid chain (the defaults: a hybrid SGLang gives none)."""

    mamba_extra_buffer: bool = False
    """In ``_MAMBA_EXTRA_BUFFER_ARCHS`` (``arg_groups/overrides.py``): the radix cache keeps the extra state buffer,
    3 + 2 tracking slots a request (``_calculate_mamba_ratio``)."""
    speculative: bool = False
    """kvplan plans speculative decoding (MTP / NEXTN) for it: Qwen3-Next's family and GLM-5.3-Flash."""
    no_draft: str = ""
    """The family's name where SGLang has no draft model for it at all (its refusal names it)."""
    dsa_pool: bool = False
    """GLM-5.3-Flash (``configs/hybrid_arch.py`` ``glm5_next_config``): ``HybridLinearKVPool`` over
    ``DSATokenToKVPool`` on the full layers: indexer K on the full layers that own one, the config's NextN layer in
    cell_size, the page 64 × index_kpool over any --page-size, the pooled-index compress tails beside the pool."""


_QWEN3_NEXT = SglangHybridFamily(mamba_extra_buffer=True, speculative=True)
FAMILIES: dict[str, SglangHybridFamily] = {
    "Qwen3NextForCausalLM": _QWEN3_NEXT,
    "Qwen3_5ForConditionalGeneration": _QWEN3_NEXT,
    "Qwen3_5MoeForConditionalGeneration": _QWEN3_NEXT,
    # the text-only Qwen3.5 classes are not in _MAMBA_EXTRA_BUFFER_ARCHS
    "Qwen3_5ForCausalLM": SglangHybridFamily(speculative=True),
    "Qwen3_5MoeForCausalLM": SglangHybridFamily(speculative=True),
    # no KimiLinear NextN model under models/ and no draft-mode rewrite for it in configs/model_config.py
    "KimiLinearForCausalLM": SglangHybridFamily(mamba_extra_buffer=True, no_draft="Kimi-Linear"),
    "Glm5NextForConditionalGeneration": SglangHybridFamily(mamba_extra_buffer=True, speculative=True, dsa_pool=True),
}
"""Every hybrid architecture SGLang treats apart, keyed by ``architectures[0]``."""


def family_of(arch: ModelArch) -> SglangHybridFamily:
    return FAMILIES.get(arch.architecture, SglangHybridFamily())
