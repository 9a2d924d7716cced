"""vLLM V1's defaults before the memory budget: the KV cache dtype, the attention backend, the MLA row layout and
the block size, as ``platforms/cuda.py`` / ``platforms/rocm.py`` pick them (the 'defaults' step of
kvplan.engines.vllm.plan); DeepSeek-V4 and GLM-5.3-Flash take their own backends (vllm_dsv4, vllm_glm5_next).
"""

from __future__ import annotations

from dataclasses import dataclass

import kvplan.engines.vllm_knobs as vllm_knobs
from kvplan.engines.backends import check_backend, check_serves, platform_label
from kvplan.engines.common import Knob, resolve
from kvplan.engines.vllm_dsv4 import is_v4, v4_layout
from kvplan.engines.vllm_families import family_of
from kvplan.engines.vllm_glm5_next import glm5_next_layout, is_glm5_next
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment, Gpu
from kvplan.models.formats import MlaLayout
from kvplan.versions import BLOCK_SIZE_CHECKED_SINCE, parse_version


@dataclass(frozen=True)
class Layout:
    """What the attention backend stores: kv dtype, backend, the MLA row layout (None: per-head K and V) and the
    knobs that say where each came from."""

    dtype: str
    backend: str
    mla_layout: MlaLayout | None
    knobs: tuple[Knob, ...]


def resolve_layout(arch: ModelArch, dep: Deployment) -> Layout:
    """The backend vLLM selects for the model's attention, and the row it stores (``get_attn_backend``)."""
    layout: MlaLayout | None
    if is_v4(arch):  # fp8_ds_mla on FLASHMLA_SPARSE_DSV4 (kvplan/engines/vllm_dsv4.py)
        layout = None
        dtype, knobs = v4_layout(arch, dep)
    elif is_glm5_next(arch):  # FLASHINFER_MLA_SPARSE_SM90 raw rows (kvplan/engines/vllm_glm5_next.py)
        layout, knobs = glm5_next_layout(arch, dep)
        dtype = str(knobs[0].value)
    elif not arch.is_mla:  # per-head K and V (FullAttentionSpec)
        layout = None
        dtype, knobs = _mha_layout(dep)
    else:
        layout, knobs = _layout(arch, dep)
        dtype = str(knobs[0].value)
    backend = str(next(k.value for k in knobs if k.name == "attention_backend"))
    return Layout(dtype, backend, layout, tuple(knobs))


def block_knob(arch: ModelArch, dep: Deployment, backend: str) -> Knob:
    """--block-size, else the smallest kernel block of the backend (``Platform.update_block_size_for_backend``)."""
    if arch.is_dsa:
        block_default, block_why = 64, "the DSA backends accept 64"
    else:
        block_default = BLOCK_BY_BACKEND.get(backend, 16)
        block_why = f"{backend}: smallest kernel block size" if backend in BLOCK_BY_BACKEND else "DEFAULT_BLOCK_SIZE"
    page_k = resolve(dep, "page_size", block_default, block_why)
    if arch.is_dsa and dep.gpu.vendor == "nvidia" and page_k.as_int() % 64:
        raise PlanError(
            f"block_size {page_k.as_int()}: the DeepSeek-V3.2 indexer backend supports multiples of 64 on CUDA"
        )
    if not arch.is_dsa and dep.page_size is not None:
        _check_given_block(dep, backend, page_k.as_int())
    return page_k


def _check_given_block(dep: Deployment, backend: str, block: int) -> None:
    """A --block-size the backend cannot take (vLLM 0.18.0 on, ``BLOCK_SIZE_CHECKED_SINCE``): refused, one line."""
    kernel = KERNEL_BLOCK_BY_BACKEND.get(backend, 16)
    if backend in UNCHECKED_BLOCK or block % kernel == 0:
        return
    if parse_version(dep.engine_version) < BLOCK_SIZE_CHECKED_SINCE:
        return
    takes = f"{backend} takes multiples of {kernel} (get_supported_kernel_block_sizes)"
    if dep.attention_backend:
        raise PlanError(
            f"vLLM refuses it: ValueError: Selected backend {backend} is not valid for this configuration. Reason: "
            f"['block_size not supported'] (block_size {block}: {takes})"
        )
    raise PlanError(
        f"block_size {block}: {takes}, so vLLM {dep.engine_version} passes over its default {backend} for a "
        "lower-priority backend, or finds none ('No valid attention backend found'); kvplan does not plan that "
        f"choice: set a multiple of {kernel}, or attention_backend"
    )


def _default_backend(arch: ModelArch, gpu: Gpu, dtype: str) -> str:
    """The backend vLLM's priority list picks (``platforms/cuda.py`` / ``platforms/rocm.py``)."""
    fp8 = dtype not in ("auto", "bf16", "bfloat16")
    if gpu.vendor == "amd":
        return "ROCM_AITER_MLA_SPARSE" if arch.is_dsa else "ROCM_AITER_MLA"
    sm = gpu.sm
    if not arch.is_dsa:  # FLASHINFER_MLA is SM10x only, FLASHMLA / FLASH_ATTN_MLA SM9x: SM8x and SM12x take TRITON_MLA
        if sm // 10 == 10:
            return "FLASHINFER_MLA"
        return ("FLASHMLA" if fp8 else "FLASH_ATTN_MLA") if sm // 10 == 9 else "TRITON_MLA"
    if sm >= 100:
        return "FLASHINFER_MLA_SPARSE" if fp8 and dtype != "fp8_ds_mla" else "FLASHMLA_SPARSE"
    # SM90: FLASH_ATTN_MLA_SPARSE first, but it rejects a quantized cache
    return "FLASHMLA_SPARSE" if fp8 else "FLASH_ATTN_MLA_SPARSE"


