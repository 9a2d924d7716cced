"""Results -> Reports: the rows a person reads and the JSON a machine reads, from one place."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kvplan.engines.common import PoolPlan, Term
from kvplan.models.cache import describe_kinds
from kvplan.models.preset_repos import aliases_of
from kvplan.models.weights_band import band_for
from kvplan.plan.admit import Admission, Remedy, dp_ranks
from kvplan.plan.budget import Budget, Footprint, KindCost, PoolNeed, pool_needs
from kvplan.plan.workspace import Wall, Workspace

if TYPE_CHECKING:  # only their commands import them (kvplan admit stays light: benchmarks/cli_latency.py)
    from kvplan.models.arch import ModelArch
    from kvplan.plan.prefix import PrefixHit
    from kvplan.plan.transfer import Transfer
from dataclasses import MISSING, fields

from kvplan.models import load
from kvplan.models.deploy import ENGINE_KNOBS, ENGINES, KNOBS, KV_CACHE_DTYPES, Deployment
from kvplan.models.formats import MlaLayout
from kvplan.models.load import ALIASES
from kvplan.render import Bar, Report, Section, count, first_screen, gib, nbytes, pct, ppm, size, startup_line
from kvplan.render.applies import SET_SUFFIX, carry_data, carry_line, for_model, knob_origin, without_indexer_column
from kvplan.render.applies import knob_value as _value
from kvplan.render.pipeline_report import stages_data, stages_section
from kvplan.versions import modelled_ranges


def deployment_label(p: PoolPlan) -> str:
    """'glm-5.3-8xh200-sglang' or 'glm-5.3-8xh200-sglang with --set overrides'."""
    name = p.deployment.name
    return name.removesuffix(SET_SUFFIX) + (" with --set overrides" if name.endswith(SET_SUFFIX) else "")


def title(command: str, p: PoolPlan, *extra: str) -> str:
    """'kvplan budget: glm-5.3 on glm-5.3-8xh200-sglang, SGLang 0.5.23, per GPU': one clause per fact; then, on
    its own line, what a deployment written for another model carries over to this one."""
    head = ", ".join((f"kvplan {command}: {p.arch.name} on {deployment_label(p)}", p.semantics, *extra))
    carry = carry_line(p.deployment.carry)
    return f"{head}\n{carry}" if carry else head


def cell_section(p: PoolPlan) -> Section:
    c = p.cell
    rows = [
        (
            f"main {'MLA' if p.arch.is_mla else p.arch.kind_label} KV",
            nbytes(c.main_bytes),
            f"{p.mla_bytes_per_layer} B ({p.kv_format}) × {p.main_layers} layers"
            if (not p.pools and not p.arch.kv_heads_per_layer) or p.mla_bytes_per_layer * p.main_layers == c.main_bytes
            else f"Σ of {sum(1 for h in p.arch.kv_heads_per_layer if h)} layers' K + V ({p.kv_format}), kv heads "
            f"{'/'.join(map(str, p.arch.kv_heads_per_layer))} by layer (block_configs)"
            if p.arch.kv_heads_per_layer
            else "the engine's bytes per row of its token pool (a hybrid: what a request takes from each pool is "
            "under 'What the request needs'; per kind: kvplan budget)",
        ),
    ]
    if p.arch.has_indexer:
        rows.append(
            (
                "indexer K",
                nbytes(c.indexer_bytes),
                f"{p.indexer_bytes_per_layer} B × {p.indexer_layers} full layers"
                + (f" × dcp {p.dcp} (replicated)" if p.engine == "sglang" and p.dcp > 1 else "")
                + f" [{p.indexer_rule}]",
            )
        )
    if p.draft_layers:
        rows.append(
            (
                "MTP draft",
                nbytes(c.draft_main_bytes + c.draft_indexer_bytes),
                f"{p.draft_layers} layer(s): main {c.draft_main_bytes:,} B"
                + (f" + indexer {c.draft_indexer_bytes:,} B" if p.arch.has_indexer else ""),
            )
        )
    unit = "per pool row" if p.dcp > 1 else "per token"
    rows.append(("total", nbytes(c.total_bytes), unit + (f" (a row is {p.dcp} logical tokens)" if p.dcp > 1 else "")))
    return Section(f"Bytes {unit} on one GPU", tuple(rows), ("cache", "bytes", "why"))


def chain_section(p: PoolPlan) -> Section:
    """The memory chain; where the weights do not load, as far as it goes (up to the weights) and why it stops."""
    chain = p.chain
    if not p.loads_weights:
        cut = next((i for i, t in enumerate(chain) if t.label == "weights per GPU"), len(chain) - 1)
        chain = (*chain[: cut + 1], Term("does not load", None, p.startup_error or "the weights do not fit"))
    return Section(
        f"Memory chain of one GPU ({p.semantics})", tuple(_chain_row(t) for t in chain), ("step", "value", "how")
    )


def _chain_row(t: Any) -> tuple[str, str, str]:
    """A step with bytes shows its size; a count ('567,616 = available // cell ...') shows the count as the value."""
    if t.bytes is not None:
        return (t.label, size(t.bytes), t.detail)
    value, sep, how = str(t.detail).partition(" = ")
    if sep and value.replace(",", "").isdigit():
        return (t.label, count(int(value.replace(",", ""))), "= " + how)
    return (t.label, "n/a", t.detail)


def knobs_section(p: PoolPlan) -> Section:
    rows = tuple((k.name, _value(k.name, k.value), knob_origin(k, p.deployment.carry)) for k in p.knobs)
    rows = tuple((name, shown, f"defaulted — {why}") for name, shown, why in p.deployment.defaulted) + rows
    return Section("Knobs", rows, ("knob", "value", "origin"))


def memory_bar(p: PoolPlan) -> Bar | None:
    """The memory map of one GPU; none where the weights do not load (there is no map to draw)."""
    if not p.loads_weights:
        return None
    return Bar(
        f"Memory map of one GPU ({gib(p.deployment.gpu.nvml_total_bytes)} NVML total)",
        tuple((s.label, s.bytes) for s in p.memory_map),
    )


def plan_data(p: PoolPlan) -> dict[str, Any]:
    return {
        "engine": p.engine,
        "engine_version": p.engine_version,
        "model": p.arch.name,
        "deployment": p.deployment.name,
        "gpu": p.deployment.gpu.key,
        "mla_layout": p.mla_layout.value if p.mla_layout is not None else None,
        "kv_format": p.kv_format,
        "attention": p.arch.kind_label,
        "attn_tp": p.attn_tp,
        "mla_bytes_per_layer": p.mla_bytes_per_layer,
        "main_layers": p.main_layers,
        "indexer_bytes_per_layer": p.indexer_bytes_per_layer,
        "indexer_layers": p.indexer_layers,
        "draft_layers": p.draft_layers,
        "dcp": p.dcp,
        "cell": {**asdict(p.cell), "total_bytes": p.cell.total_bytes},
        "page_tokens": p.page_tokens,
        "logical_page_tokens": p.logical_page_tokens,
        "available_bytes": p.available_bytes,
        "rows_per_gpu": p.rows,
        "usable_pages": p.usable_pages,
        "usable_tokens": p.usable_tokens,
        "logged_tokens": p.logged_tokens,
        "context_len": p.context_len,
        "max_running_requests": p.max_running_requests,
        "allocated_bytes": p.allocated_bytes,
        "startup_error": p.startup_error,
        "loads_weights": p.loads_weights,
        "chain": [{"label": t.label, "bytes": t.bytes, "detail": t.detail} for t in p.chain],
        "knobs": [{"name": k.name, "value": k.value, "origin": k.origin, "defaulted": k.defaulted} for k in p.knobs],
        "deployment_defaults": [{"name": n, "value": v, "why": w} for n, v, w in p.deployment.defaulted],
        "written_for_another_model": carry_data(p.deployment.carry),
        "memory_map": {s.label: s.bytes for s in p.memory_map},
        "extras": dict(p.extras),
        "notes": list(p.notes),
        "stages": stages_data(p),
        "engine_log": first_screen.engine_data(p),
    }


def _need_have(need: int, have: int, unit: str) -> str:
    if unit == "bytes":
        return f"{gib(need)} / {gib(have)}"
    return f"{need:,} / {have:,} {unit}" if unit else "n/a"


def workspace_section(w: Workspace) -> Section:
    rows = [(i.name, size(i.bytes), i.phase, i.detail + ("" if i.in_budget else " (unbudgeted)")) for i in w.items]
    rows += [
        ("peak", size(w.peak_bytes), "", "persistent + the larger of the prefill and decode phases"),
        (
            "room",
            size(w.room_bytes),
            "",
            "SGLang's slack pre_load_free × (1 − mem_fraction_static)"
            if w.plan.engine == "sglang"
            else "reserved by vLLM's non-KV profile"
            + (" (+ the 512 MiB logits cap)" if w.plan.arch.has_indexer else ""),
        ),
        ("left", size(w.left_bytes), "", "for activations, NCCL and allocator slack (not counted)"),
    ]
    head = f"Outside the pool on one GPU: batch {w.batch:,}, context {w.ctx:,}, MTP draft {w.draft_tokens}"
    return Section(head, tuple(rows), ("buffer", "size", "phase", "what"))


def _chunks_text(pre: Any) -> str:
    """'one chunk', '11 chunks of 3.18 GiB' or '2 chunks: 1 of 3.19 GiB, the last of 0.81 GiB'."""
    if pre.chunks == 1:
        return f"one chunk of {size(pre.chunk_bytes)}"
    if pre.last_chunk_rows == pre.rows_per_chunk:
        return f"{pre.chunks:,} chunks of {size(pre.chunk_bytes)}"
    full = pre.chunks - 1
    return (
        f"{pre.chunks:,} chunks: {full:,} of {size(pre.chunk_bytes)}, the last ({pre.last_chunk_rows:,} rows) "
        f"of {size(pre.last_chunk_bytes)}"
    )


def pool_context_section(w: Workspace) -> Section:
    """Whether the pool holds the batch: context for the workspace verdict, not part of it."""
    p = w.plan
    need = w.batch * p.pages_for(w.ctx)
    pool_rows = (
        tuple(
            (
                f"{n.pool.name}: {n.pool.unit}s needed / capacity",
                f"{w.batch * n.units:,} / {n.pool.capacity:,}",
                f"{w.batch:,} × ({_demands_text(n)})",
            )
            for n in pool_needs(p, w.ctx)
        )
        if p.pools
        else (("pages needed / usable", f"{need:,} / {p.usable_pages:,}", f"of {p.logical_page_tokens} tokens"),)
    )
    rows = (
        ("requests × context", f"{w.batch:,} × {w.ctx:,}", "the context defaults to the longest the pool holds"),
        *pool_rows,
        ("running requests", f"{w.batch:,} / {p.max_running_requests:,}", "batch / max_running_requests"),
        (
            "the pool holds them",
            "yes" if w.pool_fits else "no",
            "engine would not start" if p.startup_error else "not part of the verdict",
        ),
    )
    return Section("The pool (context, not the verdict)", rows, ("", "", ""))


def workspace_data(w: Workspace) -> dict[str, Any]:
    data: dict[str, Any] = {
        "batch": w.batch,
        "ctx": w.ctx,
        "draft_tokens": w.draft_tokens,
        "chunk": w.chunk,
        "items": [asdict(i) for i in w.items],
        "peak_bytes": w.peak_bytes,
        "room_bytes": w.room_bytes,
        "left_bytes": w.left_bytes,
        "fits": w.fits,
        "pool_fits": w.pool_fits,
    }
    if w.prefill is not None:  # the DSA indexer's logits budget: omitted for a model without one
        data["logits_budget_bytes"] = w.budget_bytes
        data["prefill"] = {
            **asdict(w.prefill),
            "chunk_bytes": w.prefill.chunk_bytes,
            "last_chunk_rows": w.prefill.last_chunk_rows,
            "last_chunk_bytes": w.prefill.last_chunk_bytes,
        }
    return data


def _chunking_sections(w: Workspace) -> tuple[Section, ...]:
    """The DSA indexer's prefill logits chunking; nothing for a model without an indexer."""
    pre = w.prefill
    if pre is None:
        return ()
    sglang = w.plan.engine == "sglang"
    chunking = (
        ("query rows × keys", f"{pre.rows:,} × {pre.cols:,}", ""),
        ("logits unchunked", size(pre.logits_bytes), "rows × keys × 4 B (fp32)"),
        (
            "budget",
            size(pre.budget_bytes),
            "min(0.2 × total × (1 − mfs), 0.3 × total)" if sglang else "VLLM_SPARSE_INDEXER_MAX_LOGITS_MB",
        ),
        ("budget checked", "yes" if pre.checked else "no", "rows × keys >= 8,000,000" if sglang else ""),
        ("rows per chunk", count(pre.rows_per_chunk), _chunks_text(pre)),
    )
    return (Section("Prefill logits chunking (one chunk of the longest request)", chunking, ("", "", "")),)


