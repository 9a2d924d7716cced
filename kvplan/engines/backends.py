"""Which attention backends each engine accepts for MLA / DSA models on which GPU, and which it picks (pure).

One table per engine; each row is a backend name as the engine spells it, the platforms it runs on and,
for DSA, the MLA row layout it gives an fp8 cache (sources above ``Backend``).
"""

from __future__ import annotations

from kvplan import record
from kvplan.errors import PlanError
from kvplan.models.deploy import Gpu
from kvplan.models.formats import MlaLayout

_GFX = {
    "mi300a": "gfx942",
    "mi300x": "gfx942",
    "mi308x": "gfx942",
    "mi325x": "gfx942",
    "mi350x": "gfx950",
    "mi355x": "gfx950",
}
"""AMD GPU -> GCN arch, as vLLM's ``platforms/rocm.py _ROCM_DEVICE_ID_NAME_MAP`` names them."""


def platform_label(gpu: Gpu) -> str:
    """'SM90 (CUDA)' or 'gfx942 (ROCm)': what the engines key their rules on."""
    if gpu.vendor == "amd":
        name = gpu.name.lower().replace(" ", "")
        arch = next((gfx for key, gfx in _GFX.items() if key in name), "")
        return f"{arch} (ROCm)" if arch else "ROCm"
    return f"SM{gpu.sm} (CUDA)"


# The tables' sources (SGLang 0.5.23, vLLM 0.33.0):
#
# SGLang
# - names: ``--dsa-prefill-backend`` / ``--dsa-decode-backend`` choices, ``DSA_CHOICES`` in
#   ``srt/server_args.py`` (flashmla_sparse, flashmla_kv, flashmla_auto, fa3, tilelang, aiter, trtllm), plus
#   ``flashinfer_sparse_mla`` that ``srt/arg_groups/overrides.py _dsa_split_backend_resolution`` sets for
#   GLM fp8 on SM12x; the plain-MLA ``--attention-backend`` choices (``ATTENTION_BACKEND_CHOICES``).
# - defaults: ``_dsa_split_backend_resolution`` (shared/reference/sglang-0.5.23.md §2.7): HIP -> triton;
#   fp8 -> trtllm on SM10x, flashmla_kv below; bf16 -> prefill flashmla_sparse, decode trtllm (SM10x) / fa3;
#   dcp > 1 -> trtllm (``model_overrides/deepseek_v2.py _dsa_dcp_overrides``).
# - tilelang with an fp8 cache is ROCm-only (``_check_tilelang_dsa_fp8_kv``: "the CUDA kernel hardcodes
#   bfloat16"); FlashMLA kernels are SM90/SM100; trtllm (TRT-LLM gen) is SM10x; fa3 is SM80-SM90.
# - layout: ``kv_cache_configurator.py calculate_mla_kv_cache_dim`` (reference §1.2): trtllm on either side,
#   both sides tilelang, or any DSA backend on HIP -> raw 576 B fp8 rows; else fp8_ds_mla (656 B).
#
# vLLM
# - names: ``AttentionBackendEnum`` (``v1/attention/backends/registry.py``); priorities in
#   ``platforms/cuda.py _get_backend_priorities`` (reference §7): SM90 sparse FLASH_ATTN_MLA_SPARSE (bf16 only),
#   FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90; SM10x with a quantized cache FLASHINFER_MLA_SPARSE (raw
#   576 B fp8), FLASHMLA_SPARSE (fp8_ds_mla); dense MLA FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA,
#   CUTLASS_MLA, TRITON_MLA.
# - ROCm: ``platforms/rocm.py _get_backend_priorities``: sparse -> ROCM_AITER_MLA_SPARSE only (bf16 or fp8,
#   576-wide rows: ``v1/attention/backends/mla/rocm_aiter_mla_sparse.py``); dense MLA -> ROCM_AITER_MLA,
#   TRITON_MLA, ROCM_AITER_TRITON_MLA.
# - no sparse backend accepts SM < 90: upstream vLLM cannot serve a DSA model on an A100 ("No valid attention
#   backend"), and neither can SGLang, whose DSA indexer runs DeepGEMM's fp8 MQA-logits kernels (SM90+).
@record
class Backend:
    """One attention backend: where it runs and what an fp8 cache looks like under it."""

    name: str
    rocm: bool = False
    """True: ROCm only; False: CUDA only."""
    min_sm: int = 90
    max_sm: int = 129
    dsa: bool = True
    """A sparse (DSA) backend; False: a dense MLA backend."""
    fp8: bool = True
    """Accepts an fp8 KV cache."""
    bf16: bool = True
    """Accepts a bf16 KV cache."""
    raw_fp8: bool = False
    """With fp8, stores the raw 576-B latent (True) rather than FlashMLA's 656-B fp8_ds_mla rows."""
    mha: bool = False
    """A full-attention (MHA / GQA / MQA) backend; ``dsa`` is then irrelevant."""

    def runs_on(self, gpu: Gpu) -> bool:
        if gpu.vendor == "amd":
            return self.rocm
        return not self.rocm and self.min_sm <= gpu.sm <= self.max_sm


