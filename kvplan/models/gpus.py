"""The GPU catalog (configs/gpus.yaml) -> Gpu: its spellings, the lookup by name, a custom GPU from --set gpu_memory."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models.deploy import Gpu
from kvplan.models.preset_cache import builtin_doc
from kvplan.models.presets import check_schema, configs_root
from kvplan.models.reader import Doc, Reader, _kind, _show
from kvplan.units import GiB, MiB

_GPU_KEYS = {
    "name", "nvml_total", "cuda_total", "sm", "gfx", "vendor", "hbm_bandwidth_per_s", "source", "aliases", "derived",
    "nvlink",
}  # fmt: skip
_GPU_DERIVABLE = ("nvml_total", "cuda_total")
_GPU_VENDOR_WORDS = ("nvidia", "amd", "geforce", "instinct", "radeon")
"""Words a GPU name may start with that name no model: ``NVIDIA GeForce RTX 4090`` is ``rtx-4090``."""
DERIVED_CUDA_RESERVE_BYTES = 512 * MiB
"""An NVIDIA GPU's CUDA total, where no public torch / cudaMemGetInfo figure was found (and for a custom GPU): its
NVML total less this, inside the 325-870 MiB driver reserves measured on H100, H200, B200, GB200 and A100
(reference C.1). ROCm reports the VRAM total itself. `kvplan probe` measures the real figure."""
GPU_SPEC_KNOBS = ("gpu_memory", "gpu_sm")
"""--set / YAML keys that describe a custom GPU together with ``gpu: custom`` (its NVML total and compute
capability); a deployment may instead give ``gpu`` as a mapping of gpus.yaml's keys."""


def gpu_key(name: str) -> str:
    """How GPU names are compared: case-insensitive, spaces and underscores as dashes, a leading vendor or brand
    word (NVIDIA, AMD, GeForce, Instinct, Radeon) dropped."""
    words = name.strip().lower().replace("_", " ").replace("-", " ").split()
    while len(words) > 1 and words[0] in _GPU_VENDOR_WORDS:
        words = words[1:]
    return "-".join(words)


@lru_cache(maxsize=1)
def _gpu_table() -> tuple[dict[str, Gpu], dict[str, str]]:
    """The catalog, and every spelling (key, alias, marketing name) -> catalog key; one spelling names one GPU."""
    doc = builtin_doc(configs_root(), "gpus.yaml", "gpus.yaml (built-in)")
    r = Reader(doc)
    check_schema(r)
    gpus = r.sub("gpus")
    catalog = {str(key): gpu_of(gpus.sub(key), str(key)) for key in gpus.data}
    spellings: dict[str, str] = {}
    for key, gpu in catalog.items():
        for spelling in (key, gpu.name, *gpu.aliases):
            other = spellings.setdefault(gpu_key(spelling), key)
            if other != key:
                gpus.sub(key).fail("aliases", f"{spelling!r} already names {other}: a spelling names one GPU")
    return catalog, spellings


def gpu_catalog() -> dict[str, Gpu]:
    return _gpu_table()[0]