def workspace_report(w: Workspace, walls: tuple[Wall, ...]) -> Report:
    p = w.plan
    wall_rows = tuple(
        (
            wl.knob,
            count(wl.largest_fitting) if wl.largest_fitting >= 0 else "none (already over)",
            wl.breaks or f"nothing up to {wl.limit:,}",
        )
        for wl in walls
    )
    ok = w.fits  # the verdict is about the workspaces; the pool is context (its own section)
    verdict = (
        f"FITS: {gib(w.peak_bytes)} of workspaces in {gib(w.room_bytes)}, {gib(w.left_bytes)} left"
        if ok
        else f"DOES NOT FIT: {gib(w.peak_bytes)} of workspaces in {gib(w.room_bytes)}, "
        f"{gib(-w.left_bytes)} over, at batch {w.batch:,}, context {w.ctx:,}"
    )
    return Report(
        "workspace",
        title("workspace", p),
        (
            workspace_section(w),
            pool_context_section(w),
            first_screen.engine_section(p),
            *_chunking_sections(w),
            Section(
                "Growing one knob at a time: the largest value that fits, and what breaks next",
                wall_rows,
                ("knob", "largest that fits", "what breaks next"),
            ),
        ),
        for_model(
            p.arch,
            {"fits": ok, "workspace": workspace_data(w), "walls": [asdict(wl) for wl in walls], "plan": plan_data(p)},
        ),
        verdict=verdict,
        verdict_ok=ok,
        notes=p.notes,
        startup_error=p.startup_error,
    )