SGLANG: tuple[Backend, ...] = (
    # DSA (--dsa-prefill-backend / --dsa-decode-backend)
    Backend("flashmla_sparse", max_sm=109),
    Backend("flashmla_kv", max_sm=109),
    Backend("flashmla_auto", max_sm=109),
    Backend("fa3", max_sm=99),
    # trtllm: TRT-LLM gen kernels; SGLang accepts it on SM90 too (its DCP override picks it there, §2.7)
    Backend("trtllm", max_sm=109, raw_fp8=True),
    Backend("tilelang", fp8=False),  # CUDA tilelang: bf16 cache only
    # GLM fp8 on SM12x; calculate_mla_kv_cache_dim lists no raw case for it: fp8_ds_mla rows (reference §1.2)
    Backend("flashinfer_sparse_mla", min_sm=120),
    Backend("tilelang", rocm=True, raw_fp8=True),
    Backend("triton", rocm=True, raw_fp8=True),
    Backend("aiter", rocm=True, raw_fp8=True),
    # plain MLA (--attention-backend)
    Backend("flashinfer", dsa=False, min_sm=80),
    Backend("fa3", dsa=False, min_sm=80, max_sm=99),
    Backend("flashmla", dsa=False, max_sm=109),
    Backend("cutlass_mla", dsa=False, min_sm=100, max_sm=109),
    Backend("trtllm_mla", dsa=False, min_sm=100, max_sm=109),
    Backend("triton", dsa=False, min_sm=70),
    Backend("aiter", dsa=False, rocm=True),
    Backend("triton", dsa=False, rocm=True),
    # full attention (--attention-backend, MHATokenToKVPool)
    Backend("fa3", mha=True, min_sm=80, max_sm=99),
    Backend("flashinfer", mha=True, min_sm=75),
    Backend("triton", mha=True, min_sm=70),
    Backend("trtllm_mha", mha=True, min_sm=100, max_sm=109),
    Backend("fa4", mha=True, min_sm=100, max_sm=109),
    Backend("aiter", mha=True, rocm=True),
    Backend("triton", mha=True, rocm=True),
)

VLLM: tuple[Backend, ...] = (
    # sparse MLA (DSA)
    Backend("FLASH_ATTN_MLA_SPARSE", max_sm=99, fp8=False),
    Backend("FLASHMLA_SPARSE", max_sm=109),
    Backend("FLASHINFER_MLA_SPARSE_SM90", max_sm=99, raw_fp8=True),
    Backend("FLASHINFER_MLA_SPARSE", min_sm=100, max_sm=109, raw_fp8=True),
    Backend("FLASH_ATTN_MLA_SPARSE_FA4", min_sm=100, max_sm=109, fp8=False),
    Backend("ROCM_AITER_MLA_SPARSE", rocm=True, raw_fp8=True),
    # dense MLA
    Backend("FLASH_ATTN_MLA", dsa=False, max_sm=99),
    Backend("FLASHMLA", dsa=False, max_sm=109),
    Backend("FLASHINFER_MLA", dsa=False, min_sm=100, max_sm=109),
    Backend("CUTLASS_MLA", dsa=False, min_sm=100, max_sm=109),
    Backend("TRITON_MLA", dsa=False, min_sm=80),
    Backend("ROCM_AITER_MLA", dsa=False, rocm=True),
    Backend("ROCM_AITER_TRITON_MLA", dsa=False, rocm=True),
    Backend("TRITON_MLA", dsa=False, rocm=True),
    # full attention (FullAttentionSpec)
    Backend("FLASH_ATTN", mha=True, min_sm=80),
    Backend("FLASHINFER", mha=True, min_sm=75),
    Backend("TRITON_ATTN", mha=True, min_sm=70),
    Backend("FLEX_ATTENTION", mha=True, min_sm=70),
    Backend("ROCM_ATTN", mha=True, rocm=True),
    Backend("ROCM_AITER_FA", mha=True, rocm=True),
    Backend("TRITON_ATTN", mha=True, rocm=True),
)


def _table(engine: str) -> tuple[Backend, ...]:
    return SGLANG if engine == "sglang" else VLLM