def gpu_of(r: Reader, key: str) -> Gpu:
    """A GPU from a gpus.yaml entry or a deployment's ``gpu:`` mapping; a missing cuda_total is derived."""
    r.reject_unknown(_GPU_KEYS)
    vendor = r.get_choice("vendor", ("nvidia", "amd"), default="nvidia")
    nvml_total = r.get_bytes("nvml_total", required=True, minimum=limits.MIN_GPU_BYTES, maximum=limits.MAX_GPU_BYTES)
    derived = set(r.get_str_list("derived", _GPU_DERIVABLE) or ())
    if not r.has("cuda_total"):
        derived.add("cuda_total")
    reserve = 0 if vendor == "amd" else DERIVED_CUDA_RESERVE_BYTES
    aliases = r.data.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str | int) for a in aliases):
        r.fail("aliases", f"expected a list of names, got {_kind(aliases)}")
    gpu = Gpu(
        key=key,
        name=r.get_str("name", required=True),
        nvml_total_bytes=nvml_total,
        cuda_total_bytes=r.get_bytes(
            "cuda_total",
            default=max(nvml_total - reserve, limits.MIN_GPU_BYTES),
            minimum=limits.MIN_GPU_BYTES,
            maximum=limits.MAX_GPU_BYTES,
        ),
        sm=r.get_int("sm", default=0, minimum=0, maximum=1000),
        gfx=r.get_str("gfx", default=""),
        vendor=vendor,
        hbm_bandwidth_bytes_per_s=r.get_bytes("hbm_bandwidth_per_s", default=0, minimum=0, maximum=1 << 60),
        source=r.get_str("source", default=""),
        aliases=tuple(str(a) for a in aliases),
        derived=tuple(d for d in _GPU_DERIVABLE if d in derived),
        nvlink=r.get_choice("nvlink", ("full", "pairs", "none"), default="full"),
    )
    if gpu.sm and gpu.gfx:  # one vendor's architecture: an SM (NVIDIA) or a gfx target (AMD), never both
        r.fail("gfx", f"{gpu.gfx!r} beside sm {gpu.sm}: give sm for an NVIDIA GPU or gfx for an AMD one")
    if gpu.cuda_total_bytes > gpu.nvml_total_bytes:
        r.fail(
            "cuda_total",
            f"{gpu.cuda_total_bytes:,} B is above nvml_total ({gpu.nvml_total_bytes:,} B): CUDA reports NVML's total"
            " less the driver reserve, never more",
        )
    return gpu


def close_gpus(name: str, n: int = 3) -> list[str]:
    """Catalog keys whose spellings are closest to name (difflib), best first."""
    spellings = _gpu_table()[1]
    wanted = gpu_key(name)
    close = difflib.get_close_matches(wanted, list(spellings), n=4 * n, cutoff=0.5)
    close += [s for s in spellings if wanted and (wanted in s or s in wanted.split("-"))]
    return list(dict.fromkeys(spellings[s] for s in close))[:n]


def find_gpu(name: str) -> Gpu:
    """A catalog GPU by key, alias or name, case-insensitively: ``H100`` is h100-sxm, ``NVIDIA H20`` is h20,
    ``4090`` is rtx-4090, ``MI300`` is mi300x."""
    catalog, spellings = _gpu_table()
    key = spellings.get(gpu_key(name))
    if key is not None:
        return catalog[key]
    close = close_gpus(name)
    hint = f"closest: {', '.join(close)}" if close else f"{len(catalog)} are listed by `kvplan gpus`"
    raise InputError(
        f"unknown GPU {_show(name)} ({hint}); for another GPU: --set gpu=custom --set gpu_memory=...GiB"
        " (its NVML total) [--set gpu_sm=90], or a gpu: mapping in the deployment"
    )


def custom_gpu(values: dict[str, Any], blame: Callable[..., Reader]) -> None:
    """``gpu: custom`` with ``gpu_memory`` (and ``gpu_sm``) becomes a Gpu, through the same path as a gpu mapping."""
    spec = {k: values.pop(k) for k in GPU_SPEC_KNOBS if k in values}
    if values.get("gpu") != "custom":
        if spec:
            knob = next(iter(spec))
            gpu = values.get("gpu")
            what = f"the catalog's {gpu.name} has its own" if isinstance(gpu, Gpu) else "the catalog GPUs have their"
            blame(knob).fail(knob, f"{knob} describes a custom GPU: add gpu=custom ({what} memory and SM)")
        return
    if "gpu_memory" not in spec:
        blame("gpu").fail(
            "gpu", "gpu=custom needs gpu_memory=...GiB (the NVML total, e.g. 96GiB); optional gpu_sm=90 (the default)"
        )
    sm = spec.get("gpu_sm", 90)
    memory = spec["gpu_memory"]
    mapping = {
        "name": "custom GPU",
        "nvml_total": f"{memory}B",
        "sm": sm,
        "source": f"gpu=custom: gpu_memory {memory:,} B ({memory / GiB:.2f} GiB) as the NVML total, SM {sm}"
        + ("" if "gpu_sm" in spec else " (kvplan's default: Hopper)"),
    }
    values["gpu"] = gpu_of(Reader(Doc(mapping, blame("gpu_memory").doc.source)), "custom")
