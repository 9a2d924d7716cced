"""A stand-in for the `pynvml` module, enough for kvplan.probes.nvml."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

MiB = 1 << 20


class NVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-1111-2222-3333-444444444444"
    total: int = 143_771 * MiB
    reserved: int = 615 * MiB
    used: int = 0
    cc: tuple[int, int] = (9, 0)
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    fail_on: str = ""


class FakeNvml:
    nvmlMemory_v2 = 0x02000028

    def __init__(self, gpus: list[FakeGpu], *, v2: bool = True, init_error: str = "") -> None:
        self.gpus = gpus
        self.v2 = v2
        self.init_error = init_error
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.03"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 13000

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        return self.gpus[i]

    def _maybe_fail(self, g: FakeGpu, what: str) -> None:
        if g.fail_on == what:
            raise NVMLError(f"GPU is lost ({what})")

    def nvmlDeviceGetMemoryInfo(self, g: FakeGpu, version: Any = None) -> SimpleNamespace:
        self._maybe_fail(g, "memory")
        if version is not None:
            if not self.v2:
                raise NVMLError("Function Not Found")
            free = g.total - g.reserved - g.used
            return SimpleNamespace(version=version, total=g.total, reserved=g.reserved, free=free, used=g.used)
        return SimpleNamespace(total=g.total, free=g.total - g.reserved - g.used, used=g.reserved + g.used)

    def nvmlDeviceGetName(self, g: FakeGpu) -> bytes:
        self._maybe_fail(g, "name")
        return g.name.encode()

    def nvmlDeviceGetUUID(self, g: FakeGpu) -> str:
        return g.uuid

    def nvmlDeviceGetCudaComputeCapability(self, g: FakeGpu) -> tuple[int, int]:
        return g.cc

    def nvmlDeviceGetComputeRunningProcesses(self, g: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=u) for p, u in g.processes]
