"""Datasheet peaks per GPU: dense tensor FLOP/s by GEMM dtype and the NVLink bandwidth (HBM is gpus.yaml's).

Dense figures are the datasheets' sparse ones halved. Sources: NVIDIA H100 Tensor Core GPU datasheet (SXM:
BF16 1,979 TFLOPS / FP8 3,958 TFLOPS with sparsity, NVLink 900 GB/s); NVIDIA H200 datasheet (same compute as H100
SXM, NVLink 900 GB/s); NVIDIA HGX B200 datasheet (8 GPUs: FP4 144 PFLOPS, FP8 72 PFLOPS, BF16 36 PFLOPS with
sparsity, NVLink 5 1.8 TB/s per GPU); NVIDIA HGX B300 datasheet (8 GPUs: FP4 108 PFLOPS dense, FP8 and BF16 as
B200's, NVLink 1.8 TB/s).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.deploy import Gpu

TERA = 10**12
NET_BYTES_PER_S = 8 * 50 * 10**9
"""NCCL's bus bandwidth of an all-reduce across nodes: 8 × 400 Gb/s. A node has one ConnectX-7 NIC a GPU (NVIDIA
DGX H200 and DGX B200 datasheets: 8 × single-port ConnectX-7, up to 400 Gb/s InfiniBand / Ethernet) and NCCL runs
one ring a NIC, each carrying an eighth of the data over its own NIC (nccl-tests doc/PERFORMANCE.md: bus bandwidth
is what the slowest link sees), so the rings together cross nodes at the node's 8 NICs."""


@dataclass(frozen=True, kw_only=True)
class Peaks:
    """One GPU's peaks, ints per second; ``gpu_class`` keys the efficiency coefficients (kvplan.perf.coeffs)."""

    gpu_key: str
    gpu_class: str
    bf16_flops_per_s: int
    fp8_flops_per_s: int
    fp4_flops_per_s: int
    hbm_bytes_per_s: int
    link_bytes_per_s: int
    source: str
    net_bytes_per_s: int = NET_BYTES_PER_S
    """An all-reduce's bus bandwidth between nodes (a tp group larger than a node all-reduces over it)."""

    def flops_per_s(self, dtype: str) -> int:
        """Peak for a GEMM in ``dtype`` ('bf16', 'fp8', 'fp4', 'int4'); a dtype the GPU lacks runs at the next wider."""
        if dtype in ("fp4", "nvfp4", "mxfp4") and self.fp4_flops_per_s:
            return self.fp4_flops_per_s
        if dtype in ("fp8", "fp4", "nvfp4", "mxfp4"):
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s  # bf16, and int4 weight-only (dequantized to bf16 in the GEMM)


_HOPPER = ("hopper", 989 * TERA, 1979 * TERA, 0, 900 * 10**9, "H100/H200 SXM datasheets: 989 / 1,979 TFLOPS dense")
_BLACKWELL = ("blackwell", 2250 * TERA, 4500 * TERA, 9000 * TERA, 1800 * 10**9, "HGX B200 datasheet / 8, dense")
_BLACKWELL_ULTRA = ("blackwell", 2250 * TERA, 4500 * TERA, 13500 * TERA, 1800 * 10**9, "HGX B300 datasheet / 8, dense")
_TABLE = {
    "h100-sxm": _HOPPER,
    "h200": _HOPPER,
    "h200-nvl": _HOPPER,
    "b200": _BLACKWELL,
    "gb200": _BLACKWELL,
    "b300": _BLACKWELL_ULTRA,
    "gb300": _BLACKWELL_ULTRA,
}


def peaks_of(gpu: Gpu) -> Peaks | None:
    """The GPU's peaks, or None for a GPU without a datasheet row here (perf then refuses with one line)."""
    row = _TABLE.get(gpu.key)
    if row is None or not gpu.hbm_bandwidth_bytes_per_s:
        return None
    cls, bf16, fp8, fp4, link, src = row
    return Peaks(
        gpu_key=gpu.key,
        gpu_class=cls,
        bf16_flops_per_s=bf16,
        fp8_flops_per_s=fp8,
        fp4_flops_per_s=fp4,
        hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s,
        link_bytes_per_s=link,
        source=f"{src}; HBM {gpu.hbm_bandwidth_bytes_per_s / 1e12:.2f} TB/s (gpus.yaml)",
    )
