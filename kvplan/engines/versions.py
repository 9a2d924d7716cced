"""Engine versions as data: one table per engine, keyed by version ranges.

Each row holds the rules that changed between versions and the release, commit or source that changed them.
``sglang_rules`` / ``vllm_rules`` take any version string (``0.5.23``, ``v0.11.0``, ``0.4.6.post1``,
``0.33.0rc1``) and return the row in force then; a version outside every modelled range is an ``InputError``
naming the ranges kvplan models (never a silent fallback). A pre-release or post-release takes the rules of
its release (``0.33.0rc1`` -> the row holding 0.33.0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.errors import InputError

Version = tuple[int, ...]

_VERSION = re.compile(
    r"v?(?P<release>\d{1,6}(?:\.\d{1,6}){0,3})"
    r"(?:[-_.]?(?:a|b|rc|alpha|beta|pre|preview|c)[-_.]?\d{0,6})?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?\d{0,6})?"
    r"(?:[-_.]?dev[-_.]?\d{0,6})?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?",
    re.IGNORECASE,
)
"""PEP 440-ish: an optional ``v``, up to four release numbers, then pre / post / dev parts and a local label."""


def parse_version(text: str) -> Version:
    """The release numbers of a version string, padded to three: ``v0.11`` -> (0, 11, 0).

    >>> parse_version("0.4.6.post1"), parse_version("v0.11.0"), parse_version("0.33.0rc1")
    ((0, 4, 6), (0, 11, 0), (0, 33, 0))
    """
    m = _VERSION.fullmatch(text)  # no stripping: the loaders strip; a stray newline is not a version
    if m is None or len(text) > 64:
        shown = text if len(text) <= 64 else text[:64] + "..."
        raise InputError(f"engine_version {shown!r} is not a version (expected e.g. 0.5.23, v0.11.0, 0.4.6.post1)")
    release = tuple(int(x) for x in m.group("release").split("."))
    return release + (0,) * (3 - len(release))


def _show(v: Version) -> str:
    return ".".join(str(x) for x in v)


@dataclass(frozen=True, kw_only=True)
class _Range:
    engine: str
    since: Version
    """First version of the range (inclusive)."""
    until: Version
    """First version past the range (exclusive)."""
    label: str
    """How the range is named in the output, e.g. '0.5.10-0.5.23'."""
    reference: str
    """The version whose source kvplan read for this row."""
    cite: str
    """The release, commit or source that set these rules."""
    modelled: bool = True
    why_not: str = ""
    """For a recognised but unmodelled range: why, said in the error."""

    def holds(self, v: Version) -> bool:
        return self.since <= v < self.until

    def describe(self, version: str) -> str:
        """'SGLang 0.5.6 -> rules of 0.5.0-0.5.8 (...)'."""
        name = "SGLang" if self.engine == "sglang" else "vLLM"
        return f"{name} {version} -> rules of {self.label} ({self.cite})"


@dataclass(frozen=True, kw_only=True)
class SglangRules(_Range):
    mem_fraction: str
    """Default mem_fraction_static heuristic: 'by_tp' (0.4.x table), 'reserve_0.5.9' (512 + chunk × 1.5 + max_bs × 2
    + tp × pp / 8 × 1024, EAGLE + 2 GiB), 'reserve_0.5.23' (+ the prefill CUDA graph, decode graph only when on)."""
    cell_raw_mla_row: bool = False
    """The budget charges (kv_lora_rank + rope) × kv_size per layer whatever row the pool allocates (0.5.9)."""
    indexer_all_layers: bool = False
    """The DSA indexer is budgeted and allocated on every layer (0.5.9), not on the full layers only."""
    dsa: bool = True
    """The version serves DSA (NSA) models at all."""
    dcp: bool = True
    """Decode context parallel exists."""
    mtp_reserve_mib: int = 0
    """MiB the mem-fraction heuristic adds for EAGLE / MTP."""
    prefill_graph: bool = True
    """The heuristic reserves a prefill CUDA graph."""


@dataclass(frozen=True, kw_only=True)
class VllmRules(_Range):
    cudagraph_in_budget: bool
    """The profiled CUDA-graph estimate is subtracted from the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    default on); before, graphs were captured after the pool, in the (1 − utilization) headroom."""
    default_utilization: float
    utilization_cite: str


SGLANG: tuple[SglangRules, ...] = (
    SglangRules(
        engine="sglang",
        since=(0, 4, 0),
        until=(0, 5, 0),
        label="0.4.x",
        reference="0.4.x server_args",
        cite="ServerArgs.__post_init__ of 0.4.x: mem_fraction_static by tp (0.88 / 0.87 / 0.85 / 0.81 / 0.79), "
        "seen as 0.88 at tp 1 in the SGLang 0.4.1 docs-build log (tests/data/logs/field)",
        mem_fraction="by_tp",
        dsa=False,
        dcp=False,
        prefill_graph=False,
    ),
    SglangRules(
        engine="sglang",
        since=(0, 5, 0),
        until=(0, 5, 9),
        label="0.5.0-0.5.8",
        reference="",
        cite="recognised: the 2025 builds between the 0.4.x tp table and 0.5.9",
        modelled=False,
        mem_fraction="",
        why_not="its memory-fraction heuristic, DSA row layout and indexer budget changed within the range "
        "and kvplan has not read them from the source; use engine_version 0.5.9 or 0.5.23 and set "
        "mem_fraction_static from the log's ServerArgs",
    ),
    SglangRules(
        engine="sglang",
        since=(0, 5, 9),
        until=(0, 5, 10),
        label="0.5.9",
        reference="0.5.9",
        cite="sglang==0.5.9 wheel, shared/reference/sglang-0.5.23.md §10: get_cell_size_per_token charges "
        "(kv_lora_rank + rope) × kv_size and the indexer on every layer; no dcp; +2 GiB EAGLE reserve",
        mem_fraction="reserve_0.5.9",
        cell_raw_mla_row=True,
        indexer_all_layers=True,
        dcp=False,
        mtp_reserve_mib=2048,
        prefill_graph=False,
    ),
    SglangRules(
        engine="sglang",
        since=(0, 5, 10),
        until=(0, 5, 24),
        label="0.5.10-0.5.23",
        reference="0.5.23",
        cite="sglang==0.5.23 wheel, shared/reference/sglang-0.5.23.md §2: indexer on full layers only, cell "
        "from the allocated row, dcp, memory_hook.reserve_for_graph_mb",
        mem_fraction="reserve_0.5.23",
    ),
)
"""SGLang rows in version order."""

VLLM: tuple[VllmRules, ...] = (
    VllmRules(
        engine="vllm",
        since=(0, 6, 0),
        until=(0, 9, 0),
        label="0.6-0.8 (V0)",
        reference="",
        cite="recognised: the V0 engine (worker.py determine_num_available_blocks, '# GPU blocks' log line)",
        modelled=False,
        why_not="V0 sizes the pool as gpu_memory_utilization × total − peak and logs '# GPU blocks'; kvplan "
        "models the V1 engine only (0.9 and later)",
        cudagraph_in_budget=False,
        default_utilization=0.9,
        utilization_cite="",
    ),
    VllmRules(
        engine="vllm",
        since=(0, 9, 0),
        until=(0, 21, 0),
        label="0.9-0.20 (V1, CUDA graphs outside the budget)",
        reference="",  # no source read: the 0.33.0 rules less the CUDA-graph estimate, checked on 0.19.0 logs
        cite="the 0.21.0 log line 'CUDA graph memory profiling is enabled (default since v0.21.0)' "
        "(v1/worker/gpu_worker.py, shared/reference/vllm-0.33.0.md §4); vLLM 0.19.0 logs: 'Total non KV cache "
        "memory' = weights + torch peak + non-torch, no graph term (tests/data/logs/field)",
        cudagraph_in_budget=False,
        default_utilization=0.9,
        utilization_cite="EngineArgs default 0.9 (docs.vllm.ai v0.6.4 engine args, vllm-project/vllm#2162); 0.92 "
        "by 0.33.0, the release that changed it not pinned: set gpu_memory_utilization from the log's args",
    ),
    VllmRules(
        engine="vllm",
        since=(0, 21, 0),
        until=(0, 34, 0),
        label="0.21-0.33 (V1, CUDA-graph estimate in the budget)",
        reference="0.33.0",
        cite="vllm 0.33.0 wheel, shared/reference/vllm-0.33.0.md §4: available = ceil(total × util) − non_kv − "
        "cudagraph_estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default on since v0.21.0)",
        cudagraph_in_budget=True,
        default_utilization=0.92,
        utilization_cite="vLLM 0.33.0 default",  # config/cache.py:215
    ),
)
"""vLLM rows in version order."""


def _lookup(rows: tuple[SglangRules, ...] | tuple[VllmRules, ...], engine: str, version: str) -> _Range:
    v = parse_version(version)
    for row in rows:
        if row.holds(v):
            if not row.modelled:
                raise InputError(
                    f"engine_version {version}: {engine} {version} is not modelled: {_name(engine)} {row.label} "
                    f"is recognised, but {row.why_not} (kvplan models {modelled_ranges(engine)})"
                )
            return row
    raise InputError(
        f"engine_version {version}: {engine} {version} is not modelled: {_show(v)} is outside every range "
        f"kvplan models ({modelled_ranges(engine)})"
    )


def _name(engine: str) -> str:
    return "SGLang" if engine == "sglang" else "vLLM"


def modelled_ranges(engine: str) -> str:
    """'SGLang 0.4.x, 0.5.9, 0.5.10-0.5.23; source read: 0.5.9, 0.5.23' for the error messages."""
    rows = SGLANG if engine == "sglang" else VLLM
    read = ", ".join(r.reference for r in rows if r.modelled and r.reference[:1].isdigit())
    return f"{_name(engine)} " + ", ".join(r.label for r in rows if r.modelled) + f"; source read: {read}"


def sglang_rules(version: str) -> SglangRules:
    row = _lookup(SGLANG, "sglang", version)
    assert isinstance(row, SglangRules)
    return row


def vllm_rules(version: str) -> VllmRules:
    row = _lookup(VLLM, "vllm", version)
    assert isinstance(row, VllmRules)
    return row


def rules_for(engine: str, version: str) -> SglangRules | VllmRules:
    """The row in force for ``version`` of ``engine`` (an InputError outside the modelled ranges)."""
    return sglang_rules(version) if engine == "sglang" else vllm_rules(version)


def rules_note(engine: str, version: str) -> str | None:
    """What the output says when ``version`` is not the row's own reference version; None when it is."""
    row = rules_for(engine, version)
    return None if version == row.reference else row.describe(version)
