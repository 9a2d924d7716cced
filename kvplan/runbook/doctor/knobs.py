"""The knobs a log reveals (printed args, the logged row) and the pool they imply."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import ENGINES, Deployment
from kvplan.runbook.doctor.causes import _allocated_for_rows
from kvplan.runbook.doctor.plans import _backend, _float, _kv_dtype, _plan, _resolved, _shown_config, _with
from kvplan.runbook.doctor.pool import _measure_plain
from kvplan.runbook.doctor.results import LoggedPool, Revealed
from kvplan.runbook.logged_row import logged_row
from kvplan.runbook.parse import Run
from kvplan.runbook.printed_knobs import printed

# --------------------------------------------------------------------------- knobs the log reveals


@dataclass(frozen=True)
class _Shown:
    knob: str
    value: object
    shown: str
    source: str
    line: int


def _sglang_knobs(run: Run) -> list[_Shown]:
    out: dict[str, _Shown] = {}

    def put(knob: str, value: object, shown: str, source: str, line: int) -> None:
        out[knob] = _Shown(knob, value, shown, source, line)

    if run.args is not None:
        a, line = run.args.value, run.args.line
        for key, knob in (("tp_size", "tp"), ("pp_size", "pp"), ("ep_size", "ep")):
            v = a.integer(key)
            if v is not None and v > 0:
                put(knob, v, str(v), f"server_args {key}", line)
        for key in ("dcp_size", "attn_dcp_size", "decode_context_parallel_size"):
            v = a.integer(key)
            if v is not None and v > 0:
                put("dcp", v, str(v), f"server_args {key}", line)
        if a.flag("enable_dp_attention") and (v := a.integer("dp_size")):
            put("dp_attention", v, str(v), "server_args dp_size (dp attention on)", line)
        dtype = a.text("kv_cache_dtype")
        if dtype and (mapped := _kv_dtype(dtype, "sglang")):
            put("kv_cache_dtype", mapped, repr(dtype), "server_args kv_cache_dtype", line)
        if (mfs := a.number("mem_fraction_static")) is not None:
            put("mem_fraction_static", _float(mfs), mfs, "server_args mem_fraction_static", line)
        for key, knob in (
            ("page_size", "page_size"),
            ("context_length", "context_length"),
            ("chunked_prefill_size", "chunked_prefill_size"),
            ("max_running_requests", "max_running_requests"),
            ("max_total_tokens", "max_total_tokens"),
            ("cuda_graph_max_bs", "cuda_graph_max_bs"),
        ):
            v = a.integer(key)
            if v is not None and v > 0:
                put(knob, v, str(v), f"server_args {key}", line)
        if a.has("speculative_algorithm"):
            algorithm = a.text("speculative_algorithm")
            if algorithm is None:
                put("speculative_num_draft_tokens", 0, "off", "server_args speculative_algorithm", line)
            else:
                drafts = a.integer("speculative_num_draft_tokens") or (a.integer("speculative_num_steps") or 0) + 1
                put("speculative_num_draft_tokens", drafts, f"{algorithm}, {drafts} draft tokens",
                    "server_args speculative_*", line)  # fmt: skip
        if (flag := a.flag("disable_cuda_graph")) is not None:
            put("disable_cuda_graph", flag, str(flag), "server_args disable_cuda_graph", line)
        for knob, value, shown, key in printed(a, "sglang"):
            put(knob, value, shown, f"server_args {key}", line)
        for prefix in ("dsa", "nsa"):
            p, d = a.text(f"{prefix}_prefill_backend"), a.text(f"{prefix}_decode_backend")
            if p and d:
                put("attention_backend", _backend(p, d), f"prefill={p}, decode={d}",
                    f"server_args {prefix}_*_backend", line)  # fmt: skip
    if run.page_size is not None:
        put("page_size", run.page_size.value, str(run.page_size.value), "Setting page size", run.page_size.line)
    if run.dsa_kv_dtype is not None and (mapped := _kv_dtype(run.dsa_kv_dtype.value, "sglang")):
        put("kv_cache_dtype", mapped, run.dsa_kv_dtype.value, "Setting KV cache dtype", run.dsa_kv_dtype.line)
    if run.dsa_backends is not None:
        p, d = run.dsa_backends.value
        put("attention_backend", _backend(p, d), f"prefill={p}, decode={d}", "Set DSA backends",
            run.dsa_backends.line)  # fmt: skip
    if run.kv and run.kv[0].value.dtype and (mapped := _kv_dtype(run.kv[0].value.dtype, "sglang")):
        shown = run.kv[0].value.dtype
        before = out.get("kv_cache_dtype")
        if before is not None and before.value != mapped:
            shown += f" (from {before.shown} in {before.source})"
        put("kv_cache_dtype", mapped, shown, "KV Cache is allocated dtype", run.kv[0].line)
    if run.summary is not None:
        s = run.summary
        put("context_length", s.value.context_len, str(s.value.context_len), "scheduler context_len", s.line)
        if s.value.chunked_prefill_size is not None and s.value.chunked_prefill_size > 0:
            put("chunked_prefill_size", s.value.chunked_prefill_size, str(s.value.chunked_prefill_size),
                "scheduler chunked_prefill_size", s.line)  # fmt: skip
        if "dcp" not in out and run.kv:
            rows, logical = run.kv[0].value.tokens, s.value.max_total_num_tokens
            if rows and logical % rows == 0 and logical // rows > 1:
                put("dcp", logical // rows, f"{logical:,} / {rows:,}",
                    "scheduler max_total_num_tokens / KV #tokens", s.line)  # fmt: skip
    _put_long_context(run, put, "context_length" in out)
    return list(out.values())


def _vllm_knobs(run: Run) -> list[_Shown]:
    out: dict[str, _Shown] = {}

    def put(knob: str, value: object, shown: str, source: str, line: int) -> None:
        out[knob] = _Shown(knob, value, shown, source, line)

    for at, where in ((run.args, "engine config"), (run.cli_args, "non-default args")):
        if at is None:
            continue
        a, line = at.value, at.line
        for key, knob in (
            ("tensor_parallel_size", "tp"),
            ("pipeline_parallel_size", "pp"),
            ("decode_context_parallel_size", "dcp"),
            ("max_seq_len", "context_length"),
            ("max_model_len", "context_length"),
            ("block_size", "page_size"),
            ("max_num_seqs", "max_running_requests"),
            ("max_num_batched_tokens", "max_num_batched_tokens"),
        ):
            v = a.integer(key)
            if v is not None and v > 0:
                put(knob, v, str(v), f"{where} {key}", line)
        dtype = a.text("kv_cache_dtype")
        if dtype and (mapped := _kv_dtype(dtype, "vllm")):
            put("kv_cache_dtype", mapped, dtype, f"{where} kv_cache_dtype", line)
        if (util := a.number("gpu_memory_utilization")) is not None:
            put("gpu_memory_utilization", _float(util), util, f"{where} gpu_memory_utilization", line)
        if (kvm := a.integer("kv_cache_memory_bytes")) is not None and kvm > 0:
            put("kv_cache_memory", kvm, f"{kvm:,}", f"{where} kv_cache_memory_bytes", line)
        for knob, value, shown, key in printed(a, "vllm"):
            put(knob, value, shown, f"{where} {key}", line)
        if a.has("speculative_config"):
            spec = a.raw("speculative_config") or "None"
            if spec == "None":
                put("speculative_num_draft_tokens", 0, "off", f"{where} speculative_config", line)
            else:
                m = re.search(r"num_(?:speculative|spec)_tokens['\"]?\s*[=:]\s*(\d+)", spec)
                n = int(m.group(1)) if m else 1
                put("speculative_num_draft_tokens", n, spec[:60], f"{where} speculative_config", line)
    if run.max_model_len is not None:
        put("context_length", run.max_model_len.value, str(run.max_model_len.value), "Using max model len",
            run.max_model_len.line)  # fmt: skip
    if run.block_size is not None:
        put("page_size", run.block_size.value, str(run.block_size.value), "Setting kv cache block size",
            run.block_size.line)  # fmt: skip
    if run.kv_format is not None and run.kv_format.value in ("fp8_ds_mla",):
        put("mla_layout", run.kv_format.value, run.kv_format.value, "Using ... KV cache format", run.kv_format.line)
    if run.dcp_multiplier is not None:
        put("dcp", run.dcp_multiplier.value, str(run.dcp_multiplier.value), "dcp_world_size multiplier",
            run.dcp_multiplier.line)  # fmt: skip
    if run.concurrency is not None:
        c = run.concurrency
        put("context_length", c.value.max_model_len, f"{c.value.max_model_len:,}", "Maximum concurrency line", c.line)
    if run.kv_cache_size is not None and run.kv_cache_size.value.max_model_len is not None:
        k = run.kv_cache_size
        length = k.value.max_model_len
        put("context_length", length, f"{length:,}", "GPU KV cache size line", k.line)
    if run.max_len_error is not None:
        e = run.max_len_error
        put("context_length", e.value.max_model_len, str(e.value.max_model_len), "max seq len error", e.line)
    _put_long_context(run, put, "context_length" in out)
    return list(out.values())


def _put_long_context(run: Run, put: Any, have_length: bool) -> None:
    """A length above the derived one that the engine allowed (its warning, or the env var): the knob, and the
    length the warning prints where no other line gave it (kvplan.runbook.long_context)."""
    lc = run.long_context
    if lc is None:
        return
    source = "the engine's long-context warning" if lc.value.length is not None else "the env var in the log"
    put("allow_long_context", True, lc.value.shown, source, lc.line)
    if lc.value.length is not None and not have_length:
        put("context_length", lc.value.length, f"{lc.value.length:,}", "the engine's long-context warning", lc.line)


def _reveal(arch: ModelArch, dep: Deployment, config: PoolPlan, run: Run, pool: LoggedPool | None,
            notes: list[str]) -> tuple[tuple[Revealed, ...], Deployment]:  # fmt: skip
    shown = _sglang_knobs(run) if dep.engine == "sglang" else _vllm_knobs(run)
    shown = _with_logged_row(arch, dep, shown, run)
    result: list[Revealed] = []
    changes: dict[str, Any] = {}
    for s in shown:
        if s.knob == "kv_cache_dtype" and "mla_layout" not in {x.knob for x in shown}:
            change: dict[str, Any] = {"kv_cache_dtype": s.value, "mla_layout": None}
        else:
            change = {s.knob: s.value}
        after = _plan(arch, _with(dep, change))
        if after is None:
            notes.append(f"the log's {s.knob} {s.shown} ({s.source}, line {s.line}) cannot be planned: left out")
            continue
        differs = _resolved(after, s.knob) != _resolved(config, s.knob)
        value, origin = _shown_config(config, s.knob)
        explained = ""
        if differs and s.knob == "mem_fraction_static" and origin != "set" and dep.engine == "sglang":
            for version in ENGINES["sglang"]:
                other = _plan(arch, _with(dep, {"engine_version": version}))
                if (
                    version != dep.engine_version
                    and other is not None
                    and other.knob("mem_fraction_static").value == s.value
                ):
                    explained = f"SGLang {version}'s default for this GPU and layout"
        result.append(
            Revealed(
                knob=s.knob,
                value=s.value,
                shown=s.shown,
                source=s.source,
                line=s.line,
                config_value=value,
                config_origin=origin,
                differs=differs,
                config_pool=_measure_plain(config, pool),
                pool_after=_measure_plain(after, pool),
                cell_before=config.cell.total_bytes,
                cell_after=after.cell.total_bytes,
                explained_by=explained,
            )
        )
        changes.update(change)
    dep1 = _with(dep, changes)
    final = _plan(arch, dep1)
    if final is not None:
        drifting = [f"{r.knob} {r.shown}" for r in result if r.differs]
        logged = any(s.source == LOGGED_ROW_SOURCE for s in shown)
        result = [_consequence(arch, dep1, final, r, drifting, logged) for r in result]
    return tuple(result), dep1


LOGGED_ROW_SOURCE = "KV Cache is allocated KV size"


def _with_logged_row(arch: ModelArch, dep: Deployment, shown: list[_Shown], run: Run) -> list[_Shown]:
    """The row layout the log's KV size states, as one more printed knob (like with like)."""
    if any(s.knob == "mla_layout" for s in shown):
        return shown
    d = dep
    for s in shown:  # the printed knobs that plan, as _reveal applies them
        nd = _with(d, {s.knob: s.value})
        d = nd if _plan(arch, nd) is not None else d
    p = _plan(arch, d)
    row = logged_row(arch, d, p.is_fp8, run, _allocated_for_rows) if p is not None else None
    if p is None or row is None or row.layout.value == p.kv_format:
        return shown
    return [*shown, _Shown("mla_layout", row.layout.value, row.shown, LOGGED_ROW_SOURCE, row.line)]


