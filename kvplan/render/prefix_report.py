"""`kvplan prefix`'s report: what a shared prefix saves, and the sweep."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kvplan.render import Report, Section, count, ppm, size
from kvplan.render.applies import for_model
from kvplan.render.plan_sections import plan_data, title

if TYPE_CHECKING:  # the command loads it (kvplan admit stays light: benchmarks/cli_latency.py)
    from kvplan.plan.prefix import PrefixHit


def prefix_report(h: PrefixHit, sweep: tuple[PrefixHit, ...]) -> Report:
    p = h.plan
    what = h.counts  # 'indexer' pairs (DSA) or 'attention' pairs (no indexer)
    sections = [Section("A prefix hit", _hit_rows(h), ("", "", ""))]
    if h.hybrid_rules:
        sections.append(
            Section(
                f"Where a hybrid's hit ends ({p.semantics})",
                tuple((str(i), r) for i, r in enumerate(h.hybrid_rules, 1)),
                ("", "rule"),
            )
        )
    if sweep:
        sections.append(
            Section(
                "Sweep over the cached prefix",
                tuple(
                    (
                        count(x.hit_tokens),
                        count(x.reusable_tokens),
                        ppm(x.naive_ppm),
                        ppm(x.saved_ppm),
                        size(x.main_bytes_saved + x.indexer_bytes_saved),
                    )
                    for x in sweep
                ),
                ("cached", "reused", "naive saving", f"{what} compute saved", "KV not written"),
            )
        )
    data = _prefix_data(h, sweep)
    return Report("prefix", title("prefix", p), tuple(sections), for_model(p.arch, data), startup_error=p.startup_error)


def _hit_rows(h: PrefixHit) -> tuple[tuple[str, str, str], ...]:
    """What the hit reuses and saves, and what its suffix still pays."""
    what = h.counts
    a = h.plan.arch
    per_pair = (
        f"pairs × {a.index_n_heads} heads × {a.index_head_dim} × 2 × {h.indexer_layers} layers"
        if a.has_indexer
        else f"pairs × {a.num_attention_heads} heads × ({a.head_dim} + {a.v_head_dim}) × 2 × {h.indexer_layers} layers"
    )
    return (
        (
            "context / cached prefix",
            f"{h.ctx_tokens:,} / {h.hit_tokens:,} tokens",
            f"naive hit ratio {ppm(h.naive_ppm)}",
        ),
        ("reused", f"{h.reusable_tokens:,} tokens = {h.pages:,} pages", h.rule),
        (
            "full-attention KV not written" if h.kinds_saved else "main KV not written",
            size(h.main_bytes_saved),
            "per GPU",
        ),
        *((("indexer K not written", size(h.indexer_bytes_saved), "per GPU"),) if a.has_indexer else ()),
        *((f"{k.kind} not written", size(k.bytes), k.how) for k in h.kinds_saved),
        (f"{what} pairs, all", count(h.pairs_total), f"L(L + 1)/2 per {what} layer"),
        ("saved (prefix-internal)", count(h.pairs_saved), "R(R + 1)/2"),
        ("still paid: suffix × prefix", count(h.pairs_cross), "S × R"),
        ("still paid: suffix-internal", count(h.pairs_suffix), "S(S + 1)/2"),
        (
            f"{what} FLOPs saved / paid",
            f"{h.flops(h.pairs_saved):.3e} / {h.flops(h.pairs_paid):.3e}",
            per_pair,
        ),
        (f"{what} compute saved", ppm(h.saved_ppm), f"vs the naive {ppm(h.naive_ppm)}"),
        (
            "indexer K read per suffix chunk" if a.has_indexer else "KV read per suffix chunk",
            f"{size(h.keys_read_by_chunk()[0] * h.indexer_k_bytes_per_key)} → "
            f"{size(h.keys_read_by_chunk()[-1] * h.indexer_k_bytes_per_key)}"
            if h.suffix_tokens
            else "0 B",
            f"{h.suffix_chunks:,} chunk(s) of {h.chunk_tokens:,}; keys × {h.indexer_k_bytes_per_key:,} B",
        ),
    )


def _prefix_data(h: PrefixHit, sweep: tuple[PrefixHit, ...]) -> dict[str, Any]:
    p = h.plan
    return {
        "ctx_tokens": h.ctx_tokens,
        "hit_tokens": h.hit_tokens,
        "reusable_tokens": h.reusable_tokens,
        "pages": h.pages,
        "rule": h.rule,
        "main_bytes_saved": h.main_bytes_saved,
        "indexer_bytes_saved": h.indexer_bytes_saved,
        "pairs_total": h.pairs_total,
        "pairs_saved": h.pairs_saved,
        "pairs_cross": h.pairs_cross,
        "pairs_suffix": h.pairs_suffix,
        "flops_saved": h.flops(h.pairs_saved),
        "flops_paid": h.flops(h.pairs_paid),
        "saved_ppm": h.saved_ppm,
        "naive_ppm": h.naive_ppm,
        "chunk_tokens": h.chunk_tokens,
        "pairs_counted": h.counts,
        **(
            {"hybrid_rules": list(h.hybrid_rules), "kinds_saved": [asdict(k) for k in h.kinds_saved]}
            if h.hybrid_rules
            else {}
        ),
        # what each suffix chunk reads per key: the indexer K (DSA), else the layers' KV (the text's own words)
        ("indexer_k_bytes_read_by_chunk" if p.arch.has_indexer else "kv_bytes_read_by_chunk"): [
            k * h.indexer_k_bytes_per_key for k in h.keys_read_by_chunk()
        ],
        "sweep": [
            {
                "hit_tokens": x.hit_tokens,
                "reusable_tokens": x.reusable_tokens,
                "saved_ppm": x.saved_ppm,
                "naive_ppm": x.naive_ppm,
            }
            for x in sweep
        ],
        "plan": plan_data(p),
    }