BLOCK_BY_BACKEND = {"FLASHMLA": 64, "FLASHINFER_MLA": 32, "CUTLASS_MLA": 128, "ROCM_AITER_MLA": 1}
"""The smallest kernel block size each backend lists (``get_supported_kernel_block_sizes``), chosen by
``Platform.update_block_size_for_backend`` when --block-size is not given; every other backend takes the
``CacheConfig.DEFAULT_BLOCK_SIZE`` 16 (FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLASH_ATTN_MLA, TRITON_MLA)."""

KERNEL_BLOCK_BY_BACKEND = {**BLOCK_BY_BACKEND, "ROCM_AITER_TRITON_MLA": 1}
"""What a given block size must be a multiple of (``AttentionBackend.supports_block_size``: a multiple of one of
``get_supported_kernel_block_sizes``, the smallest here; wheels 0.18.0, 0.21.0, 0.33.0): FLASHMLA [64], FLASHINFER_MLA
[32, 64], CUTLASS_MLA [128], the AITER MLA backends [1] / [MultipleOf(1)]; every other backend kvplan picks lists
16 or multiples of it (FLASH_ATTN, FLASH_ATTN_MLA, TRITON_MLA, TRITON_ATTN, ROCM_ATTN [MultipleOf(16)], FLASHINFER
[16, 32, 64], ROCM_AITER_FA [16, 32]). FLASH_ATTN's FA4 cases (head 512 with an fp8 cache on SM90: 64; FA4's
head-256 kernel) are stricter and not checked."""
UNCHECKED_BLOCK = ("FLEX_ATTENTION",)
"""FLEX_ATTENTION takes any block in 0.18.0 (the base class's [MultipleOf(1)]) and multiples of 16 in 0.33.0: the
release between not read."""


def _mha_backend(gpu: Gpu) -> str:
    """``platforms/cuda.py _get_backend_priorities``, non-MLA: FLASHINFER first on SM10x, else FLASH_ATTN."""
    if gpu.vendor == "amd":
        return "TRITON_ATTN"
    if gpu.sm // 10 == 10:
        return "FLASHINFER"
    return "FLASH_ATTN" if gpu.sm >= 80 else "TRITON_ATTN"


def _mha_layout(dep: Deployment) -> tuple[str, list[Knob]]:
    """kv dtype and backend of a full-attention model: (dtype, knobs)."""
    gpu = dep.gpu
    check_serves("vllm", dep.engine_version, gpu, dsa=False, mha=True)
    dtype, dtype_why = vllm_knobs.kv_dtype(dep)
    if dtype == "fp8_ds_mla":
        raise PlanError("kv_cache_dtype fp8_ds_mla is FlashMLA's MLA row format: a full-attention model takes "
                        "auto, bf16, fp16, fp8, fp8_e4m3 or fp8_e5m2")  # fmt: skip
    if dep.mla_layout:
        raise PlanError("mla_layout applies to MLA models only: this model has full attention (MHA / GQA)")
    knobs = [Knob("kv_cache_dtype", dtype, dtype_why)]
    backend = dep.attention_backend or _mha_backend(gpu)
    check_backend("vllm", dep.engine_version, gpu, backend, dsa=False, fp8=dtype.startswith("fp8"), mha=True)
    where = platform_label(gpu)
    knobs.append(Knob("attention_backend", backend, "set" if dep.attention_backend else f"default: on {where}"))
    return dtype, knobs


def _layout(arch: ModelArch, dep: Deployment) -> tuple[MlaLayout, list[Knob]]:
    gpu, sm = dep.gpu, dep.gpu.sm
    where = platform_label(gpu)
    check_serves("vllm", dep.engine_version, gpu, dsa=arch.is_dsa)
    dtype = dep.kv_cache_dtype
    knobs: list[Knob] = []
    if dtype == "auto":
        fam = family_of(arch)
        dtype = fam.sm10x_kv_dtype if gpu.vendor == "nvidia" and sm // 10 == 10 else "auto"
        why = f"{fam.name} on SM10x sets {dtype}" if dtype != "auto" else f"auto = bf16 on {where}"
        knobs.append(Knob("kv_cache_dtype", dtype, f"default: {why}"))
    else:
        knobs.append(Knob("kv_cache_dtype", dtype, "set"))
    fp8 = dtype not in ("auto", "bf16", "bfloat16")
    backend = dep.attention_backend or _default_backend(arch, gpu, dtype)
    (used,) = check_backend("vllm", dep.engine_version, gpu, backend, dsa=arch.is_dsa, fp8=fp8)
    if dtype == "fp8_ds_mla" and used.raw_fp8:
        raise PlanError(
            f"kv_cache_dtype fp8_ds_mla is FlashMLA's format: {backend} on {where} stores raw fp8 rows; "
            "use FLASHMLA_SPARSE or kv_cache_dtype fp8"
        )
    knobs.append(Knob("attention_backend", backend, "set" if dep.attention_backend else f"default: {dtype} on {where}"))
    if dep.mla_layout:
        layout = MlaLayout(dep.mla_layout)
        knobs.append(Knob("mla_layout", layout.value, "set"))
        return layout, knobs
    if not fp8:
        layout = MlaLayout.BF16
    elif not arch.is_dsa or used.raw_fp8:
        layout = MlaLayout.FP8_RAW
    else:  # FLASHMLA_SPARSE: _canonicalize_sparse_mla_kv_cache_dtype rewrites fp8 to fp8_ds_mla
        layout = MlaLayout.FP8_DS_MLA
    knobs.append(Knob("mla_layout", layout.value, f"default: {backend} with {dtype}"))
    return layout, knobs
