"""SGLang's KV cache dtype, attention backend and MLA row layout for a deployment, resolved as SGLang does (the
backend checked per GPU: an engine default that does not run here is SGLang's start-up failure), and the page size
a backend forces (pure).
"""

from __future__ import annotations

import kvplan.engines.sglang_defaults as sglang_defaults
from kvplan.engines.backends import Backend, check_backend, check_serves, dsa_fp8_layout, platform_label
from kvplan.engines.common import Knob, resolve
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment, Gpu
from kvplan.models.formats import MlaLayout
from kvplan.versions import sglang_rules

_MHA_DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
"""--kv-cache-dtype for MHATokenToKVPool (``server_args`` choices auto, bf16, fp16, fp8_e4m3, fp8_e5m2)."""

PAGE_BY_BACKEND = {"trtllm_mha": 64, "flashmla": 64, "cutlass_mla": 128, "trtllm_mla": 64}
"""Backends that force a page size (docs/engines.md); every other backend keeps 1."""

PAGE_ACCEPTED = {"trtllm_mha": (16, 32, 64), "trtllm_mla": (32, 64)}
"""Set page sizes a forcing backend keeps; any other it changes to its own, and flashmla / cutlass_mla change every
one (SGLang ``server_args`` ``_mla_backend_page_constraints``: "Cutlass MLA only supports a page_size of 128, change
page_size to 128."; "TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from ... to 64")."""


def _mha_layout(arch: ModelArch, dep: Deployment, version: str) -> tuple[str, str, MlaLayout | None, list[Knob]]:
    """kv dtype and backend of a full-attention model (no MLA row layout)."""
    gpu = dep.gpu
    check_serves("sglang", version, gpu, dsa=False, mha=True)
    knobs: list[Knob] = []
    if dep.kv_cache_dtype == "auto":
        dtype = "bfloat16"
        knobs.append(Knob("kv_cache_dtype", dtype, "default: auto = the model dtype (bf16)"))
    elif dep.kv_cache_dtype in _MHA_DTYPES:
        dtype = _MHA_DTYPES[dep.kv_cache_dtype]
        knobs.append(Knob("kv_cache_dtype", dtype, "set"))
    else:
        raise PlanError(f"kv_cache_dtype {dep.kv_cache_dtype} is an MLA row format: a full-attention model "
                        f"takes {', '.join(['auto', *_MHA_DTYPES])}")  # fmt: skip
    if dep.mla_layout:
        raise PlanError("mla_layout applies to MLA models only: this model has full attention (MHA / GQA)")
    if dep.attention_backend:
        backend = dep.attention_backend
        knobs.append(Knob("attention_backend", backend, "set"))
        check_backend("sglang", version, gpu, backend, dsa=False, fp8=dtype.startswith("fp8"), mha=True)
    else:
        backend, why = sglang_defaults.mha_backend(arch, dep, sglang_rules(version))
        knobs.append(Knob("attention_backend", backend, f"default: {why}"))
        check_default(version, gpu, backend, why, dsa=False, fp8=dtype.startswith("fp8"), mha=True)
    return dtype, backend, None, knobs


def check_default(version: str, gpu: Gpu, backend: str, why: str, **kind: bool) -> tuple[Backend, ...]:
    """The engine's own default, validated like an explicit backend; where the engine picks one that does not
    run here, it does not start, and the message says what it picked and why."""
    try:
        return check_backend("sglang", version, gpu, backend, **kind)
    except PlanError as e:
        raise PlanError(f"the engine does not start: SGLang {version} picks {backend} by default ({why}), {e}") from e


def kv_layout(arch: ModelArch, dep: Deployment, version: str) -> tuple[str, str, MlaLayout | None, list[Knob]]:
    """kv dtype, backend and MLA row layout, resolved as SGLang does (backends checked per GPU)."""
    knobs: list[Knob] = []
    gpu, sm = dep.gpu, dep.gpu.sm
    if not arch.is_mla:
        return _mha_layout(arch, dep, version)
    check_serves("sglang", version, gpu, dsa=arch.is_dsa)
    requested = dep.kv_cache_dtype
    if requested in ("auto",):
        # torch.cuda.get_device_capability(): major 9 on gfx942 under HIP, so never fp8 there
        dtype = "fp8_e4m3" if arch.is_dsa and gpu.vendor == "nvidia" and sm >= 100 else "bfloat16"
        knobs.append(Knob("kv_cache_dtype", dtype, f"default: auto on {platform_label(gpu)} -> {dtype}"))
    else:
        dtype = "bfloat16" if requested in ("bf16", "bfloat16") else "fp8_e4m3"
        knobs.append(Knob("kv_cache_dtype", dtype, "set"))
    fp8 = dtype == "fp8_e4m3"
    if dep.attention_backend:
        backend = dep.attention_backend
        knobs.append(Knob("attention_backend", backend, "set"))
        used = check_backend("sglang", version, gpu, backend, dsa=arch.is_dsa, fp8=fp8)
    else:
        backend, why = sglang_defaults.mla_backend(arch, dep, sglang_rules(version), dtype)
        knobs.append(Knob("attention_backend", backend, f"default: {why}"))
        used = check_default(version, gpu, backend, why, dsa=arch.is_dsa, fp8=fp8)
    if dep.mla_layout:
        layout = MlaLayout(dep.mla_layout)
        knobs.append(Knob("mla_layout", layout.value, "set"))
    else:
        if not fp8:
            layout = MlaLayout.BF16
        elif not arch.is_dsa:
            layout = MlaLayout.FP8_RAW
        elif sglang_rules(version).dsa_fp8_row_any_backend:
            layout = MlaLayout.FP8_DS_MLA  # NSATokenToKVPool: 656 B (kv_lora_rank + scales + bf16 rope) on any backend
        else:
            layout = dsa_fp8_layout(used, gpu)
        knobs.append(Knob("mla_layout", layout.value, f"default: {dtype} with {backend}"))
    return dtype, backend, layout, knobs


def page_knob(arch: ModelArch, dep: Deployment, backend: str) -> Knob:
    """page_size: DSA on CUDA pages by 64 × index_kpool (SGLang asserts 64-token physical pages), a backend of
    ``PAGE_BY_BACKEND`` forces its own, every other backend keeps 1."""
    if arch.is_dsa and dep.gpu.vendor == "nvidia":
        page_default, page_why = 64 * arch.index_kpool, "DSA on CUDA: 64 × index_kpool"
    else:
        page_default = PAGE_BY_BACKEND.get(backend, 1)
        page_why = f"{backend} backend" + (" forces it" if page_default > 1 else " keeps 1")
    page_k = resolve(dep, "page_size", page_default, page_why)
    page = page_k.as_int()
    forced = PAGE_BY_BACKEND.get(backend)  # never a DSA backend: those take 64 × index_kpool on CUDA
    if forced is not None and page != forced and page not in PAGE_ACCEPTED.get(backend, ()):
        page_k = Knob("page_size", forced, f"set {page}; the {backend} backend changes it to {forced}")
        page = forced
    if arch.is_dsa and dep.gpu.vendor == "nvidia" and page // arch.index_kpool != 64:
        raise PlanError(
            f"DSA requires 64-token physical pages, got page_size={page} with "
            f"index_kpool={arch.index_kpool} (SGLang asserts this at startup)"
        )
    return page_k
