"""Efficiency coefficients as data: one row per (GPU class, engine, engine-version range, kernel family), each
naming the measured rows it was fitted on (benchmarks/perf_calibrate.py refits them and prints the held-out error).

A row's fields: the share of the datasheet peak the GEMMs and the attention kernels reach, the share of HBM
bandwidth a memory-bound part reaches, of NVLink an all-reduce reaches, the latency of one collective call and a
fixed per-step overhead (scheduler, launch, sampler). A deployment with no row of its own borrows the nearest
(same engine and GPU class, else same GPU class, else the first) and says so; its band then widens.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.versions import parse_version


@dataclass(frozen=True, kw_only=True)
class Coefficients:
    gpu_class: str
    engine: str
    versions: tuple[str, str]
    """[first, last] engine versions of the rows it was fitted on (inclusive)."""
    family: str
    """Kernel family: 'mla' (MLA and DSA), 'gqa' (GQA, sliding window, linear state)."""
    gemm_eff: float
    attention_eff: float
    mem_eff: float
    link_eff: float
    comm_us: float
    overhead_us: float
    fitted_on: str
    heldout_mape: tuple[float, float, float]
    """Held-out MAPE of TTFT, TPOT and throughput (fractions) on the rows the fit never saw."""

    @property
    def key(self) -> str:
        return f"{self.gpu_class} / {self.engine} {self.versions[0]}-{self.versions[1]} / {self.family}"

    def covers(self, version: str) -> bool:
        lo, hi = (parse_version(v) for v in self.versions)
        return lo <= parse_version(version) <= hi


TABLE: tuple[Coefficients, ...] = ()
"""Filled from benchmarks/perf_calibrate.py's output (each row's ``fitted_on`` names its rows)."""


def family_of(kinds: tuple[str, ...]) -> str:
    """The kernel family a model's attention kinds price under: MLA (and DSA) or the GQA family."""
    return "mla" if any(k in ("mla", "dsa") for k in kinds) else "gqa"


def coefficients_for(gpu_class: str, engine: str, version: str, family: str) -> tuple[Coefficients, str]:
    """The row fitted for this GPU class, engine, version and family, else the nearest one and what was borrowed
    ('' when the row is the deployment's own): same class, engine and family at another version, then same class
    and engine, then same class, then any row."""
    tiers = (
        (lambda c: c.gpu_class == gpu_class and c.engine == engine and c.family == family and c.covers(version), ""),
        (lambda c: c.gpu_class == gpu_class and c.engine == engine and c.family == family, "engine version"),
        (lambda c: c.gpu_class == gpu_class and c.engine == engine, "kernel family"),
        (lambda c: c.gpu_class == gpu_class, "engine and kernel family"),
        (lambda c: True, "GPU class, engine and kernel family"),
    )
    for match, what in tiers:
        for c in TABLE:
            if match(c):
                return c, (f"borrowed {c.key} for {gpu_class} / {engine} {version} / {family}: no row of its {what}"
                           if what else "")  # fmt: skip
    raise ValueError("kvplan.perf.coeffs.TABLE is empty")
