"""The sections and JSON that several commands' reports share: a plan's title, cell, chain, knobs, memory bar and
data; the workspace table; a footprint's and a pool need's figures; a remedy's text."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.engines.band import pool_band
from kvplan.engines.common import PoolPlan, Term
from kvplan.plan.admit import Remedy
from kvplan.plan.budget import Footprint, PoolNeed
from kvplan.plan.workspace import Workspace
from kvplan.render import Bar, Section, count, first_screen, gib, nbytes, size
from kvplan.render.applies import SET_SUFFIX, carry_data, carry_line, knob_origin
from kvplan.render.applies import knob_value as _value
from kvplan.render.pipeline_report import stages_data


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
    rows = [_chain_row(t) for t in chain]
    band = pool_band(p) if p.loads_weights else None
    if band is not None and not band.exact:  # the pool the chain ends on says it is an estimate, on its own line
        label, value, how = rows[-1]
        rows[-1] = (label, value, f"{how}; ≈ {band.phrase()}")
    return Section(f"Memory chain of one GPU ({p.semantics})", tuple(rows), ("step", "value", "how"))


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
        "pool_band": pool_band(p).data(),
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


def fp_data(f: Footprint) -> dict[str, int]:
    return {**asdict(f), "total_bytes": f.total_bytes}


def remedy_detail(m: Remedy) -> str:
    """A remedy's detail with its byte figures written in GiB and GB."""
    text = m.detail
    for name, n in m.sizes:
        text = text.replace("{size:" + name + "}", size(n))
    return text


def demands_text(n: PoolNeed) -> str:
    return "; ".join(f"{d.kind}: {d.units:,}" for d in n.demands)


def pool_need_data(needs: tuple[PoolNeed, ...]) -> list[dict[str, Any]]:
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