def prefix_report(h: PrefixHit, sweep: tuple[PrefixHit, ...]) -> Report:
    p = h.plan
    what = h.counts  # 'indexer' pairs (DSA) or 'attention' pairs (no indexer)
    a = p.arch
    per_pair = (
        f"pairs × {a.index_n_heads} heads × {a.index_head_dim} × 2 × {h.indexer_layers} layers"
        if a.has_indexer
        else f"pairs × {a.num_attention_heads} heads × ({a.head_dim} + {a.v_head_dim}) × 2 × {h.indexer_layers} layers"
    )
    rows = (
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
    sections = [Section("A prefix hit", rows, ("", "", ""))]
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
    data = {
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
    return Report("prefix", title("prefix", p), tuple(sections), for_model(p.arch, data), startup_error=p.startup_error)


def transfer_report(t: Transfer) -> Report:
    p = t.plan
    unit = {
        "page": f"whole pages of {p.logical_page_tokens} tokens (the last partial page included)",
        "chunk": f"whole chunks of {t.chunk_tokens} tokens only (offloading connector; the tail stays)",
        "token": "exact tokens (a lower bound)",
    }[t.unit]
    rows = (
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
    data = {
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
    return Report(
        "transfer",
        title("transfer", p),
        (Section("Transfer", rows, ("", "", "")),),
        for_model(p.arch, data),
        startup_error=p.startup_error,
    )


def _fp(f: Footprint) -> dict[str, int]:
    return {**asdict(f), "total_bytes": f.total_bytes}


def remedy_detail(m: Remedy) -> str:
    """A remedy's detail with its byte figures written in GiB and GB."""
    text = m.detail
    for name, n in m.sizes:
        text = text.replace("{size:" + name + "}", size(n))
    return text


def _times_requests(a: Admission) -> str:
    """'× 8 request(s)'; with DP attention, the share of one rank's pool: '× 4 request(s) on one DP rank (8
    over 2 DP-attention ranks)'."""
    r, dp = a.request, dp_ranks(a.plan)
    if dp > 1 and r.concurrent > 1:
        return f"× {a.per_rank} request(s) on one DP rank ({r.concurrent} over {dp} DP-attention ranks)"
    return f"× {r.concurrent} request(s)" if r.concurrent > 1 else ""


def _uniform_need_rows(a: Admission) -> tuple[tuple[str, str, str], ...]:
    p, r, need = a.plan, a.request, a.need
    return (
        ("tokens", count(r.total_tokens), f"ctx {r.ctx_tokens:,} + gen {r.gen_tokens:,}"),
        ("pages", count(need.pages), f"of {p.logical_page_tokens} tokens"),
        ("main KV per GPU", size(need.main_bytes), ""),
        *(
            (
                (
                    "indexer per GPU",
                    size(need.indexer_bytes),
                    pct(need.indexer_bytes, need.total_bytes) + " of the request",
                ),
            )
            if p.arch.has_indexer
            else ()
        ),
        *((("draft per GPU", size(need.draft_bytes), ""),) if need.draft_bytes else ()),
        ("total per GPU", size(need.total_bytes), _times_requests(a)),
        (
            "tail-page waste",
            size(a.tail_waste_bytes),
            f"{a.tail_waste_tokens} unfilled slot(s) in the last page" + (f" × {a.per_rank}" if a.per_rank > 1 else ""),
        ),
    )


def _hybrid_need_rows(a: Admission) -> tuple[tuple[str, str, str], ...]:
    """A hybrid's request: each pool's units (Pool.need) × its unit bytes, not the full layers' footprint."""
    r = a.request
    needs = pool_needs(a.plan, r.total_tokens)
    return (
        ("tokens", count(r.total_tokens), f"ctx {r.ctx_tokens:,} + gen {r.gen_tokens:,}"),
        *(
            (
                f"{n.pool.name} per GPU",
                f"{n.units:,} {n.pool.unit}s = {size(n.bytes)}",
                f"{_demands_text(n)} (× {n.pool.unit_bytes:,} B a {n.pool.unit})",
            )
            for n in needs
        ),
        ("total per GPU", size(sum(n.bytes for n in needs)), _times_requests(a)),
    )


def admit_report(a: Admission) -> Report:
    p, r = a.plan, a.request
    # a pool read from a log (--pool-tokens, doctor) does not rest on the weights
    band = band_for(p.arch, p.knob("weights_per_gpu").origin) if a.pool_source == "planned" else None
    est = f" (weights estimated {band.percent})" if band else ""
    need = a.need
    req_rows = _hybrid_need_rows(a) if p.pools else _uniform_need_rows(a)
    checks = tuple((c.name, "ok" if c.ok else "FAIL", _need_have(c.need, c.have, c.unit), c.detail) for c in a.checks)
    fit_rows = (
        ("pool (usable)", count(a.usable_tokens) + " tokens", a.pool_source),
        ("binding constraint", a.binding.name, ""),
        ("headroom", count(a.headroom_tokens) + " tokens", "after these requests"),
        ("largest admitted context", count(a.largest_ctx) + " tokens", "one request"),
        (
            "such requests at once",
            count(a.max_concurrent),
            "rejected: over the context length" if a.over_context else "",
        ),
        *(
            (("fewer at once", f"{a.fewer_at_once:,} of the {r.concurrent:,} fit", "a smaller -n, not a --set"),)
            if a.fewer_at_once is not None
            else ()
        ),
    )
    mo = a.main_only
    main_only = (
        ("cell", nbytes(mo.cell_bytes), nbytes(p.cell.total_bytes)),
        ("pool tokens", count(mo.pool_tokens), count(p.logged_tokens)),
        ("largest context", count(mo.largest_ctx), count(a.largest_ctx)),
        ("verdict", "admitted" if mo.admitted else "rejected", "admitted" if a.admitted else "rejected"),
    )
    sections = [
        *first_screen.admit_screen(a),  # the first screen: the binding check, the fix, the engine's own lines
        cell_section(p),
        chain_section(p),
        *filter(None, (stages_section(p),)),
        Section("What the request needs", req_rows, ("", "", "")),
        Section("Checks", checks, ("check", "result", "need / have", "detail")),
        Section("Fit", fit_rows, ("", "", "")),
    ]
    if a.remedies:
        sections.append(
            Section(
                "Smallest changes that admit it (each re-planned)",
                tuple((m.flags, count(m.pool_tokens) + " tokens", remedy_detail(m)) for m in a.remedies),
                ("change", "pool after", "detail"),
            )
        )
    elif not a.admitted:
        sections.append(Section("Smallest changes that admit it", (("none found", "", ""),), ("", "", "")))
    sections.append(workspace_section(a.workspace))
    if p.arch.has_indexer:  # the main-only comparison exists only where an indexer is left out of it
        sections.append(
            Section(
                "A plan that counted main KV only would have claimed",
                main_only,
                ("figure", "main KV only", "with the indexer"),
            )
        )
    sections.append(knobs_section(p))
    data = {
        "admitted": a.admitted,
        "binding": a.binding.name,
        "request": {"ctx_tokens": r.ctx_tokens, "gen_tokens": r.gen_tokens, "concurrent": r.concurrent},
        "need": _fp(need),
        **({"need_by_pool": _pool_need_data(pool_needs(p, r.total_tokens))} if p.pools else {}),
        "checks": [asdict(c) for c in a.checks],
        "usable_tokens": a.usable_tokens,
        "headroom_tokens": a.headroom_tokens,
        "largest_ctx": a.largest_ctx,
        "max_concurrent": a.max_concurrent,
        "fewer_at_once": a.fewer_at_once,
        "remedies": [
            {**asdict(m), "detail": remedy_detail(m), "sizes": dict(m.sizes), "set": list(m.sets)} for m in a.remedies
        ],
        "main_only": asdict(mo) if p.arch.has_indexer else None,
        "pool_source": a.pool_source,
        "weights_band_ppm": band.ppm if band else None,
        "tail_waste_tokens": a.tail_waste_tokens,
        "tail_waste_bytes": a.tail_waste_bytes,
        "workspace": workspace_data(a.workspace),
        "plan": plan_data(p),
    }
    return Report(
        "admit",
        title("admit", p),
        tuple(sections),
        for_model(p.arch, data),
        verdict=first_screen.verdict(a, est),
        verdict_ok=a.admitted,
        bar=memory_bar(p),
        notes=p.notes,
        startup_error=p.startup_error,
    )


# --------------------------------------------------------------------------- hybrid models


def _kind_row(k: KindCost) -> tuple[str, str, str, str, str]:
    if k.per == "request":
        return (k.kind, count(k.layers), "0 B", nbytes(k.request_max_bytes), "a fixed state per request")
    if k.per == "window":
        return (
            k.kind,
            count(k.layers),
            nbytes(k.bytes_per_token),
            size(k.request_max_bytes),
            f"at most the window: {k.window:,} tokens × {k.bytes_per_token:,} B",
        )
    return (k.kind, count(k.layers), nbytes(k.bytes_per_token), "grows", "per token of context")


def kinds_section(kinds: tuple[KindCost, ...]) -> Section:
    """A hybrid's cache kinds on one GPU: per token, and the most one request holds (window / state)."""
    return Section(
        "Cache kinds on one GPU (model-level, before pages)",
        tuple(_kind_row(k) for k in kinds),
        ("kind", "layers", "per token", "per request at most", "why"),
    )


def pools_section(p: PoolPlan) -> Section:
    rows = tuple(
        (pool.name, pool.unit, nbytes(pool.unit_bytes), count(pool.capacity), size(pool.bytes)) for pool in p.pools
    )
    return Section("Pools on one GPU", rows, ("pool", "unit", "unit bytes", "capacity", "pool bytes"))


def _demands_text(n: PoolNeed) -> str:
    return "; ".join(f"{d.kind}: {d.units:,}" for d in n.demands)


def pool_need_rows(label: str, needs: tuple[PoolNeed, ...]) -> list[tuple[str, str, str, str, str]]:
    """One row per pool (units, bytes, per kind) and a total: what one request takes, Pool.need × unit bytes."""
    rows = [(label, n.pool.name, f"{n.units:,} {n.pool.unit}s", size(n.bytes), _demands_text(n)) for n in needs]
    rows.append((label, "total", "", size(sum(n.bytes for n in needs)), "over every pool"))
    return rows


def _pool_need_data(needs: tuple[PoolNeed, ...]) -> list[dict[str, Any]]:
    return [
        {
            "pool": n.pool.name,
            "unit": n.pool.unit,
            "units": n.units,
            "bytes": n.bytes,
            "by_kind": [asdict(d) for d in n.demands],
        }
        for n in needs
    ]


def _hybrid_budget_report(b: Budget) -> Report:
    p = b.plan
    rows: list[tuple[str, str, str, str, str]] = []
    for f, needs in zip(b.per_context, b.pools_per_context, strict=True):
        rows += pool_need_rows(f"{f.tokens:,} tokens", needs)
    data = {
        "kinds": [asdict(k) for k in b.kinds],
        "pools": [
            {"name": q.name, "unit": q.unit, "unit_bytes": q.unit_bytes, "capacity": q.capacity, "bytes": q.bytes}
            for q in p.pools
        ],
        "per_context": [
            {"tokens": f.tokens, "pools": _pool_need_data(needs), "total_bytes": sum(n.bytes for n in needs)}
            for f, needs in zip(b.per_context, b.pools_per_context, strict=True)
        ],
        "plan": plan_data(p),
    }
    return Report(
        "budget",
        title("budget", p, "per GPU"),
        (
            first_screen.engine_section(p),
            kinds_section(b.kinds),
            pools_section(p),
            Section(
                "What one request takes per GPU (page-rounded, as the engine allocates)",
                tuple(rows),
                ("context", "pool", "units", "bytes", "units by kind"),
            ),
        ),
        for_model(p.arch, data),
        notes=p.notes,
        startup_error=p.startup_error,
    )


def budget_report(b: Budget) -> Report:
    p = b.plan
    if p.pools:  # a hybrid: a request's cost is per kind and per pool, not one number
        return _hybrid_budget_report(b)
    rows = []
    for label, f in (
        ("per pool row" if p.dcp > 1 else "per token", b.per_row),
        (f"per page ({p.logical_page_tokens} tokens)", b.per_page),
    ):
        rows.append(
            (label, "", nbytes(f.main_bytes), nbytes(f.indexer_bytes), nbytes(f.draft_bytes), nbytes(f.total_bytes))
        )
    for f in b.per_context:
        rows.append(
            (
                f"{f.tokens:,} tokens",
                count(f.pages),
                size(f.main_bytes),
                size(f.indexer_bytes),
                size(f.draft_bytes),
                size(f.total_bytes),
            )
        )
    share = (
        *(
            (
                ("indexer / main KV", ppm(b.indexer_share_of_main_ppm)),
                ("indexer / total", ppm(b.indexer_share_of_total_ppm)),
            )
            if p.arch.has_indexer
            else ()
        ),
        ("tail-page waste per request", f"{nbytes(b.tail_waste_bytes)} ((page − 1) / 2 rows × cell)"),
    )
    data = {
        "per_row": _fp(b.per_row),
        "per_page": _fp(b.per_page),
        "per_context": [_fp(f) for f in b.per_context],
        "indexer_share_of_main_ppm": b.indexer_share_of_main_ppm,
        "indexer_share_of_total_ppm": b.indexer_share_of_total_ppm,
        "tail_waste_bytes": b.tail_waste_bytes,
        "plan": plan_data(p),
    }
    return Report(
        "budget",
        title("budget", p, "per GPU"),
        (
            first_screen.engine_section(p),
            cell_section(p),
            without_indexer_column(
                p.arch, Section("Budget per GPU", tuple(rows), ("", "pages", "main KV", "indexer", "draft", "total"))
            ),
            Section("Shares", share, ("", "")),
            *filter(None, (stages_section(p),)),
        ),
        for_model(p.arch, data),
        startup_error=p.startup_error,
    )


def models_list_report(models: list[ModelArch]) -> Report:
    rows = tuple(
        (
            m.name + (f" (also {', '.join(aliases_of(m.name))})" if aliases_of(m.name) else ""),
            m.architecture,
            str(m.num_layers),
            m.kind_label,
            f"{m.full_indexer_layers}/{m.num_layers}" if m.has_indexer else "—",
            count(m.max_position_embeddings),
            m.description,
        )
        for m in models
    )
    data = {
        "models": [
            {
                "name": m.name,
                "aliases": list(aliases_of(m.name)),
                "architecture": m.architecture,
                "num_layers": m.num_layers,
                "max_position_embeddings": m.max_position_embeddings,
                **({"full_indexer_layers": m.full_indexer_layers} if m.has_indexer else {}),
            }
            for m in models
        ]
    }
    return Report(
        "models",
        "Model presets",
        (Section("", rows, ("name", "architecture", "layers", "attention", "indexer layers", "positions", "")),),
        data,
    )


def model_report(m: ModelArch) -> Report:
    rows = (
        ("architecture", m.architecture),
        ("layers (+ MTP)", f"{m.num_layers} (+ {m.num_mtp_layers})"),
        *(("cache" if i == 0 else "", line) for i, line in enumerate(describe_kinds(m.layers, 8))),
        *(
            (
                (
                    "indexer",
                    f"{m.index_n_heads} heads × {m.index_head_dim}, top-k {m.index_topk}, kpool {m.index_kpool}",
                ),
                (
                    "full indexer layers",
                    f"{m.full_indexer_layers} of {m.num_layers} ({m.indexer_rule.value}): "
                    + ", ".join(map(str, m.full_layer_ids)),
                ),
            )
            if m.is_dsa
            else ()  # a model without a DSA indexer: nothing to say about one
        ),
        ("max positions", count(m.max_position_embeddings)),
        ("parameters", count(m.total_params)),
        *((f"weights at tp {w.tp}", f"{size(w.bytes)} measured: {w.source}") for w in m.measured_weights),
        ("source", m.source),
    )
    groups = tuple((g.name, count(g.params), g.split) for g in m.param_groups)
    data = {
        "model": {
            "name": m.name,
            "architecture": m.architecture,
            "num_layers": m.num_layers,
            "num_mtp_layers": m.num_mtp_layers,
            "attention": m.kind_label,
            "cache_kinds_at_tp8": list(describe_kinds(m.layers, 8)),
            "num_attention_heads": m.num_attention_heads,
            "num_kv_heads": m.num_kv_heads,
            "head_dim": m.head_dim,
            "v_head_dim": m.v_head_dim,
            "kv_lora_rank": m.kv_lora_rank,
            "qk_rope_head_dim": m.qk_rope_head_dim,
            **(
                {
                    "index_head_dim": m.index_head_dim,
                    "index_n_heads": m.index_n_heads,
                    "index_topk": m.index_topk,
                    "index_kpool": m.index_kpool,
                    "full_indexer_layer_ids": list(m.full_layer_ids),
                    "indexer_rule": m.indexer_rule.value,
                }
                if m.is_dsa
                else {}
            ),
            "max_position_embeddings": m.max_position_embeddings,
            "total_params": m.total_params,
            "param_groups": {g.name: g.params for g in m.param_groups},
            "measured_weights": [asdict(w) for w in m.measured_weights],
        }
    }
    return Report(
        "models show",
        f"Model {m.name}",
        (Section("", rows, ("", "")), Section("Parameter groups", groups, ("group", "params", "split"))),
        data,
    )


def deployments_list_report(plans: list[PoolPlan]) -> Report:
    """The presets, each with the pool its engine would build (or that it would not start)."""
    rows = tuple(
        (
            d.name,
            f"{d.engine} {d.engine_version}",
            f"tp {d.tp}, dcp {d.dcp}",
            d.kv_cache_dtype,
            "does not start" if p.startup_error else count(p.logged_tokens),
        )
        for p in plans
        for d in (p.deployment,)
    )
    data = {
        "deployments": [
            {
                "name": d.name,
                "model": d.model,
                "engine": d.engine,
                "engine_version": d.engine_version,
                "gpu": d.gpu.key,
                "tp": d.tp,
                "dcp": d.dcp,
                "kv_cache_dtype": d.kv_cache_dtype,
                "pool_tokens": p.logged_tokens,
                "startup_error": p.startup_error,
            }
            for p in plans
            for d in (p.deployment,)
        ]
    }
    return Report(
        "deployments",
        "Deployment presets",
        (Section("", rows, ("name", "engine", "parallel", "kv dtype", "pool tokens")),),
        data,
        notes=tuple(f"{p.deployment.name}: {startup_line(p.startup_error)}" for p in plans if p.startup_error),
    )


def deployment_report(p: PoolPlan) -> Report:
    d = p.deployment
    head = (
        ("model", d.model),
        ("engine", f"{d.engine} {d.engine_version}"),
        ("GPU", f"{d.gpu.name}: {size(d.gpu.nvml_total_bytes)} NVML, {size(d.gpu.cuda_total_bytes)} CUDA"),
        (
            "layout",
            f"{d.nodes} node(s) × {d.gpus_per_node} GPUs, tp {d.tp}, dp-attention {d.dp_attention}, "
            f"ep {d.ep}, pp {d.pp}, dcp {d.dcp}",
        ),
        ("source", d.source),
    )
    return Report(
        "deployments show",
        f"Deployment {deployment_label(p)}, {p.semantics}",
        (
            Section("", head, ("", "")),
            first_screen.engine_section(p),
            knobs_section(p),
            cell_section(p),
            chain_section(p),
            *filter(None, (stages_section(p),)),
        ),
        for_model(p.arch, {"plan": plan_data(p)}),
        bar=memory_bar(p),
        notes=p.notes,
        startup_error=p.startup_error,
    )


def _knob_unit(name: str) -> str:
    """What a knob's value is, from the loader's own tables of how it parses each knob."""
    if name in load._GPU_COUNTS:
        return "count (GPUs)"
    if name in load._TOKEN_KNOBS:
        return "tokens (1M, 128K)"
    if name in (*load._MEMORY_KNOBS, "non_kv_other"):
        return "bytes (80GiB, 141GB)"
    units = {
        "mem_fraction_static": "fraction (0, 1]",
        "gpu_memory_utilization": "fraction (0, 1]",
        "max_running_requests": "count (requests)",
        "cuda_graph_max_bs": "count (batch size)",
        "swa_full_tokens_ratio": "fraction (0, 1]",
        "max_mamba_cache_size": "count (state slots)",
        "speculative_num_draft_tokens": "count (draft tokens)",
        "speculative_eagle_topk": "count",
        "disable_cuda_graph": "true or false",
        "disable_radix_cache": "true or false",
        "swa_eviction_interval": "count (tokens)",
        "allow_long_context": "true or false",
        "rope_scaling": "yarn (the model card's)",
        "quantization": "fp8 (online, on a bf16 checkpoint)",
        "engine": " | ".join(ENGINES),
        "engine_version": "any version in " + "; ".join(modelled_ranges(e) for e in ENGINES),
        "kv_cache_dtype": " | ".join(KV_CACHE_DTYPES),
        "mla_layout": " | ".join(m.value for m in MlaLayout),
        "gpu": "gpus.yaml name or a mapping",
        "attention_backend": "backend name",
        "model": "preset name or path",
        "pp_layer_partition": "layers per stage ([41, 39] or 41,39)",
    }
    return units.get(name, "value")


def _knob_default(name: str) -> str:

    if name == "engine":
        return load.DEFAULT_ENGINE
    if name == "engine_version":
        return ", ".join(f"{e} {v[0]}" for e, v in ENGINES.items())
    if name == "gpu":
        return load.DEFAULT_GPU
    if name == "rope_scaling":
        return "off (config.json's own)"
    if name == "quantization":
        return "the checkpoint's own"
    field = next(f for f in fields(Deployment) if f.name == name)
    if field.default is MISSING:
        return "required"
    if field.default is None:
        return "engine's"
    return str(field.default).lower() if isinstance(field.default, bool) else str(field.default)


def knobs_report() -> Report:
    """Every deployment knob (kvplan.models.deploy.KNOBS): which engine reads it, its unit and its default."""
    rows = []
    data = []
    for name in KNOBS:
        only = ENGINE_KNOBS.get(name)
        engines = only[0] if only else "sglang, vllm"
        aliases = sorted(a for a, k in ALIASES.items() if k == name)
        rows.append((name, engines, _knob_unit(name), _knob_default(name)))
        data.append(
            {
                "name": name,
                "engines": engines.split(", "),
                "unit": _knob_unit(name),
                "default": _knob_default(name),
                "aliases": aliases,
                "other_engine": only[1] if only else None,
            }
        )
    notes = (
        "engine's: left out, the knob takes the engine's own default, computed as the engine does "
        "(kvplan deployments show marks each one)",
        "gpu: a name `kvplan gpus` lists (any case, aliases, the name nvidia-smi prints), or gpu=custom with"
        " gpu_memory=96GiB (its NVML total) and optionally gpu_sm=90",
        *(f"{n} ({engine} only), instead: {other}" for n, (engine, other) in ENGINE_KNOBS.items()),
    )
    return Report(
        "knobs",
        "Deployment knobs (YAML keys and --set KNOB=VALUE; engine flag spellings are accepted too)",
        (Section("", tuple(rows), ("knob", "engines", "unit", "default")),),
        {"knobs": data},
        notes=notes,
    )
