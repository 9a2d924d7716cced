"""SGLang's SWA pool sized from the running-request cap (``SWARequestCapPoolConfigurator``), as SGLang 0.5.23 sizes
it. Source: the sglang 0.5.23 release wheel, ``sglang/srt/model_executor/pool_configurator.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.engines.common import Knob, PoolPlan, Term
from kvplan.engines.sglang_reserve import capacity_defaults
from kvplan.models.deploy import Deployment
from kvplan.units import MiB, cdiv
from kvplan.versions import sglang_rules

if TYPE_CHECKING:
    from kvplan.engines.sglang_hybrid_sizer import HybridSizer

CHUNKS_IN_FLIGHT = 2
"""``compute_swa_request_cap``: ``1 if disable_overlap_schedule else 2``; the overlap scheduler is SGLang's default
and kvplan has no knob to turn it off."""


# How SGLang 0.5.23 sizes the capped SWA pool:
#
# ``create_memory_pool_configurator`` picks it over ``HybridSWAPoolConfigurator`` when ``is_applicable``:
# --max-running-requests given, --disable-radix-cache, a positive chunked_prefill_size (outside a decode server), a
# sliding window and at least one full-attention layer. ``compute_swa_request_cap`` without speculative decoding,
# outside a disaggregated decode server:
#
#     trailing    = window + SGLANG_SWA_EVICTION_INTERVAL × 1 + page      (padding keeps the eviction point aligned)
#     per_request = trailing + page                                      (decode_alloc: one page)
#     cap         = per_request × max(1, max_running_requests // attn_dp) + chunks_in_flight × chunked_prefill_size
#                   + page                                               (2 chunks in flight with the overlap scheduler)
#
# ``calculate_pool_sizes``: swa = ceil_align(cap, page); full = int((available − swa × swa_cell) // full_cell) // page
# × page ("SWA pool cap (...) leaves no room for the full KV pool" when ≤ 0); no ``validate_swa_pool_size``.
# ``calculate_pool_sizes_from_max_tokens`` (--max-total-tokens): full = cap // page × page, swa = min(swa, cap).
@dataclass(frozen=True)
class SwaRequestCap:
    """The SWA pool's fixed size when SWARequestCapPoolConfigurator applies."""

    window: int
    eviction_interval: int
    running: int
    """max(1, --max-running-requests // attn_dp_size)."""
    chunk: int
    """chunked_prefill_size."""

    def tokens(self, page: int) -> int:
        """ceil_align(compute_swa_request_cap, page).

        >>> SwaRequestCap(window=8, eviction_interval=4, running=2, chunk=16).tokens(4)   # (8+4+4+4) × 2 + 2 × 16 + 4
        76
        """
        per_request = self.window + max(1, self.eviction_interval) + page + page
        cap = per_request * self.running + CHUNKS_IN_FLIGHT * self.chunk + page
        return cdiv(cap, page) * page

    def pool_tokens(self, available: int, *, full_cell: int, swa_cell: int, page: int) -> tuple[int, int]:
        """(full_tokens, swa_tokens) of ``calculate_pool_sizes``: the cap's SWA bytes first, the rest to full."""
        swa = self.tokens(page)
        full = int((available - swa * swa_cell) // full_cell) // page * page
        return max(full, 0), swa

    def capped(self, max_total: int, page: int) -> int:
        """``calculate_pool_sizes_from_max_tokens``: the SWA pool under --max-total-tokens."""
        return min(self.tokens(page), max_total)

    def applies(self, *, radix_disabled: bool, full_layers: int) -> bool:
        """``SWARequestCapPoolConfigurator.is_applicable`` once --max-running-requests is given (and a window)."""
        return radix_disabled and self.chunk > 0 and full_layers > 0


def request_cap_for(dep: Deployment, *, window: int, eviction_interval: int, full_layers: int) -> SwaRequestCap | None:
    """The cap when SGLang would pick SWARequestCapPoolConfigurator for this deployment, else None.

    chunked_prefill_size not given: SGLang's default by GPU memory (kvplan.engines.sglang_reserve ``capacity_defaults``,
    the value ``get_schedule().chunked_prefill_size`` holds when the configurator runs)."""
    if dep.max_running_requests is None:
        return None
    chunk = dep.chunked_prefill_size
    if chunk is None:
        gpu_mib = dep.gpu.nvml_total_bytes // MiB
        chunk = capacity_defaults(gpu_mib, dep.tp, sglang_rules(dep.engine_version).capacity)[0]
    running = max(1, dep.max_running_requests // max(dep.dp_attention, 1))
    cap = SwaRequestCap(window=window, eviction_interval=eviction_interval, running=running, chunk=chunk)
    return cap if cap.applies(radix_disabled=dep.disable_radix_cache, full_layers=full_layers) else None


def swa_pool_story(p: PoolPlan, s: HybridSizer) -> tuple[list[Knob], Term, str]:
    """The SWA pool's knobs, chain term and note on a sliding-window hybrid's plan (ratio or request cap)."""
    assert s.swa is not None
    page, swa_tokens, swa_cell = p.page_tokens, int(p.extras["swa_tokens"]), s.swa_cell(p.kv_dtype, p.attn_tp)
    dep = p.deployment
    knobs = [
        Knob(
            "swa_eviction_interval",
            s.eviction_interval,
            "set" if dep.swa_eviction_interval is not None else "default: 128 (SGLANG_SWA_EVICTION_INTERVAL)",
        )
    ]
    if s.swa_cap is None:
        set_ratio = dep.swa_full_tokens_ratio is not None
        knobs.append(Knob("swa_full_tokens_ratio", s.swa_full_tokens_ratio, "set" if set_ratio else "default: 0.8"))
        how = (
            f"swa_layer_tokens {swa_tokens:,} = int(full_layer_tokens {p.rows:,} × {s.swa_full_tokens_ratio})"
            f" // {page} × {page}; cell = full + {s.swa_full_tokens_ratio} × {swa_cell:,} B"
        )
        radix = "ASSUMPTION: radix cache on and no --enable-unified-memory (SGLang's defaults)"
        if dep.disable_radix_cache:
            radix = "radix cache off without --max-running-requests: the ratio still sizes it"
    else:
        c = s.swa_cap
        if dep.swa_full_tokens_ratio is not None:
            knobs.append(Knob("swa_full_tokens_ratio", dep.swa_full_tokens_ratio, "set; not applied: the request cap"))
        how = (
            f"swa_layer_tokens {swa_tokens:,} = ceil_align((window {c.window} + {c.eviction_interval} + {page} + "
            f"{page}) × {c.running} requests + {CHUNKS_IN_FLIGHT} × chunk {c.chunk:,} + {page}, {page}) "
            "(SWARequestCapPoolConfigurator: --disable-radix-cache with --max-running-requests)"
        )
        radix = "ASSUMPTION: overlap scheduler on (2 prefill chunks in flight), no speculative decoding"
    note = (
        f"SWA pool: a request keeps at most its window {s.swa.window} + {s.eviction_interval} tokens "
        f"(SGLANG_SWA_EVICTION_INTERVAL) + 2 pages there; {radix}"
    )
    return knobs, Term("SWA pool", p.extras["swa_alloc_bytes"], how), note


def swa_cap_rows_term(p: PoolPlan, s: HybridSizer) -> Term:
    """The chain's rows line when the request cap sizes the SWA pool: the rest of the budget goes to full."""
    swa, page = int(p.extras["swa_tokens"]), p.page_tokens
    swa_cell = s.swa_cell(p.kv_dtype, p.attn_tp)
    how = f"{p.rows:,} = int((available − {swa:,} × {swa_cell:,} B) // {p.cell.total_bytes:,}) // {page} × {page}"
    return Term("pool rows per GPU", None, how + " (full_layer_tokens)")
