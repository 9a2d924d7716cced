"""The attention backend SGLang picks when none is given, per version and platform (pure).

SGLang's own choice logic, read per release; kvplan then validates the choice against
``kvplan.engines.backends`` like an explicit one, so a default it picks is a backend the engine accepts there
(tests/property/test_default_backends.py walks every version row x catalog GPU x model preset).
"""

from __future__ import annotations

from kvplan.engines.backends import platform_label
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.versions import SglangRules

SM120_TRTLLM_MHA_BUG = (
    "; this SGLang itself picks trtllm_mha on SM12x and refuses it at startup (sgl-project/sglang#14814, fixed by "
    "#14842 in 0.5.7): pass --attention-backend flashinfer, the backend this plan assumes"
)
"""What 0.5.6.postN does on SM12x (``SglangRules.mha_sm12x_picks_trtllm``)."""


DEEPSEEK_FAMILY = ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration")
"""Plain-MLA classes SGLang's ``_handle_deepseek_family`` adjusts (its model-handler registry lists Kimi-K2.5 beside
DeepSeek-V3; the handler's MoE branch says "this also apply to kimi k2.5"): trtllm_mla on SM 10.x."""


def _family(dep: Deployment) -> int:
    return dep.gpu.sm // 10 if dep.gpu.vendor == "nvidia" else 0


# The choice, as each release makes it:
#
# Full attention (MHA / GQA), 0.5.23 ``server_args.py get_default_attn_backend`` (0.4.x: the same branches in
# ``model_runner.py model_specific_adjustment``):
# - Hopper (``is_hopper_with_cuda_12_3``: SM 9.x): fa3;
# - ``is_sm100_supported`` (SM 10.x only: B200, B300, GB200, GB300): trtllm_mha, from sgl-project/sglang#14291
#   (``SglangRules.mha_trtllm_sm100``); before it, the branch below;
# - HIP (gfx942 / gfx950): aiter;
# - else flashinfer: SM 8.x and SM 12.x (RTX 5090, RTX PRO 6000, GB10: "trtllm_mha does not support SM120, which
#   will fall back to flashinfer", sgl-project/sglang#14842).
# Plain MLA: Hopper fa3; SM 10.x flashinfer, but ``_handle_model_specific_adjustments`` sets trtllm_mla for
# DeepseekV3ForCausalLM there ("Use trtllm_mla as attention backend on sm100 for DeepseekV3ForCausalLM"); HIP aiter;
# else triton (SM 8.x, SM 12.x). DSA: ``_dsa_split_backend_resolution`` (shared/reference/sglang-0.5.23.md §2.7).
def mha_backend(arch: ModelArch, dep: Deployment, rules: SglangRules) -> tuple[str, str]:
    """A full-attention model's default backend and why (module doc)."""
    where = platform_label(dep.gpu)
    if dep.gpu.vendor == "amd":
        return "aiter", f"full attention on {where}"
    family = _family(dep)
    if arch.architecture == "GptOssForCausalLM":  # _handle_gpt_oss_family; flashinfer has no attention sinks
        if family in (9, 10):
            return ("fa3" if family == 9 else "trtllm_mha"), f"GptOssForCausalLM on {where}"
        return "triton", f"GptOssForCausalLM on {where} (attention sinks: neither Hopper nor SM100)"
    if family == 9:
        return "fa3", f"full attention on {where} (Hopper)"
    if family == 10 and rules.mha_trtllm_sm100:
        return "trtllm_mha", f"full attention on {where} (is_sm100_supported)"
    why = f"full attention on {where}: flashinfer"
    if family == 10:
        why += f" (trtllm_mha is the SM100 default only from 0.5.6.post1; SGLang {rules.label} picks flashinfer)"
    elif family == 12:
        why += " (trtllm_mha is SM100 only)"
        if rules.mha_sm12x_picks_trtllm:
            why += SM120_TRTLLM_MHA_BUG
    return "flashinfer", why


def mla_backend(arch: ModelArch, dep: Deployment, rules: SglangRules, dtype: str) -> tuple[str, str]:
    """An MLA model's default backend and why: plain MLA (``--attention-backend``) or DSA (module doc)."""
    gpu, sm = dep.gpu, dep.gpu.sm
    where = platform_label(gpu)
    family = _family(dep)
    if not arch.is_dsa:  # plain MLA: --attention-backend
        if gpu.vendor == "amd":
            return "aiter", f"MLA on {where}"
        if family == 9:
            return "fa3", f"MLA on {where} (Hopper)"
        if family == 10:
            if arch.architecture in DEEPSEEK_FAMILY:
                return "trtllm_mla", f"{arch.architecture} on {where} (is_sm100_supported)"
            return "flashinfer", f"MLA on {where} (is_sm100_supported)"
        return "triton", f"MLA on {where} (neither Hopper nor SM100)"
    if gpu.vendor == "amd":
        return "triton", f"DSA on HIP, {where}"
    if dep.dcp > 1 and rules.dcp:
        return "trtllm", "dcp > 1 sets both DSA backends to trtllm"
    if dtype == "fp8_e4m3" and arch.architecture.startswith("GlmMoeDsa") and family == 12:
        return "flashinfer_sparse_mla", f"GLM fp8 on {where}"
    if dtype == "fp8_e4m3":
        return ("trtllm" if sm >= 100 else "flashmla_kv"), f"fp8 on {where}"
    return f"flashmla_sparse/{'trtllm' if sm >= 100 else 'fa3'}", f"bf16 on {where} (prefill/decode)"


def for_vlm(arch: ModelArch, mfs: float, why: str) -> tuple[float, str]:
    """The default mem_fraction_static of a multimodal model (``arch.vision_tower``), scaled down as 0.5.23
    ``memory_hook.adjust_mem_fraction_for_vlm`` does without post-capture KV sizing: × 0.95 × clamp(1 − 0.1 ×
    (layers × hidden² / (24 × 1024²) − 1), 0.8, 1.05), not rounded again. Qwen3.5's ``vision_config`` writes
    ``depth``, not ``num_hidden_layers``: SGLang takes 24 layers (kvplan.models.hybrid)."""
    if not arch.vision_tower:
        return mfs, why
    layers, hidden = arch.vision_tower
    ratio = layers * hidden**2 / (24 * 1024**2)
    factor = 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return mfs * factor, f"{why}; × {factor:.4f} for the vision tower ({layers} layers × {hidden}: VLM)"
