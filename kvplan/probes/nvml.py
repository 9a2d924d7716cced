"""GPU facts from NVML (`nvidia-ml-py`, imported as `pynvml`), with torch's view where torch is installed."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any

from kvplan import DIST
from kvplan.errors import InputError, ProbeUnavailable
from kvplan.models.deploy import Gpu
from kvplan.models.gpus import find_gpu, gpu_catalog
from kvplan.probes.validate import load_torch  # quiet about a missing numpy

NVML_MEMORY_V2 = 0x02000028
"""nvmlMemory_v2: the versioned struct with `reserved` (driver/firmware)."""


@dataclass(frozen=True, kw_only=True)
class Process:
    pid: int
    used_bytes: int | None
    """None where NVML cannot say (containers, no PID namespace)."""


@dataclass(frozen=True, kw_only=True)
class GpuReading:
    index: int
    name: str
    uuid: str
    driver: str
    cuda_version: str
    sm: int
    total_bytes: int
    reserved_bytes: int | None
    """NVML v2 only; None when the driver answers only v1."""
    used_bytes: int
    free_bytes: int
    memory_api: str
    """'v2' or 'v1 (v2 unsupported)'."""
    processes: tuple[Process, ...]
    torch_free_bytes: int | None = None
    torch_total_bytes: int | None = None

    @property
    def usable_bytes(self) -> int:
        """What CUDA can allocate in all: NVML total less the driver reserve (v2), or the torch total."""
        if self.torch_total_bytes is not None:
            return self.torch_total_bytes
        return self.total_bytes - (self.reserved_bytes or 0)


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def load_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise ProbeUnavailable(
            f"NVML bindings are not installed: pip install '{DIST}[probe]' (it brings nvidia-ml-py)"
        ) from None
    return pynvml


def read_gpus(nvml: Any | None = None) -> tuple[GpuReading, ...]:
    """Every GPU NVML sees. Raises ProbeUnavailable (exit 3) for no library, no driver, no GPU or an NVML error."""
    nv = nvml if nvml is not None else load_nvml()
    try:
        nv.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise ProbeUnavailable(
            f"NVML could not start ({_text(e) or type(e).__name__}): no NVIDIA driver here?"
        ) from None
    try:
        count = nv.nvmlDeviceGetCount()
        if count == 0:
            raise ProbeUnavailable("NVML found no GPU on this machine")
        driver = _text(nv.nvmlSystemGetDriverVersion())
        try:
            cuda = nv.nvmlSystemGetCudaDriverVersion()
            cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except Exception:
            cuda_version = "unknown"
        return tuple(_read_one(nv, i, driver, cuda_version) for i in range(count))
    except ProbeUnavailable:
        raise
    except Exception as e:
        raise ProbeUnavailable(f"NVML failed while reading the GPUs: {_text(e) or type(e).__name__}") from None
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def _read_one(nv: Any, index: int, driver: str, cuda_version: str) -> GpuReading:
    h = nv.nvmlDeviceGetHandleByIndex(index)
    try:
        mem = nv.nvmlDeviceGetMemoryInfo(h, version=getattr(nv, "nvmlMemory_v2", NVML_MEMORY_V2))
        reserved: int | None = int(mem.reserved)
        api = "v2"
    except Exception:  # old drivers and WSL answer only v1: used = reserved + allocated
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        reserved = None
        api = "v1 (v2 unsupported)"
    try:
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(h)
        sm = int(major) * 10 + int(minor)
    except Exception:
        sm = 0
    try:
        procs = tuple(
            Process(pid=int(p.pid), used_bytes=getattr(p, "usedGpuMemory", None))
            for p in nv.nvmlDeviceGetComputeRunningProcesses(h)
        )
    except Exception:
        procs = ()
    return GpuReading(
        index=index,
        name=_text(nv.nvmlDeviceGetName(h)),
        uuid=_text(nv.nvmlDeviceGetUUID(h)),
        driver=driver,
        cuda_version=cuda_version,
        sm=sm,
        total_bytes=int(mem.total),
        reserved_bytes=reserved,
        used_bytes=int(mem.used),
        free_bytes=int(mem.free),
        memory_api=api,
        processes=procs,
    )


def with_torch(readings: tuple[GpuReading, ...]) -> tuple[GpuReading, ...]:
    """Add torch.cuda.mem_get_info for each device when torch and CUDA are there (no error otherwise)."""
    try:
        torch = load_torch()
    except ProbeUnavailable:
        return readings
    if not torch.cuda.is_available():
        return readings

    out = []
    for r in readings:
        try:
            free, total = torch.cuda.mem_get_info(r.index)
        except Exception:
            out.append(r)
            continue
        out.append(replace(r, torch_free_bytes=int(free), torch_total_bytes=int(total)))
    return tuple(out)


def match_catalog(reading: GpuReading) -> Gpu | None:
    """The catalog GPU of the same name (longest name match; NVML total breaks ties), or None."""
    try:
        return find_gpu(reading.name)  # the exact name or an alias first: "NVIDIA H200" is h200, not h200-nvl
    except InputError:
        pass
    name = reading.name.lower()
    candidates = [g for g in gpu_catalog().values() if g.name.lower() in name or name in g.name.lower()]
    if not candidates:
        return None
    return min(candidates, key=lambda g: (-len(g.name), abs(g.nvml_total_bytes - reading.total_bytes)))


def measured_gpu(reading: GpuReading, runtime_overhead: int) -> tuple[Gpu, int]:
    """A catalog-shaped Gpu from the live reading, and the pre-load free memory a server would see now
    (free memory less the CUDA context and NCCL buffers it takes before its baseline)."""
    base = match_catalog(reading)
    gpu = Gpu(
        key="probed",
        name=reading.name,
        nvml_total_bytes=reading.total_bytes,
        cuda_total_bytes=reading.usable_bytes,
        sm=reading.sm or (base.sm if base else 0),
        vendor="nvidia",
        hbm_bandwidth_bytes_per_s=base.hbm_bandwidth_bytes_per_s if base else 0,
        source=f"kvplan probe: GPU {reading.index} {reading.uuid}, driver {reading.driver}, NVML {reading.memory_api}",
    )
    free = reading.torch_free_bytes if reading.torch_free_bytes is not None else reading.free_bytes
    return gpu, max(free - runtime_overhead, 0)
