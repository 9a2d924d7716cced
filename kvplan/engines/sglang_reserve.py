"""SGLang's memory defaults by version: chunked_prefill_size and the decode CUDA-graph batch by GPU memory, and the
mem_fraction_static heuristic (a table by tp before 0.4.8, reserved MiB by GPU class to 0.5.2, the reserve sum from
0.5.3), each as the version's rules (kvplan/versions.py ``SglangRules.capacity`` / ``mem_fraction``) say (pure).
"""

from __future__ import annotations

from typing import Literal

from kvplan.models.deploy import Deployment
from kvplan.units import MiB
from kvplan.versions import SglangCapacity, sglang_rules


def capacity_defaults(gpu_mem_mib: int, tp: int, capacity: SglangCapacity = "0.5.10") -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda-graph max_bs) by GPU memory, as the version's rules say (``capacity``)."""
    gi = 1024
    if capacity == "0.4.0":  # ServerArgs 0.4.0-0.4.6 (sgl-project/sglang#2268)
        return (2048 if gpu_mem_mib < 25_000 else 8192), 160
    if capacity == "0.4.7":
        if gpu_mem_mib > 180_000:
            return 16384, 160
        return (2048 if gpu_mem_mib < 25_000 else 8192), 160
    if capacity == "0.4.8":
        if gpu_mem_mib < 35 * gi:
            return 2048, (8 if tp < 4 else 80)
        return (8192 if gpu_mem_mib < 160 * gi else 16384), 160
    if gpu_mem_mib < 20 * gi:
        return 2048, 8
    if gpu_mem_mib < 35 * gi:
        if capacity in ("0.5.3", "0.5.5"):  # _handle_gpu_memory_settings of 0.5.3-0.5.9
            return 2048, (16 if capacity == "0.5.3" else 24) if tp < 4 else 80
        return 4096, 48 if tp < 4 else 160
    if gpu_mem_mib < 60 * gi:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem_mib < 90 * gi:
        return 8192, 256 if tp < 4 else 512
    if gpu_mem_mib < 160 * gi:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def prefill_graph_batch_sizes(max_bs: int) -> tuple[int, ...]:
    """``cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes``: the prefill capture sizes up to ``max_bs``.

    >>> len(prefill_graph_batch_sizes(8192))   # 8 + 14 + 8 + 8 + 12 + 8
    58
    """
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_bs + 1, 512))
    )
    return tuple(x for x in sizes if x <= max_bs)


MEM_FRACTION_BY_TP = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
"""SGLang 0.4.0-0.4.7 ``ServerArgs.__post_init__``: mem_fraction_static by tp_size (the first row whose tp is <= tp)."""


def _mem_fraction_by_tp(tp: int, label: str = "SGLang 0.4.0-0.4.5 table by tp") -> tuple[float, str, int]:
    """The 0.4.0-0.4.5 default: a fixed table by tp, no reserve arithmetic (reserved MiB reported as 0)."""
    at, mfs = next((t, f) for t, f in MEM_FRACTION_BY_TP if tp >= t)
    return mfs, f"{label}: tp {tp} >= {at} -> {mfs}", 0


def _mem_fraction_0_4(
    dep: Deployment, kind: Literal["by_tp_0.4.6", "by_tp_0.4.7"], gpu_mem: int
) -> tuple[float, str, int]:
    """The 0.4.6 and 0.4.7 defaults (``ServerArgs.__post_init__``); gpu_mem is the nvidia-smi total in MiB."""
    if kind == "by_tp_0.4.6":
        if gpu_mem <= 81920:
            return _mem_fraction_by_tp(dep.tp, f"SGLang 0.4.6, {gpu_mem:,} MiB <= 81,920: table by tp")
        mfs = (gpu_mem - 1024 * 13) / gpu_mem
        return mfs, f"SGLang 0.4.6: ({gpu_mem:,} − 13,312 MiB) / {gpu_mem:,} MiB (unrounded)", 13 * 1024
    ps = dep.tp * dep.pp
    if gpu_mem <= 81920:
        base, why, _ = _mem_fraction_by_tp(ps, f"SGLang 0.4.7, {gpu_mem:,} MiB <= 81,920: table by tp × pp")
    else:
        base, why = 0.88, f"SGLang 0.4.7: {gpu_mem:,} MiB > 81,920 -> 0.88"
    if gpu_mem > 180 * 1000 and dep.gpu.vendor == "nvidia":
        return 0.79, f"SGLang 0.4.7: {gpu_mem:,} MiB > 180,000 on CUDA -> 0.79", 0
    if gpu_mem > 96 * 1024:
        reserve = 1024 * (20 if dep.mtp else 18)
        relaxed = base + 48 * 1024 * (1 - base) / gpu_mem
        capped = (gpu_mem - reserve) / gpu_mem
        why = (
            f"SGLang 0.4.7: min({base} + 49,152 × (1 − {base}) / {gpu_mem:,}, ({gpu_mem:,} − {reserve:,}) / "
            f"{gpu_mem:,}) MiB"
        )
        return min(relaxed, capped), why, reserve
    if dep.mtp:
        return base * 0.95, why + " × 0.95 (EAGLE)", 0
    return base, why, 0