_FIELD_DEFAULT: dict[str, object] = {
    "kv_cache_dtype": "auto",
    "dtype": "auto",
    "disable_cuda_graph": False,
    "disable_hybrid_kv_cache_manager": False,
    "disable_radix_cache": False,
}


def _consequence(arch: ModelArch, dep1: Deployment, final: PoolPlan, r: Revealed, drifting: list[str],
                 row_logged: bool = False) -> Revealed:  # fmt: skip
    """Mark a defaulted knob whose logged value the engine would pick anyway, given the log's other knobs."""
    if not r.differs or r.config_origin == "set" or not hasattr(dep1, r.knob):
        return r
    back: dict[str, Any] = {r.knob: _FIELD_DEFAULT.get(r.knob)}
    if row_logged and r.knob == "kv_cache_dtype":
        back["mla_layout"] = None  # the row the KV size states presupposes the dtype: it picks nothing by itself
    p = _plan(arch, _with(dep1, back))
    if p is None or _resolved(p, r.knob) != _resolved(final, r.knob):
        return r
    others = [x for x in drifting if not x.startswith(f"{r.knob} ")]
    why = f" ({', '.join(others)})" if others else ""
    return replace(r, consequence=True, explained_by=f"what the engine picks itself given the log's other knobs{why}")