def _engine_name(engine: str, version: str) -> str:
    return f"{'SGLang' if engine == 'sglang' else 'vLLM'} {version}"


def _kind_is(b: Backend, *, dsa: bool, mha: bool) -> bool:
    return b.mha if mha else (not b.mha and b.dsa == dsa)


def valid_backends(engine: str, gpu: Gpu, *, dsa: bool, fp8: bool, mha: bool = False) -> tuple[str, ...]:
    """The backend names the engine accepts for this model kind, GPU and cache dtype, in table order."""
    out: list[str] = []
    for b in _table(engine):
        if _kind_is(b, dsa=dsa, mha=mha) and b.runs_on(gpu) and (b.fp8 if fp8 else b.bf16) and b.name not in out:
            out.append(b.name)
    return tuple(out)


def _find(engine: str, name: str, gpu: Gpu, *, dsa: bool, mha: bool = False) -> Backend | None:
    for b in _table(engine):
        if b.name == name and _kind_is(b, dsa=dsa, mha=mha) and b.runs_on(gpu):
            return b
    return None


def check_serves(engine: str, version: str, gpu: Gpu, *, dsa: bool, mha: bool = False) -> None:
    """Raise when the engine has no backend for this model kind on this GPU at all."""
    if mha:
        if not valid_backends(engine, gpu, dsa=False, fp8=False, mha=True):
            raise PlanError(
                f"the engine does not start: {_engine_name(engine, version)} has no attention backend for "
                f"{gpu.name} ({platform_label(gpu)})"
            )
        return
    if dsa and not valid_backends(engine, gpu, dsa=True, fp8=False) + valid_backends(engine, gpu, dsa=True, fp8=True):
        raise PlanError(
            f"the engine does not start: {_engine_name(engine, version)} has no DSA attention backend for "
            f"{gpu.name} ({platform_label(gpu)}): its sparse-MLA kernels and the DSA indexer's fp8 MQA-logits "
            "kernels need SM90+ (Hopper, Blackwell) or ROCm"
        )
    if not dsa and not valid_backends(engine, gpu, dsa=False, fp8=False):
        raise PlanError(
            f"the engine does not start: {_engine_name(engine, version)} has no MLA attention backend for "
            f"{gpu.name} ({platform_label(gpu)})"
        )


def check_backend(
    engine: str, version: str, gpu: Gpu, value: str, *, dsa: bool, fp8: bool, mha: bool = False
) -> tuple[Backend, ...]:
    """Validate an explicit ``attention_backend`` (SGLang DSA: 'name' or 'prefill/decode'); the backends used.

    Unknown or unsupported on this GPU / cache dtype: PlanError listing the valid ones.
    """
    parts = value.split("/") if engine == "sglang" and dsa and not mha else [value]
    if len(parts) > 2 or not all(parts):
        raise PlanError(f"attention_backend {value!r}: expected NAME or PREFILL/DECODE (SGLang DSA backends)")
    out: list[Backend] = []
    for name in parts:
        b = _find(engine, name, gpu, dsa=dsa, mha=mha)
        cache = "an fp8" if fp8 else "a bf16"
        valid = valid_backends(engine, gpu, dsa=dsa, fp8=fp8, mha=mha)
        kind = "full-attention (MHA/GQA)" if mha else "DSA" if dsa else "MLA"
        where = f"{_engine_name(engine, version)} on {gpu.name} ({platform_label(gpu)}) with {cache} KV cache"
        if b is None or not (b.fp8 if fp8 else b.bf16):
            known = any(x.name == name for x in _table(engine))
            why = "is not supported" if known else "is not a backend"
            raise PlanError(
                f"attention_backend {name!r} {why} for a {kind} model under {where}: "
                f"choose {', '.join(valid) if valid else '(none: this engine cannot serve it here)'}"
            )
        out.append(b)
    return tuple(out)


def dsa_fp8_layout(backends: tuple[Backend, ...], gpu: Gpu) -> MlaLayout:
    """The MLA row layout of an fp8 DSA cache under these (prefill, decode) backends.

    SGLang ``calculate_mla_kv_cache_dim``: trtllm on either side, both sides tilelang, or HIP -> raw 576 B;
    else FlashMLA's fp8_ds_mla (656 B). vLLM: one backend, its own format.
    """
    if gpu.vendor == "amd" or any(b.raw_fp8 and b.name != "tilelang" for b in backends):
        return MlaLayout.FP8_RAW
    if all(b.name == "tilelang" for b in backends):
        return MlaLayout.FP8_RAW
    return MlaLayout.FP8_DS_MLA
