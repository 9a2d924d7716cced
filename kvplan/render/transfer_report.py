"""`kvplan transfer`'s report: the KV bytes a prefill-to-decode hand-off moves."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kvplan.render import Report, Section, ppm, size
from kvplan.render.applies import for_model
from kvplan.render.plan_sections import plan_data, title

if TYPE_CHECKING:  # the command loads it (kvplan admit stays light: benchmarks/cli_latency.py)
    from kvplan.plan.transfer import Transfer


def transfer_report(t: Transfer) -> Report:
    p = t.plan
    unit = {
        "page": f"whole pages of {p.logical_page_tokens} tokens (the last partial page included)",
        "chunk": f"whole chunks of {t.chunk_tokens} tokens only (offloading connector; the tail stays)",
        "token": "exact tokens (a lower bound)",
    }[t.unit]
    return Report(
        "transfer",
        title("transfer", p),
        (Section("Transfer", _transfer_rows(t, unit), ("", "", "")),),
        for_model(p.arch, _transfer_data(t)),
        startup_error=p.startup_error,
    )


def _transfer_rows(t: Transfer, unit: str) -> tuple[tuple[str, str, str], ...]:
    p = t.plan
    return (
        ("link speed", f"{t.link_bits_per_s / 1e9:,.4g} Gb/s = {t.link_bytes_per_s / 1e9:,.4g} GB/s", "per rank"),
        ("tokens moved", f"{t.moved_tokens:,} of {t.ctx_tokens:,}", unit),
        (
            "full-attention KV per rank" if t.hybrid else "main KV per rank",
            size(t.main_bytes_per_rank),
            f"{t.rows_per_rank:,} rows × {t.full_row_bytes:,} B",
        ),
        *(
            (
                (
                    "indexer K per rank",
                    size(t.indexer_bytes_per_rank),
                    f"{t.rows_per_rank:,} rows × {p.cell.indexer_bytes + p.cell.draft_indexer_bytes:,} B",
                ),
            )
            if p.arch.has_indexer
            else ()
        ),
        *((f"{m.kind} per rank", size(m.bytes_per_rank), m.how) for m in t.hybrid),
        *(
            (
                (
                    "hybrid kinds",
                    "SGLang's PD payloads" if p.engine == "sglang" else "ASSUMPTION",
                    "send_kv_chunk: every full-attention page, the SWA window's pages (_swa_payload), one Mamba state"
                    " (_mamba_payload)"
                    if p.engine == "sglang"
                    else "vLLM's connectors' hybrid paths not read: the window's blocks and one state per request,"
                    " as SGLang sends them",
                ),
            )
            if t.hybrid
            else ()
        ),
        ("per rank", size(t.bytes_per_rank), f"{t.microseconds(t.bytes_per_rank) / 1000:,.1f} ms at the link speed"),
        (
            "all ranks",
            size(t.total_bytes),
            f"× {t.ranks} ranks ({t.sharding}); {t.microseconds(t.total_bytes) / 1000:,.1f} ms over one link",
        ),
        *(
            (
                (
                    "indexer share",
                    ppm(t.indexer_bytes_per_rank * 1_000_000 // t.bytes_per_rank) if t.bytes_per_rank else "n/a",
                    "",
                ),
            )
            if p.arch.has_indexer
            else ()
        ),
    )


def _transfer_data(t: Transfer) -> dict[str, Any]:
    p = t.plan
    return {
        "ctx_tokens": t.ctx_tokens,
        "unit": t.unit,
        "chunk_tokens": t.chunk_tokens,
        "moved_tokens": t.moved_tokens,
        "ranks": t.ranks,
        "link_bytes_per_s": t.link_bytes_per_s,
        "link_bits_per_s": t.link_bits_per_s,
        "copies_per_token": t.copies,
        "main_bytes_per_rank": t.main_bytes_per_rank,
        "indexer_bytes_per_rank": t.indexer_bytes_per_rank,
        "bytes_per_rank": t.bytes_per_rank,
        **({"hybrid_kinds": [asdict(m) for m in t.hybrid]} if t.hybrid else {}),
        "total_bytes": t.total_bytes,
        "microseconds_per_rank": t.microseconds(t.bytes_per_rank),
        "microseconds_total": t.microseconds(t.total_bytes),
        "plan": plan_data(p),
    }