def _mem_fraction_gpu_class(dep: Deployment, gpu_mem: int, mtp_mib: int) -> tuple[float, str, int]:
    """0.4.8-0.5.2 (sgl-project/sglang#7054): reserved memory by GPU class, + EAGLE, + 4 GiB with dp attention."""
    ps = dep.tp * dep.pp
    gi = 1024
    if gpu_mem < 35 * gi:
        reserved, part = (2.8 + ps / 10) * gi, f"(2.8 + tp×pp {ps} / 10) × 1024"
    elif gpu_mem < 90 * gi:
        reserved, part = (9.5 + ps / 2) * gi, f"(9.5 + tp×pp {ps} / 2) × 1024"
    elif gpu_mem < 160 * gi:
        reserved, part = (12 + ps / 2) * gi, f"(12 + tp×pp {ps} / 2) × 1024"
    else:
        reserved, part = 32.0 * gi, "32 × 1024"
    parts = [part]
    if dep.mtp:
        reserved += mtp_mib
        parts.append(f"EAGLE/MTP {mtp_mib}")
    if dep.dp_attention > 1:
        reserved += 4 * gi
        parts.append("dp attention 4096")
    mfs = round((gpu_mem - reserved) / gpu_mem, 3)
    why = f"round(({gpu_mem:,} MiB − {reserved:,g} MiB reserved) / {gpu_mem:,} MiB, 3); reserved = " + " + ".join(parts)
    return mfs, why, int(reserved)


def default_mem_fraction(
    dep: Deployment, *, chunk: int, max_bs: int, version: str, mla: bool = True
) -> tuple[float, str, int]:
    """SGLang's reserve heuristic: (mem_fraction_static, explanation, reserved MiB), as the version's rules say.

    The prefill-graph part (``memory_hook.reserve_for_graph_mb``) is 1.5 × 1024 MiB with an MLA backend, else
    ``len(prefill bs) × 8`` with the prefill graph's max_bs = chunked_prefill_size (capped by max_total_tokens).
    With ``disable_cuda_graph`` neither the decode graph nor the prefill graph is reserved (0.5.10 and later;
    0.5.3-0.5.9 always charged ``max_bs × 2``). Before 0.5.3 the heuristic is a table (``rules.mem_fraction``).
    """
    rules = sglang_rules(version)
    gpu_mem = dep.gpu.nvml_total_bytes // MiB
    if rules.mem_fraction == "by_tp":
        return _mem_fraction_by_tp(dep.tp)
    if rules.mem_fraction in ("by_tp_0.4.6", "by_tp_0.4.7"):
        return _mem_fraction_0_4(dep, rules.mem_fraction, gpu_mem)
    if rules.mem_fraction == "gpu_class":
        return _mem_fraction_gpu_class(dep, gpu_mem, rules.mtp_reserve_mib)
    old = rules.mem_fraction == "reserve_0.5.3"
    decode_graph = not dep.disable_cuda_graph
    parts: list[str] = []
    if old:
        reserved = 512 + max(chunk, 2048) * 1.5 + max_bs * 2 + dep.tp * dep.pp / 8 * 1024
        parts.append(f"512 + max({chunk}, 2048)×1.5 + {max_bs}×2 + tp{dep.tp}×pp{dep.pp}/8×1024")
    else:
        reserved = 512 + max(chunk, 2048) * 1.5 + dep.tp * dep.pp / 8 * 1024
        parts.append(f"512 + max({chunk}, 2048)×1.5 + tp{dep.tp}×pp{dep.pp}/8×1024")
        if decode_graph:
            reserved += max_bs * 2
            parts.append(f"decode graph {max_bs}×2")
    if dep.dp_attention > 1:
        dp_terms = max_bs * dep.dp_attention * 3 + (max_bs * dep.dp_attention * 1.5 if max_bs > 300 else 0)
        reserved += dp_terms
        parts.append(f"dp-attention {dp_terms:g}")
    prefill_graph = decode_graph and dep.dcp == 1 and dep.pp == 1 and rules.prefill_graph
    if prefill_graph and mla:
        reserved += 1536
        parts.append("MLA prefill graph 1536")
    elif prefill_graph:
        graph_bs = chunk if dep.max_total_tokens is None else min(chunk, dep.max_total_tokens)
        n = len(prefill_graph_batch_sizes(graph_bs))
        reserved += n * 8
        parts.append(f"prefill graph {n} sizes × 8")
    elif rules.prefill_graph:
        parts.append("no prefill graph (dcp > 1 or pp > 1 disables it)" if decode_graph else "")
    if gpu_mem > 60 * 1024 and reserved < 10 * 1024:  # the sum above is not the figure when the floor binds
        reserved = 10 * 1024
        parts.append("raised to the 10,240 floor over 60 GiB")
    if rules.mtp_reserve_mib and dep.mtp:
        reserved += rules.mtp_reserve_mib
        parts.append(f"EAGLE/MTP {rules.mtp_reserve_mib}")
    mfs = round((gpu_mem - reserved) / gpu_mem, 3)
    why = f"round(({gpu_mem:,} MiB − {reserved:,g} MiB reserved) / {gpu_mem:,} MiB, 3); reserved = " + " + ".join(
        p for p in parts if p
    )
    return mfs, why, int(reserved)
