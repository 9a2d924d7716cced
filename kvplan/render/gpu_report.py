"""`kvplan gpus`: the GPU catalog (configs/gpus.yaml) as a table, JSON or Markdown."""

from __future__ import annotations

from kvplan.models.deploy import Gpu
from kvplan.render import Report, Section, size
from kvplan.units import GiB, MiB


def _total(n: int) -> str:
    """A GPU total as nvidia-smi prints it, in MiB, and in GiB: '143,771 MiB (140.40 GiB)'; a total that is no
    whole number of MiB (a datasheet's GB) in GiB and GB: '119.21 GiB (128.00 GB)'."""
    return f"{n // MiB:,} MiB ({n / GiB:,.2f} GiB)" if n % MiB == 0 else size(n)


def _bandwidth(n: int) -> str:
    """Memory bandwidth in the vendors' decimal units: '4.80 TB/s', '864 GB/s'; 'n/a' when the catalog has none."""
    if n <= 0:
        return "n/a"
    return f"{n / 1e12:g} TB/s" if n >= 10**12 else f"{n / 1e9:g} GB/s"


def _arch(g: Gpu) -> str:
    return g.gfx or (f"SM {g.sm}" if g.sm else "n/a")


def gpus_report(catalog: dict[str, Gpu], derived_cuda_reserve: int) -> Report:
    """Every catalog GPU: names, totals (measured or derived), architecture, bandwidth, and where each came from."""
    rows = []
    sources = []
    data = []
    for key, g in catalog.items():
        derived = ", ".join(d.replace("_total", "") for d in g.derived) or "-"
        rows.append(
            (key, g.name, ", ".join(g.aliases) or "-", _total(g.nvml_total_bytes), _total(g.cuda_total_bytes),
             _arch(g), _bandwidth(g.hbm_bandwidth_bytes_per_s), derived)
        )  # fmt: skip
        sources.append((key, g.source))
        data.append(
            {
                "key": key,
                "name": g.name,
                "aliases": list(g.aliases),
                "vendor": g.vendor,
                "total_label": g.total_label,
                "nvml_total_bytes": g.nvml_total_bytes,
                "cuda_total_bytes": g.cuda_total_bytes,
                "sm": g.sm,
                "gfx": g.gfx or None,
                "hbm_bandwidth_bytes_per_s": g.hbm_bandwidth_bytes_per_s,
                "derived": list(g.derived),
                "source": g.source,
            }
        )
    notes = (
        "NVML total: memory.total as nvidia-smi reports it (on AMD: the VRAM total of amd-smi / rocm-smi);"
        " CUDA total: what cudaMemGetInfo / torch report (NVML total less the driver reserve)",
        "derived: nvml = the datasheet's capacity, no public nvidia-smi / amd-smi figure seen; cuda = the NVML total"
        f" less {derived_cuda_reserve // MiB} MiB on NVIDIA (the VRAM total on AMD), no public torch figure seen;"
        " `kvplan probe` measures both on a real GPU",
        "--set gpu=NAME takes a key, an alias or the name nvidia-smi prints, in any case (H100, 4090, NVIDIA H20,"
        " MI300); any other GPU: --set gpu=custom --set gpu_memory=96GiB [--set gpu_sm=90]",
    )
    return Report(
        "gpus",
        f"GPU catalog: {len(catalog)} GPUs (configs/gpus.yaml)",
        (
            Section(
                "",
                tuple(rows),
                ("gpu", "name", "aliases", "NVML total", "CUDA total", "arch", "bandwidth", "derived (not measured)"),
            ),
            Section("Sources", tuple(sources), ("gpu", "source")),
        ),
        {"gpus": data, "derived_cuda_reserve_bytes": derived_cuda_reserve},
        notes=notes,
    )
