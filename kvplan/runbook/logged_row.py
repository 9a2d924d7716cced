"""The MLA row layout an SGLang log states through its own figures.

``KV Cache is allocated. #tokens: N, KV size: X GB`` prints the bytes of the pool tensors of N rows: with the
model's shape, that fixes the row the pool allocated. A server whose printed attention backends kvplan's backend
table refuses (SGLang 0.5.9 on ROCm ran ``prefill=flashmla_auto, decode=flashmla_kv`` with an fp8 cache,
ajith-sirra-amd/Issues GLM-5-FP8-MI355X-SGLANG-ERROR.md) still allocated a row the log states: 183.15 GB for
3,199,575 rows of GLM-5 is 61,464 B = 78 x (656 + 132), the fp8_ds_mla row, where kvplan's ROCm default is the
576-B raw row. The doctor compares like with like: the log's row with the same layout's allocation, never with
another layout's (or the budget's) row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.formats import MlaLayout
from kvplan.runbook.parse import Run

Allocated = Callable[[ModelArch, Deployment, int], "int | None"]
"""SGLang's pool tensors for exactly ``rows`` rows of a deployment (doctor._allocated_for_rows)."""


@dataclass(frozen=True)
class LoggedRow:
    """The layout whose allocation, and only it, covers the log's ``KV size`` for its ``#tokens``."""

    layout: MlaLayout
    allocated_bytes: int
    rows: int
    kv_text: str
    line: int

    @property
    def shown(self) -> str:
        return f"{self.layout.value} ({self.kv_text} GB for {self.rows:,} rows)"


def _candidates(fp8: bool) -> tuple[MlaLayout, ...]:
    return (MlaLayout.FP8_DS_MLA, MlaLayout.FP8_RAW) if fp8 else (MlaLayout.BF16,)


def logged_row(arch: ModelArch, dep: Deployment, fp8: bool, run: Run, allocated: Allocated) -> LoggedRow | None:
    """The MLA layout the log's KV size states, when exactly one layout of the cache's dtype family covers it."""
    if dep.engine != "sglang" or arch.kv_lora_rank <= 0 or not run.kv:
        return None
    k = run.kv[0]
    rows, kv = k.value.tokens, k.value.kv
    if kv is None or rows <= 0:
        return None
    fits: list[LoggedRow] = []
    for layout in _candidates(fp8):
        changed = replace(dep, mla_layout=layout.value, explicit=dep.explicit | {"mla_layout"})
        alloc = allocated(arch, changed, rows)
        if alloc is not None and kv.low_bytes <= alloc <= kv.high_bytes:
            fits.append(LoggedRow(layout, alloc, rows, kv.text, k.line))
    return fits[0] if len(fits) == 1 else None
