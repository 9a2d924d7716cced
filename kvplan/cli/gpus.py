from __future__ import annotations

from kvplan.cli._common import FormatOpt, boundary
from kvplan.render import OutputFormat, emit


def gpus(fmt: FormatOpt = OutputFormat.table) -> None:
    """List the GPU catalog: names and aliases, NVML and CUDA totals, SM or gfx, bandwidth, and each figure's source.

    Example: kvplan gpus --format json
    """
    with boundary():
        from kvplan.models.gpus import DERIVED_CUDA_RESERVE_BYTES, gpu_catalog
        from kvplan.render.gpu_report import gpus_report

        emit(gpus_report(gpu_catalog(), DERIVED_CUDA_RESERVE_BYTES), fmt)
