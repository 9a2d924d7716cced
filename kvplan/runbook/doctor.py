"""The doctor: is the pool an engine built the pool the config implies, and if not, why? (pure)

It reads the last complete server start of a log (``kvplan.runbook.parse``) and rebuilds the expected pool:

(a) from the config alone: ``plan_pool`` of the deployment. ``(a')`` is the same with the knobs the log reveals
    (tp, dcp, kv dtype and DSA backend, memory fraction, page size, context length, MTP, ...) applied with
    ``dataclasses.replace``; each knob that differs from the config is a finding with its own pool effect.
(b) from the memory figures the log reports, with (a')'s accounting. SGLang: pre-load free = ``Load weight
    begin avail mem`` and weights = pre-load free − ``Load weight end avail mem`` (= its ``mem usage``, the
    minimum over ranks, as SGLang takes it); vLLM: ``Available KV cache memory`` → num_blocks via bytes_per_block.

A gap between (a') and (b) is memory (the log's weights or free memory differ from the config's); a gap
between (b) and the logged pool is accounting: the doctor re-plans with each known cause (indexer on every
layer = SGLang 0.5.9 semantics or elision off; a dcp factor; bf16 / fp8_ds_mla / raw-fp8 rows; an MTP draft pool;
the memory fraction; vLLM's block size; one padding page or the null block) and reports the ones whose pool
falls within the log's rounding.

Tolerance: every memory figure a log prints is rounded (SGLang ``{:.2f}`` GiB, vLLM ``round(x, 2)`` GiB), so
it stands for ±half a unit of its last decimal (±0.005 GiB = ±5,368,709 B). (b) is planned at both ends of
that interval and "matches" means the logged count lies in the resulting range; a config figure matches a
logged one when it rounds to it. Counts (tokens, rows, blocks) are exact; vLLM's ``GPU KV cache size`` next to
a concurrency figure is ``int(num_blocks / blocks_per_request × max_model_len)`` and may lose one token to its
float arithmetic, so one token is allowed there.

Then the runbook checks: admission of ``--ctx`` with the log's pool, what a ``--hit`` cannot save of the indexer
work, and the per-step indexer K read that makes decode time linear in context.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm import max_len_fitting
from kvplan.engines.vllm_hybrid_log import blocks_for_logged_tokens
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention
from kvplan.models.deploy import ENGINES, KV_CACHE_DTYPES, Deployment
from kvplan.models.deployment import load_deployment
from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog
from kvplan.models.presets import preset_names
from kvplan.plan.admit import Admission, Request, admit, with_pool_tokens
from kvplan.plan.prefix import PrefixHit, prefix_hit
from kvplan.runbook.evidence import Candidate, Evidence, gather, rank_candidates
from kvplan.runbook.logged_row import logged_row
from kvplan.runbook.memory_chain import MemoryChain, gpu_hint, sglang_chain, taken_after_load
from kvplan.runbook.parse import At, Gib, ParsedLog, Run, largest, smallest
from kvplan.runbook.printed_knobs import printed
from kvplan.runbook.verdict import (
    MISMATCH_ADD,
    ROWS_ADD,
    closes_gap,
    deviation_percent,
    near_rows,
    refusal_figures_agree,
)
from kvplan.search import smallest_true
from kvplan.units import GiB, cdiv
from kvplan.versions import SGLANG as SGLANG_ROWS
from kvplan.versions import VLLM as VLLM_ROWS
from kvplan.versions import parse_version, rules_for, sglang_rules, vllm_rules

MATCH = "match"
MISMATCH = "mismatch"
CANNOT_CHECK = "cannot_check"
CANNOT_TELL = "cannot_tell"

# The class an engine prints for a model is not always the config's: SGLang and vLLM serve DeepSeek-V3.2 with the V3
# class (DeepseekV3ForCausalLM: the checkpoint's own architectures field says DeepseekV32ForCausalLM), and the MTP
# drafter prints its NextN class.
CLASS_ALIASES: dict[str, frozenset[str]] = {
    "DeepseekV32ForCausalLM": frozenset({"DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN"}),
    "DeepseekV3ForCausalLM": frozenset({"DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN"}),
    "KimiK25ForConditionalGeneration": frozenset({"DeepseekV3ForCausalLM"}),
}


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class ModelCheck:
    kind: str
    """'ok', 'unknown' (the log names no model class), 'class_differs', or 'mha' (a K/V pool: not MLA)."""
    log_class: str | None
    arch_class: str
    model_path: str | None


@dataclass(frozen=True, kw_only=True)
class Revealed:
    """A knob the log shows, against the config's resolved value."""

    knob: str
    value: object
    shown: str
    source: str
    line: int
    config_value: object
    config_origin: str
    differs: bool
    config_pool: int
    """The config plan's logged pool (tokens, or rows for a KV-line-only SGLang log)."""
    pool_after: int
    """The same with only this knob changed."""
    cell_before: int
    cell_after: int
    explained_by: str = ""
    consequence: bool = False
    """The config leaves the knob to the engine, and the engine picks the log's value once the log's other knobs
    are applied (dcp 8 -> trtllm and mem_fraction_static 0.897): not a drift of its own."""

    @property
    def changes_pool(self) -> bool:
        return self.differs and self.pool_after != self.config_pool

    @property
    def drift(self) -> bool:
        """A difference that is a finding: it changes the pool and is not a consequence of another knob."""
        return self.changes_pool and not self.consequence


@dataclass(frozen=True, kw_only=True)
class MemoryTerm:
    name: str
    config_bytes: int | None
    log: Gib | None
    """The figure as printed; None for a term the doctor derives."""
    low_bytes: int | None
    high_bytes: int | None
    line: int | None
    matches: bool | None


@dataclass(frozen=True, kw_only=True)
class LoggedPool:
    """The pool count the log prints, and what the doctor compares it with."""

    value: int
    unit: str
    """'tokens' (SGLang max_total_num_tokens = rows × dcp; vLLM GPU KV cache size), 'rows' (SGLang #tokens),
    'blocks' (vLLM's profiled num_gpu_blocks before an override) or 'needed' (bytes one max-length request needs,
    from vLLM's refusal)."""
    source: str
    line: int
    pool_tokens: int | None
    """Logical tokens of the pool as built (for admission); None when the engine did not build one."""
    max_model_len: int | None = None
    needed: Gib | None = None


@dataclass(frozen=True, kw_only=True)
class Comparison:
    logged: LoggedPool
    config: int
    """(a): the deployment as given."""
    revealed: int
    """(a'): with the knobs the log reveals."""
    expected: int
    """(b): with the log's memory figures too (= a' when the log has none)."""
    low: int
    high: int
    """(b) at both ends of the rounding interval of the log's memory figures."""
    slack: int
    within: bool
    memory_from_log: bool
    available_low: int | None = None
    available_high: int | None = None


@dataclass(frozen=True, kw_only=True)
class Cause:
    key: str
    name: str
    change: str
    cell_bytes: int
    expected_cell_bytes: int
    value: int
    low: int
    high: int
    explains: bool
    plan: PoolPlan | None = None
    contradicted: str = ""
    """The byte fact of the log this cause contradicts (then it is never reported as the cause)."""
    fitted: bool = False
    """Found by fitting a knob the log does not show (a memory fraction, a cap), not from a figure of the log."""
    bytes_agree: bool | None = None
    """Whether this cause's rows have the bytes the log's byte figures give (None: not checked or no figure)."""


@dataclass(frozen=True, kw_only=True)
class ByteFact:
    """What the log's own byte figures say about the bytes of one pool row (SGLang: 'KV size' for '#tokens' rows;
    vLLM: 'Available KV cache memory' over the blocks), against the config's. Evidence first: a cause that
    contradicts it is never reported."""

    what: str
    line: int
    low: int
    high: int
    """Bytes per pool row (SGLang: per row of one rank; vLLM: per block) the figures allow."""
    config: int
    """The config's bytes for the same row or block."""
    unit: str
    """'B per row' or 'B per block'."""

    @property
    def agrees(self) -> bool:
        return self.low <= self.config <= self.high


@dataclass(frozen=True, kw_only=True)
class Headline:
    """The one line a person reads first: what the doctor can say, in evidence order."""

    kind: str
    """'match', 'cause' (one known cause explains the log), 'memory' (the pool is the config's rows in the log's
    budget: the config's memory figures differ from the log's), 'model' (the log is from another model: its bytes per
    row disagree), 'refused' (the engine refused to start), 'mismatch' (a gap no known cause explains), or
    'cannot_tell' (the log lacks what the verdict needs: ``missing`` says what to add)."""
    cause: Cause | None = None
    missing: tuple[str, ...] = ()
    knob: str = ""
    """For a cause the log prints (a revealed knob, ``cause`` None): the knob whose value closes the gap."""


@dataclass(frozen=True, kw_only=True)
class PerRank:
    rows: int
    logical: int
    dcp: int
    rows_line: int
    logical_line: int

    @property
    def consistent(self) -> bool:
        return self.logical == self.rows * self.dcp


@dataclass(frozen=True, kw_only=True)
class KvSize:
    """SGLang's ``KV size``: what the pool tensors take (padding rows and pages included)."""

    logged: Gib
    rows: int
    expected_bytes: int
    budget_bytes: int
    line: int

    @property
    def matches(self) -> bool:
        return self.logged.covers(self.expected_bytes)

    @property
    def overcommits(self) -> bool:
        """More than 1 % over the budget: beyond the padding page and index pages cell_size leaves out."""
        return self.expected_bytes > self.budget_bytes + self.budget_bytes // 100


@dataclass(frozen=True, kw_only=True)
class StartupCheck:
    message: str
    line: int
    max_model_len: int | None
    needed: Gib | None
    available: Gib | None
    estimated_max_len: int | None
    predicted: bool
    planned_needed_bytes: int | None
    planned_estimate_low: int | None
    planned_estimate_high: int | None
    planned_refuses: bool = False
    """The plan refuses at the log's max_model_len too (``predicted`` also needs its figures to be the log's)."""


@dataclass(frozen=True, kw_only=True)
class Implied:
    """Bytes per pool row the log's own figures imply, and model shapes that fit."""

    low: int
    high: int
    rows: int
    how: str
    shapes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DecodeRead:
    ctx_tokens: int
    indexer_bytes_per_token: int
    indexer_read_bytes: int
    sparse_read_bytes: int
    weights_bytes: int
    hbm_bytes_per_s: int
    indexer_us: int
    weights_us: int
    crossover_ctx: int
    """The context at which one request's indexer K read equals the weight read."""
    batch_equal: int
    """Requests of ``ctx_tokens`` whose indexer K read together equals the weight read of one step."""
    weights_source: str


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    log: ParsedLog
    run: Run
    status: str
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    model: ModelCheck
    # what a diagnosis that stops early (no config, a K/V log against an MLA config) leaves out: nothing planned
    config: PoolPlan | None = None
    revealed: tuple[Revealed, ...] = ()
    revealed_plan: PoolPlan | None = None
    memory: tuple[MemoryTerm, ...] = ()
    memory_matches: bool | None = None
    log_plan: PoolPlan | None = None
    comparison: Comparison | None = None
    causes: tuple[Cause, ...] = ()
    per_rank: PerRank | None = None
    kv_size: KvSize | None = None
    startup: StartupCheck | None = None
    implied: Implied | None = None
    log_budget: tuple[int, int] | None = None
    """For a pool kvplan cannot plan: the KV budget the log's own memory figures give (bytes, low and high)."""
    best: PoolPlan | None = None
    admission: Admission | None = None
    admission_asked: bool = False
    prefix: PrefixHit | None = None
    decode: DecodeRead | None = None
    byte_fact: ByteFact | None = None
    headline: Headline = Headline(kind="cannot_tell")
    evidence: Evidence | None = None
    chain: MemoryChain | None = None
    """SGLang's memory of one GPU term by term (held before loading, weights, the pool, the rest) against the plan."""

    @property
    def explaining(self) -> tuple[Cause, ...]:
        return tuple(c for c in self.causes if c.explains and not c.contradicted)

    @property
    def ok(self) -> bool:
        return self.status == MATCH


# --------------------------------------------------------------------------- helpers


def _with(dep: Deployment, changes: dict[str, Any]) -> Deployment:
    if not changes:
        return dep
    explicit = dep.explicit | frozenset(k for k in changes if k not in ("engine", "engine_version"))
    return replace(dep, **changes, explicit=explicit)


def _plan(arch: ModelArch, dep: Deployment) -> PoolPlan | None:
    try:
        return plan_pool(arch, dep)
    except InputError:
        return None


def _family(p: PoolPlan) -> str:
    return "fp8" if p.is_fp8 else "bf16"


def _resolved(p: PoolPlan, knob: str) -> object:
    """A knob's effective value in a plan, for comparing the config with the log."""
    if knob == "kv_cache_dtype":
        return f"{_family(p)}/{p.kv_format}"
    if knob == "mla_layout":
        return p.kv_format
    if knob == "context_length":
        return p.context_len
    if knob == "dcp":
        return p.dcp
    if knob == "page_size":
        return p.page_tokens
    for k in p.knobs:
        if k.name == knob:
            return k.value
    return getattr(p.deployment, knob)


def _shown_config(p: PoolPlan, knob: str) -> tuple[object, str]:
    """The config's value of a knob as a person reads it, and its origin."""
    for k in p.knobs:
        if k.name == knob:
            value = k.value
            if knob == "kv_cache_dtype":
                value = f"{k.value} ({p.kv_format} rows)"
            return value, k.origin
    if knob == "page_size":
        return p.page_tokens, "set" if "page_size" in p.deployment.explicit else "default"
    value = _resolved(p, knob)
    return value, "set" if knob in p.deployment.explicit else "default"


def _kv_dtype(text: str, engine: str) -> str | None:
    t = text.strip().lower().removeprefix("torch.")
    if t in ("auto", "bfloat16", "bf16", "fp8_ds_mla"):
        return t
    if t.startswith("float8_e4m3") or t in ("fp8_e4m3", "fp8"):
        return "fp8_e4m3" if engine == "sglang" else ("fp8" if t == "fp8" else "fp8_e4m3")
    return t if t in KV_CACHE_DTYPES else None


def _backend(prefill: str, decode: str) -> str:
    if "trtllm" in (prefill, decode):
        return "trtllm"
    return prefill if prefill == decode else f"{prefill}/{decode}"


def _float(text: str) -> float:
    return float(text)


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


# --------------------------------------------------------------------------- the logged pool


def _logged_pool(run: Run, engine: str) -> LoggedPool | None:
    if engine == "sglang":
        if run.summary is not None:
            s = run.summary
            return LoggedPool(
                value=s.value.max_total_num_tokens,
                unit="tokens",
                source="max_total_num_tokens",
                line=s.line,
                pool_tokens=s.value.max_total_num_tokens,
            )
        if run.kv:
            k = run.kv[0]
            return LoggedPool(value=k.value.tokens, unit="rows", source="KV Cache is allocated #tokens",
                              line=k.line, pool_tokens=None)  # fmt: skip
        if run.total_tokens is not None:
            t = run.total_tokens
            return LoggedPool(value=t.value, unit="tokens", source="max_total_num_tokens (bench_latency)",
                              line=t.line, pool_tokens=t.value)  # fmt: skip
        return None
    if run.override is not None:
        o = run.override
        return LoggedPool(value=o.value.profiled_blocks, unit="blocks", source="Overriding num_gpu_blocks",
                          line=o.line, pool_tokens=None)  # fmt: skip
    if run.v0_blocks is not None:
        b = run.v0_blocks
        return LoggedPool(value=b.value.gpu_blocks, unit="blocks", source=f"# {b.value.device} blocks (vLLM V0)",
                          line=b.line, pool_tokens=None)  # fmt: skip
    if run.kv_cache_size is not None:
        size = run.kv_cache_size
        return LoggedPool(
            value=size.value.tokens,
            unit="tokens",
            source="GPU KV cache size",
            line=size.line,
            pool_tokens=size.value.tokens,
            max_model_len=size.value.max_model_len,
        )
    if run.max_len_error is not None:
        e = run.max_len_error
        return LoggedPool(
            value=e.value.needed.bytes,
            unit="needed",
            source="max seq len error: KV cache is needed",
            line=e.line,
            pool_tokens=None,
            needed=e.value.needed,
        )
    return None


def _measure(p: PoolPlan, lp: LoggedPool) -> int:
    """The plan's figure in the unit of the logged one."""
    if lp.unit == "rows":
        return p.rows
    if lp.unit == "needed":
        return p.extras.get("max_model_len_needed_bytes", 0)
    if p.engine == "vllm":
        n = p.extras.get("num_blocks", p.rows // max(p.page_tokens, 1))
        if lp.unit == "blocks":
            return n
        if p.pools:
            return p.logged_tokens  # a hybrid: the engine rules give 'GPU KV cache size' as that version prints it
        if lp.max_model_len:
            per_request = cdiv(cdiv(lp.max_model_len, p.dcp), p.page_tokens)
            return n * lp.max_model_len // per_request
        return n * p.page_tokens * p.dcp
    return p.logged_tokens


def _measure_plain(p: PoolPlan, lp: LoggedPool | None) -> int:
    return _measure(p, lp) if lp is not None and lp.unit != "needed" else p.logged_tokens


def _within(lp: LoggedPool, values: tuple[int, ...], slack: int) -> bool:
    if lp.unit == "needed":
        assert lp.needed is not None
        return any(lp.needed.covers(v) for v in values)
    return min(values) - slack <= lp.value <= max(values) + slack


# --------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class _LogMemory:
    terms: tuple[MemoryTerm, ...]
    matches: bool | None
    deps: tuple[Deployment, Deployment, Deployment] | None
    """(mid, low, high) deployments carrying the log's memory; None when the log has no memory figures."""
    available_low: int | None = None
    available_high: int | None = None


def _sglang_memory(arch: ModelArch, dep: Deployment, p: PoolPlan, run: Run, notes: list[str]) -> _LogMemory:
    pre_at = smallest(run.load_begin)
    end_at = smallest(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail is not None)
    usage_at = largest(At(e.value.usage, e.line, e.rank) for e in run.load_end if e.value.usage is not None)
    cfg_pre = p.knob("pre_load_free").as_int()
    cfg_w = p.knob("weights_per_gpu").as_int()
    terms: list[MemoryTerm] = []

    def term(name: str, cfg: int, at: At[Gib] | None) -> None:
        terms.append(
            MemoryTerm(
                name=name,
                config_bytes=cfg,
                log=at.value if at else None,
                low_bytes=at.value.low_bytes if at else None,
                high_bytes=at.value.high_bytes if at else None,
                line=at.line if at else None,
                matches=at.value.covers(cfg) if at else None,
            )
        )

    term("pre-load free (Load weight begin avail mem)", cfg_pre, pre_at)
    term("weights per GPU (Load weight end mem usage)", cfg_w, usage_at)
    term("free after weights (Load weight end avail mem)", cfg_pre - cfg_w, end_at)
    if pre_at is None and end_at is None:
        terms.append(MemoryTerm(name="available for the KV pool", config_bytes=p.available_bytes, log=None,
                                low_bytes=None, high_bytes=None, line=None, matches=None))  # fmt: skip
        return _LogMemory(tuple(terms), None, None)
    if pre_at is None:
        notes.append("the log has no 'Load weight begin' line: pre-load free memory is the config's")
    pre_mid = pre_at.value.bytes if pre_at else cfg_pre
    pre_lo = pre_at.value.low_bytes if pre_at else cfg_pre
    pre_hi = pre_at.value.high_bytes if pre_at else cfg_pre
    if end_at is not None:
        free_mid, free_lo, free_hi = end_at.value.bytes, end_at.value.low_bytes, end_at.value.high_bytes
    elif usage_at is not None:
        u = usage_at.value
        free_mid, free_lo, free_hi = pre_mid - u.bytes, pre_lo - u.high_bytes, pre_hi - u.low_bytes
    else:
        notes.append("the log has no 'Load weight end' line: the weights are the config's")
        free_mid, free_lo, free_hi = pre_mid - cfg_w, pre_lo - cfg_w, pre_hi - cfg_w
    mid = _with(dep, {"pre_load_free": pre_mid, "weights_per_gpu": max(pre_mid - free_mid, 0)})
    # the smallest budget: the most pre-load free memory (largest slack) with the least left after the weights
    low = _with(dep, {"pre_load_free": pre_hi, "weights_per_gpu": max(pre_hi - free_lo, 0)})
    high = _with(dep, {"pre_load_free": pre_lo, "weights_per_gpu": max(pre_lo - free_hi, 0)})
    plans = [_plan(arch, d) for d in (mid, low, high)]
    if any(x is None for x in plans):
        return _LogMemory(tuple(terms), None, None)
    _, pl, ph = (x for x in plans if x is not None)
    terms.append(
        MemoryTerm(
            name="available for the KV pool (free after − pre-load × (1 − mem_fraction_static))",
            config_bytes=p.available_bytes,
            log=None,
            low_bytes=pl.available_bytes,
            high_bytes=ph.available_bytes,
            line=None,
            matches=pl.available_bytes <= p.available_bytes <= ph.available_bytes,
        )
    )
    return _LogMemory(tuple(terms), terms[-1].matches, (mid, low, high), pl.available_bytes, ph.available_bytes)


def _vllm_memory(arch: ModelArch, dep: Deployment, p: PoolPlan, run: Run) -> _LogMemory:
    avail_at = smallest(run.available_kv)
    if avail_at is None and run.v0_memory is not None and run.v0_memory.value.kv is not None:
        avail_at = At(run.v0_memory.value.kv, run.v0_memory.line, run.v0_memory.rank)  # V0: kv_cache_size / the rest
    loading_at = largest(run.model_loading)
    terms = [
        MemoryTerm(
            name="weights per GPU (Model loading took)",
            config_bytes=p.knob("weights_per_gpu").as_int(),
            log=loading_at.value if loading_at else None,
            low_bytes=loading_at.value.low_bytes if loading_at else None,
            high_bytes=loading_at.value.high_bytes if loading_at else None,
            line=loading_at.line if loading_at else None,
            matches=loading_at.value.covers(p.knob("weights_per_gpu").as_int()) if loading_at else None,
        )
    ]
    mid_b = lo_b = hi_b = 0
    if avail_at is not None:
        g = avail_at.value
        mid_b, lo_b, hi_b = g.bytes, g.low_bytes, g.high_bytes
        line: int | None = avail_at.line
    elif run.max_len_error is not None:
        # the refusal prints the memory left after the null block: add one block back
        g = run.max_len_error.value.available
        bpb = p.extras.get("bytes_per_block", 0)
        mid_b, lo_b, hi_b = g.bytes + bpb, g.low_bytes + bpb, g.high_bytes + bpb
        line = run.max_len_error.line
    else:
        terms.append(MemoryTerm(name="available KV cache memory", config_bytes=p.available_bytes, log=None,
                                low_bytes=None, high_bytes=None, line=None, matches=None))  # fmt: skip
        return _LogMemory(tuple(terms), None, None)
    terms.append(
        MemoryTerm(
            name="available KV cache memory" + ("" if avail_at else " (from the max seq len error + 1 block)"),
            config_bytes=p.available_bytes,
            log=g if avail_at else None,
            low_bytes=lo_b,
            high_bytes=hi_b,
            line=line,
            matches=lo_b <= p.available_bytes <= hi_b,
        )
    )
    # a budget the log prints means the server loaded its weights: where kvplan's estimate would not load (the
    # config's bf16 weights of a quantized checkpoint), the count is checked on the budget alone (with a fixed
    # budget the weights enter vLLM's plan only through that load check)
    loaded = {} if p.loads_weights or avail_at is None else {"weights_per_gpu": 0}
    deps = (
        _with(dep, {"kv_cache_memory": mid_b, **loaded}),
        _with(dep, {"kv_cache_memory": max(lo_b, 1), **loaded}),
        _with(dep, {"kv_cache_memory": max(hi_b, 1), **loaded}),
    )
    return _LogMemory(tuple(terms), terms[-1].matches, deps, lo_b, hi_b)


# --------------------------------------------------------------------------- causes


@dataclass(frozen=True)
class _Hypothesis:
    key: str
    name: str
    change: str
    arch: ModelArch | None
    changes: tuple[tuple[str, Any], ...]


def _hypotheses(arch: ModelArch, dep: Deployment, p: PoolPlan, revealed: dict[str, object]) -> list[_Hypothesis]:
    out: list[_Hypothesis] = []
    n = arch.num_layers
    sglang = dep.engine == "sglang"
    as_0_5_9 = sglang and sglang_rules(dep.engine_version).indexer_all_layers  # any 0.5.9.x (versions.py)
    if sglang and arch.is_dsa and not as_0_5_9 and dep.dcp == 1:
        row = arch.kv_lora_rank + arch.qk_rope_head_dim
        out.append(
            _Hypothesis(
                "sglang_0_5_9",
                f"indexer on all {n} layers and {row} B × kv size per MLA layer (SGLang 0.5.9 semantics)",
                "--set engine_version=0.5.9",
                None,
                (("engine_version", "0.5.9"),),
            )
        )
    if arch.is_dsa and p.indexer_layers < n:
        all_full = replace(
            arch, indexer_full=(True,) * n, index_topk_freq=1, index_topk_pattern=None, index_skip_topk_offset=None
        )
        why = "shared-layer elision off (HiSparse, NPU PD/HiCache, external KV linker)" if sglang else "freq 1"
        out.append(
            _Hypothesis(
                "indexer_all",
                f"indexer on all {n} layers instead of {p.indexer_layers} ({why})",
                "model: every layer 'full'",
                all_full,
                (),
            )
        )
    if "dcp" not in revealed and not as_0_5_9:
        for d in range(1, dep.tp + 1):
            if dep.tp % d == 0 and d != dep.dcp:
                out.append(_Hypothesis("dcp", f"dcp {d} instead of {dep.dcp}", f"--set dcp={d}", None, (("dcp", d),)))
    if not arch.is_mla and "kv_cache_dtype" not in revealed:  # full attention: K/V in the other element size
        other = "auto" if p.is_fp8 else ("fp8_e4m3" if sglang else "fp8")
        out.append(
            _Hypothesis(
                "kv_dtype",
                f"{'bf16' if other == 'auto' else 'fp8'} K/V instead of {p.kv_format}",
                f"--set kv_cache_dtype={other}",
                None,
                (("kv_cache_dtype", other),),
            )
        )
    if "mla_layout" not in revealed and p.mla_layout is not None:
        current = p.mla_layout
        shown = str(revealed.get("kv_cache_dtype", "")).lower()
        family = "bf16" if shown in ("bfloat16", "bf16") else "fp8" if shown.startswith("fp8") else ""
        for layout in MlaLayout:
            if layout is p.mla_layout or (family and (layout is MlaLayout.BF16) != (family == "bf16")):
                continue
            size = layout.bytes_per_token_layer(arch.kv_lora_rank, arch.qk_rope_head_dim)
            if sglang:
                dtype = "bfloat16" if layout is MlaLayout.BF16 else "fp8_e4m3"
            else:
                dtype = "auto" if layout is MlaLayout.BF16 else "fp8"
            out.append(
                _Hypothesis(
                    "layout",
                    f"{layout.value} rows ({size} B/layer) instead of {current.value} "
                    f"({current.bytes_per_token_layer(arch.kv_lora_rank, arch.qk_rope_head_dim)} B/layer)",
                    f"--set kv_cache_dtype={dtype} --set mla_layout={layout.value}",
                    None,
                    (("kv_cache_dtype", dtype), ("mla_layout", layout.value)),
                )
            )
    if arch.num_mtp_layers and "speculative_num_draft_tokens" not in revealed:
        if dep.mtp:
            out.append(_Hypothesis("mtp", "no MTP draft pool", "--set speculative_num_draft_tokens=0", None,
                                   (("speculative_num_draft_tokens", 0),)))  # fmt: skip
        else:
            out.append(
                _Hypothesis(
                    "mtp",
                    f"an MTP draft pool ({arch.num_mtp_layers} NextN layer) in every row",
                    "--set speculative_num_draft_tokens=4",
                    None,
                    (("speculative_num_draft_tokens", 4),),
                )
            )
    if not sglang and "page_size" not in revealed:
        for block in (16, 32, 64, 128):
            if block != p.page_tokens:
                out.append(_Hypothesis("block_size", f"block size {block} instead of {p.page_tokens}",
                                       f"--set page_size={block}", None, (("page_size", block),)))  # fmt: skip
    return out


def _version_hypotheses(dep: Deployment, p: PoolPlan, revealed: dict[str, object]) -> list[_Hypothesis]:
    """The engine's other version rows (kvplan/versions.py), when the log does not print its version:
    each row's own accounting (budget cell, what the 'KV size' holds, defaults) is a known cause."""
    if "engine_version" in revealed:
        return []
    rows = SGLANG_ROWS if dep.engine == "sglang" else VLLM_ROWS
    current = rules_for(dep.engine, dep.engine_version)
    out = []
    for row in rows:
        if not row.modelled or not row.reference[:1].isdigit() or row.label == current.label:
            continue
        if dep.engine == "sglang" and row.reference == "0.5.9" and p.arch.is_dsa:
            continue  # the indexer-on-all-layers hypothesis is this row
        engine = "SGLang" if dep.engine == "sglang" else "vLLM"
        out.append(_Hypothesis("version", f"the rules of {engine} {row.label} (the log prints no version)",
                               f"--set engine_version={row.reference}", None,
                               (("engine_version", row.reference),)))  # fmt: skip
    return out


def _range_plans(arch: ModelArch, deps: tuple[Deployment, ...], h: _Hypothesis | None) -> tuple[PoolPlan, ...] | None:
    a = h.arch if h is not None and h.arch is not None else arch
    changes = dict(h.changes) if h is not None else {}
    plans = []
    for d in deps:
        p = _plan(a, _with(d, changes))
        if p is None:
            return None
        plans.append(p)
    return tuple(plans)


def _combine(a: _Hypothesis, b: _Hypothesis) -> _Hypothesis:
    return _Hypothesis(
        f"{a.key}+{b.key}",
        f"{a.name}, and {b.name}",
        f"{a.change} {b.change}",
        a.arch or b.arch,
        a.changes + b.changes,
    )


def _test(arch: ModelArch, deps: tuple[Deployment, ...], base: PoolPlan, lp: LoggedPool, slack: int,
          h: _Hypothesis) -> Cause | None:  # fmt: skip
    plans = _range_plans(arch, deps, h)
    if plans is None:
        return None
    values = tuple(_measure(p, lp) for p in plans)
    return Cause(
        key=h.key,
        name=h.name,
        change=h.change,
        cell_bytes=plans[0].cell.total_bytes,
        expected_cell_bytes=base.cell.total_bytes,
        value=values[0],
        low=min(values),
        high=max(values),
        explains=_within(lp, values, slack),
        plan=plans[0],
    )


def _mem_fraction(arch: ModelArch, deps: tuple[Deployment, ...], base: PoolPlan, lp: LoggedPool) -> Cause | None:
    """SGLang: the memory fractions (in 0.001 steps) whose pool holds the logged count, when the log hides it."""
    if lp.unit not in ("tokens", "rows"):
        return None

    def measure(m: int, which: int) -> int | None:
        p = _plan(arch, _with(deps[which], {"mem_fraction_static": m / 1000}))
        return None if p is None or p.startup_error else _measure(p, lp)

    lo_m = smallest_true(300, 990, lambda m: (measure(m, 2) or 0) >= lp.value)  # the high-memory plan reaches it
    if lo_m is None:
        return None
    above = smallest_true(lo_m, 990, lambda m: (measure(m, 1) or 0) > lp.value)  # the low-memory plan passes it
    hi_m = 990 if above is None else above - 1
    if hi_m < lo_m:
        return None
    cur = base.knob("mem_fraction_static").as_float()
    plan = _plan(arch, _with(deps[0], {"mem_fraction_static": lo_m / 1000}))
    span = f"{lo_m / 1000:.3f}" if lo_m == hi_m else f"{lo_m / 1000:.3f}-{hi_m / 1000:.3f}"
    return Cause(
        key="mem_fraction",
        name=f"mem_fraction_static {span} instead of {cur}",
        change=f"--set mem_fraction_static={lo_m / 1000:.3f}",
        cell_bytes=base.cell.total_bytes,
        expected_cell_bytes=base.cell.total_bytes,
        value=lp.value,
        low=lp.value,
        high=lp.value,
        explains=True,
        fitted=True,
        plan=plan,
    )


def _one_page(base: PoolPlan, lp: LoggedPool) -> Cause | None:
    """The logged count is exactly one page (SGLang) or block (vLLM) away from the plan's."""
    if lp.unit not in ("tokens", "rows"):
        return None
    expected = _measure(base, lp)
    page = base.page_tokens if lp.unit == "rows" else base.logical_page_tokens
    if abs(lp.value - expected) != page:
        return None
    side = "more" if lp.value > expected else "fewer"
    name = (
        f"one block {side}: vLLM's null block (block 0 is counted in 'GPU KV cache size' but no request can use it)"
        if base.engine == "vllm"
        else f"one page {side}: SGLang's padding page (rows + {base.page_tokens} per layer are allocated; "
        "'#tokens' counts the rest)"
    )
    return Cause(key="page", name=name, change="", cell_bytes=base.cell.total_bytes,
                 expected_cell_bytes=base.cell.total_bytes, value=lp.value, low=lp.value, high=lp.value,
                 explains=True, plan=None)  # fmt: skip


# --------------------------------------------------------------------------- other checks


def _model_check(arch: ModelArch, run: Run) -> ModelCheck:
    if any(k.value.mha for k in run.kv) and arch.is_mla:  # a K/V pool in the log, an MLA model in the config
        kind = "mha"
    elif run.model_class is None:
        kind = "unknown"
    elif run.model_class != arch.architecture and run.model_class not in CLASS_ALIASES.get(arch.architecture, ()):
        kind = "class_differs"
    else:
        kind = "ok"
    return ModelCheck(kind=kind, log_class=run.model_class, arch_class=arch.architecture, model_path=run.model_path)


def _allocated_for_rows(arch: ModelArch, dep: Deployment, rows: int) -> int | None:
    """SGLang's pool tensors for exactly ``rows`` rows: the engine's own arithmetic, with a budget large enough
    and ``max_total_tokens`` pinning the row count."""
    big = _with(
        dep,
        {"pre_load_free": 64 * GiB + 4 * rows * 200_000, "weights_per_gpu": 1, "mem_fraction_static": 0.9,
         "max_total_tokens": rows},
    )  # fmt: skip
    p = _plan(arch, big)
    if p is None or p.rows != rows:
        return None
    return p.allocated_bytes - _index_outside_kv_size(p, rows)


KV_SIZE_WITH_INDEX = (0, 5, 4)
"""SGLang prints the index-K buffers in 'KV size' from sgl-project/sglang#11309 (0.5.4) on; before it the figure was
the MLA rows alone (the PR: 'KV size including index is actually 65.49 GB' where main printed 54.52 GB;
tests/data/logs/field/sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log)."""


def _index_outside_kv_size(p: PoolPlan, rows: int) -> int:
    """The index-K bytes of ``rows`` rows that the engine's 'KV size' leaves out (SGLang before 0.5.4)."""
    if p.engine != "sglang" or not p.indexer_layers or parse_version(p.engine_version) >= KV_SIZE_WITH_INDEX:
        return 0
    return (rows + p.page_tokens) * p.indexer_bytes_per_layer * p.indexer_layers


def _implied(lo_avail: int, hi_avail: int, rows: int, page: int, arch: ModelArch, dcp: int, how: str) -> Implied:
    """rows = available // cell // page × page, so available / (rows + page) < cell <= available / rows."""
    low = lo_avail // (rows + page) + 1
    high = hi_avail // rows
    shapes: list[str] = []
    att = arch.attention
    if isinstance(att, FullAttention):  # n layers × kv heads per rank × (head_dim + v_head_dim) × 2 or 1 B
        for per in range(1, att.num_kv_heads + 1):
            for b, dtype in ((2, "bf16"), (1, "fp8")):
                total = arch.num_layers * per * (att.head_dim + att.v_head_dim) * b
                if low <= total <= high:
                    shapes.append(
                        f"{arch.num_layers} layers × {per} kv heads × ({att.head_dim} + {att.v_head_dim}) × {b} B"
                        f" ({dtype})"
                    )
        return Implied(low=low, high=high, rows=rows, how=how, shapes=tuple(shapes[:6]))
    rank, rope = 512, 64
    for layout in MlaLayout:
        size = layout.bytes_per_token_layer(rank, rope)
        for n in range(1, 257):
            if low <= n * size <= high:
                shapes.append(f"{n} MLA layers × {size} B ({layout.value}, kv_lora_rank 512 + rope 64)")
        if arch.is_dsa:
            idx = indexer_bytes_per_token_layer(arch.index_head_dim or 128, arch.index_kpool) * dcp
            for k in sorted({arch.full_indexer_layers, arch.num_layers}):
                total = arch.num_layers * size + k * idx
                if low <= total <= high:
                    shapes.append(f"{arch.num_layers} × {size} B ({layout.value}) + {k} indexer layers × {idx} B")
    return Implied(low=low, high=high, rows=rows, how=how, shapes=tuple(shapes[:6]))


def _decode(best: PoolPlan, ctx: int, weights: int, source: str) -> DecodeRead | None:
    arch = best.arch
    if not arch.is_dsa:
        return None
    bw = best.deployment.gpu.hbm_bandwidth_bytes_per_s
    per_token = best.indexer_bytes_per_layer * best.indexer_layers
    indexer = ctx * per_token
    sparse = min(arch.index_topk, ctx) * best.mla_bytes_per_layer * best.main_layers // best.dcp
    return DecodeRead(
        ctx_tokens=ctx,
        indexer_bytes_per_token=per_token,
        indexer_read_bytes=indexer,
        sparse_read_bytes=sparse,
        weights_bytes=weights,
        hbm_bytes_per_s=bw,
        indexer_us=indexer * 1_000_000 // bw if bw else 0,
        weights_us=weights * 1_000_000 // bw if bw else 0,
        crossover_ctx=weights // per_token if per_token else 0,
        batch_equal=cdiv(weights, indexer) if indexer else 0,
        weights_source=source,
    )


# --------------------------------------------------------------------------- the diagnosis


def diagnose(
    arch: ModelArch,
    dep: Deployment,
    log: ParsedLog,
    *,
    ctx: int | None = None,
    hit: int | None = None,
) -> Diagnosis:
    run = log.chosen
    notes: list[str] = []
    problems: list[str] = []
    if len(log.runs) > 1 or not run.complete:
        skipped = [r for r in log.runs if r.index > run.index]
        msg = f"{len(log.runs)} server start(s) in the log; using run {run.index} (lines {run.first_line}-"
        msg += f"{run.last_line}), the last complete one" if run.complete else f"{run.last_line}), which is incomplete"
        if skipped:
            msg += "; skipped " + ", ".join(f"run {r.index} (from line {r.first_line}, no pool lines)" for r in skipped)
        notes.append(msg)
    engine = run.engine or dep.engine
    if engine != dep.engine:
        notes.append(
            f"the log is from {engine}; the deployment {dep.name} is {dep.engine}: planned with "
            f"{engine} {ENGINES[engine][0]} semantics"
        )
        dep = _with(dep, {"engine": engine, "engine_version": ENGINES[engine][0]})
    if run.version is not None and engine == "vllm" and run.version.value.lstrip("v") != dep.engine_version:
        logged = run.version.value.lstrip("v")
        try:  # the rules in force for the log's own version (kvplan/versions.py), where kvplan models it
            vllm_rules(logged)
        except InputError:
            notes.append(
                f"the log is from vLLM {run.version.value}; kvplan applies vLLM {dep.engine_version} semantics"
            )
        else:
            notes.append(f"the log is from vLLM {run.version.value}: planned with the rules in force then")
            dep = _with(dep, {"engine_version": logged})
    if engine == "sglang" and run.kv:
        if any(k.value.dtype is None and not k.value.mha for k in run.kv):
            notes.append("the KV line prints no 'dtype:': the format of SGLang 0.5.9 and earlier")
        if run.args is not None and run.args.value.has("nsa_decode_backend"):
            notes.append("ServerArgs has nsa_* fields: SGLang 0.5.9 or earlier (0.5.23 names them dsa_*)")

    model = _model_check(arch, run)
    pool = _logged_pool(run, engine)
    if model.kind == "mha":
        return Diagnosis(
            log=log,
            run=run,
            status=CANNOT_CHECK,
            problems=("model",),
            notes=tuple(notes),
            model=model,
            implied=_mha_implied(run),
            log_budget=mha_self_check(run),
            headline=Headline(
                kind="cannot_tell",
                missing=(
                    f"--model for {model.log_class or 'the log’s model'} (its pool is K/V rows; the config plans "
                    f"{model.arch_class}, an MLA model)",
                    "--deploy for its deployment",
                ),
            ),
            evidence=gather(run),
        )

    config = plan_pool(arch, dep)
    revealed, dep1 = _reveal(arch, dep, config, run, pool, notes)
    revealed_plan = _plan(arch, dep1) or config
    if model.kind == "class_differs":
        problems.append("model")
    for r in revealed:
        if r.drift:
            problems.append(f"knob {r.knob}")

    memory = (
        _sglang_memory(arch, dep1, revealed_plan, run, notes)
        if engine == "sglang"
        else _vllm_memory(arch, dep1, revealed_plan, run)
    )
    if memory.matches is False:
        problems.append("memory")
    deps = memory.deps or (dep1, dep1, dep1)
    plans = _range_plans(arch, deps, None)
    log_plan = plans[0] if plans and memory.deps else None
    base = plans[0] if plans else revealed_plan

    comparison: Comparison | None = None
    causes: list[Cause] = []
    slack = 1 if pool is not None and engine == "vllm" and pool.max_model_len else 0
    if pool is not None and plans is not None:
        values = tuple(_measure(p, pool) for p in plans)
        within = _within(pool, values, slack)
        if not within and memory.deps is not None and (late := taken_after_load(base, pool.unit, pool.value, values)):
            within = True
            notes.append(late)
        comparison = Comparison(
            logged=pool,
            config=_measure(config, pool),
            revealed=_measure(revealed_plan, pool),
            expected=values[0],
            low=min(values),
            high=max(values),
            slack=slack,
            within=within,
            memory_from_log=memory.deps is not None,
            available_low=memory.available_low,
            available_high=memory.available_high,
        )
        if not within:
            problems.append("accounting" if memory.deps is not None else "pool")
            # a knob the log prints is known even where the config cannot plan it (left out above): never fitted
            shown = _sglang_knobs(run) if engine == "sglang" else _vllm_knobs(run)
            known = {**{k.knob: k.value for k in shown}, **{r.knob: r.value for r in revealed}}
            if run.version is not None:
                known["engine_version"] = run.version.value
            causes = _causes(arch, deps, base, pool, slack, known)
    elif not run.complete:
        problems.append("incomplete")

    # evidence first: the log's byte figures fix the row; a cause whose rows they contradict is never the cause
    base_bytes = _bytes_agree(base, run, memory, pool)
    byte_fact = base_bytes[1]
    causes = [_filtered(arch, c, base_bytes[0], run, memory, pool) for c in causes]
    if pool is not None and comparison is not None and not comparison.within:
        cap = _cap(base, pool, comparison, base_bytes[0], run)
        if cap is not None:
            causes.append(cap)
    causes.sort(key=lambda c: (not c.explains or bool(c.contradicted), c.fitted, "+" in c.key))

    best = base
    for c in causes:
        if c.explains and not c.contradicted and c.plan is not None:
            best = c.plan
            break

    per_rank = None
    if engine == "sglang" and run.kv and run.summary is not None:
        per_rank = PerRank(
            rows=run.kv[0].value.tokens,
            logical=run.summary.value.max_total_num_tokens,
            dcp=best.dcp,
            rows_line=run.kv[0].line,
            logical_line=run.summary.line,
        )
        if not per_rank.consistent:
            problems.append("per-rank vs logical")

    kv_size = None
    if engine == "sglang" and run.kv and run.kv[0].value.kv is not None:
        k = run.kv[0]
        assert k.value.kv is not None
        allocated = _allocated_for_rows(best.arch, best.deployment, k.value.tokens)
        if allocated is not None:
            kv_size = KvSize(logged=k.value.kv, rows=k.value.tokens, expected_bytes=allocated,
                             budget_bytes=best.available_bytes, line=k.line)  # fmt: skip

    # the chain: the config's memory term by term; its pool term for the log's own rows (the KV size's allocation)
    tables = kv_size.expected_bytes + int(best.extras.get("req_to_token_bytes", 0)) if kv_size is not None else None
    chain = sglang_chain(run, revealed_plan, tables) if engine == "sglang" else None
    startup = _startup(run, best, memory)
    if startup is not None:
        problems.append("startup")

    implied = None
    if comparison is not None and not comparison.within and not any(c.explains for c in causes):
        implied = _implied_from(run, best, comparison, engine)

    # ---- runbook checks 2-4
    pool_tokens = pool.pool_tokens if pool is not None else None
    if pool_tokens is None and run.override is not None:
        pool_tokens = run.override.value.blocks * best.page_tokens * best.dcp
    elif pool_tokens is None and pool is not None and pool.unit == "blocks":
        pool_tokens = pool.value * best.page_tokens * best.dcp
    if pool_tokens is None and pool is not None and pool.unit == "rows":
        pool_tokens = pool.value * best.dcp
    asked = ctx is not None
    ctx_q = ctx if ctx is not None else best.context_len
    admission = None
    try:
        if pool_tokens:
            source = f"the log's {pool.source if pool else 'pool'}: {pool_tokens:,} tokens"
            admission = admit(with_pool_tokens(best, pool_tokens), Request(ctx_tokens=ctx_q), pool_source=source)
        else:
            admission = admit(best, Request(ctx_tokens=ctx_q))
    except InputError:
        admission = None
    if asked and admission is not None and not admission.admitted:
        problems.append("admission")
    prefix = None
    if hit is not None and best.arch.is_dsa:
        prefix = prefix_hit(best, ctx_q, hit)
    weights_log = largest(At(e.value.usage, e.line) for e in run.load_end if e.value.usage is not None)
    weights_log = weights_log or largest(run.model_loading)
    weights = weights_log.value.bytes if weights_log else best.knob("weights_per_gpu").as_int()
    decode_ctx = ctx if ctx is not None else min(best.context_len, pool_tokens or best.usable_tokens)
    decode = _decode(best, decode_ctx, weights, "the log" if weights_log else "the config")
    if run.errors and startup is None:
        problems.append("startup")
    headline = _headline(model, comparison, causes, byte_fact, startup, problems, memory, revealed, run.complete)
    if headline.kind in ("mismatch", "cannot_tell") and chain is not None and (hint := gpu_hint(chain)):
        headline = replace(headline, missing=(hint, *headline.missing))
    status = CANNOT_TELL if headline.kind == "cannot_tell" else MATCH if not problems else MISMATCH
    return Diagnosis(
        log=log,
        run=run,
        status=status,
        problems=tuple(dict.fromkeys(problems)),
        notes=tuple(notes),
        model=model,
        config=config,
        revealed=revealed,
        revealed_plan=revealed_plan,
        memory=memory.terms,
        memory_matches=memory.matches,
        log_plan=log_plan,
        comparison=comparison,
        causes=tuple(causes),
        per_rank=per_rank,
        kv_size=kv_size,
        startup=startup,
        implied=implied,
        log_budget=None,
        best=best,
        admission=admission,
        admission_asked=asked,
        prefix=prefix,
        decode=decode,
        byte_fact=byte_fact,
        headline=headline,
        evidence=gather(run),
        chain=chain,
    )


def _bytes_agree(
    p: PoolPlan, run: Run, memory: _LogMemory, pool: LoggedPool | None
) -> tuple[bool | None, ByteFact | None]:
    """Whether plan ``p``'s rows have the bytes the log's own figures give them (None: the log gives none)."""
    if p.engine == "sglang" and run.kv:
        k = run.kv[0]
        rows = k.value.tokens
        alloc = _allocated_for_rows(p.arch, p.deployment, rows) if rows else None
        if alloc is None:
            return None, None
        if k.value.kv is not None:
            g = k.value.kv
            fact = ByteFact(what=f"KV size {g.text} GiB for {rows:,} rows", line=k.line, low=g.low_bytes,
                            high=g.high_bytes, config=alloc, unit="B for the logged rows")  # fmt: skip
            return fact.agrees, fact
        if k.value.k is not None and k.value.v is not None:
            kk, vv = k.value.k, k.value.v
            fact = ByteFact(what=f"K size {kk.text} GiB + V size {vv.text} GiB for {rows:,} rows", line=k.line,
                            low=kk.low_bytes + vv.low_bytes, high=kk.high_bytes + vv.high_bytes, config=alloc,
                            unit="B for the logged rows")  # fmt: skip
            return fact.agrees, fact
        return None, None
    if p.engine == "vllm" and pool is not None and memory.available_low is not None and memory.available_high:
        bpb = p.extras.get("bytes_per_block", 0)
        if pool.unit == "blocks":
            blocks = most = pool.value
        elif pool.unit == "tokens" and not pool.max_model_len and p.pools and "kv_cache_groups" in p.extras:
            # a hybrid: 'GPU KV cache size' is not num_blocks × block; the engine's map inverted (a range of blocks)
            blocks, most = blocks_for_logged_tokens(
                pool.value, version=p.engine_version, groups=p.extras["kv_cache_groups"], block=p.page_tokens,
                blocks_per_request=p.extras["blocks_per_request"], max_model_len=p.context_len)  # fmt: skip
        elif pool.unit == "tokens" and not pool.max_model_len:
            blocks = most = pool.value // max(p.page_tokens * p.dcp, 1)
        else:
            return None, None
        if not bpb or blocks <= 0:
            return None, None
        span = f"{blocks:,}" if most == blocks else f"{blocks:,} – {most:,}"
        fact = ByteFact(what=f"KV budget over {span} blocks", line=pool.line,
                        low=memory.available_low // (most + 1) + 1, high=memory.available_high // blocks,
                        config=bpb, unit="B per block")  # fmt: skip
        return fact.agrees, fact
    return None, None


def _filtered(arch: ModelArch, c: Cause, base_agrees: bool | None, run: Run, memory: _LogMemory,
              pool: LoggedPool | None) -> Cause:  # fmt: skip
    """A cause the log's byte figures contradict is marked so (and never reported as the cause)."""
    if c.plan is not None and not c.fitted:
        agrees, fact = _bytes_agree(c.plan, run, memory, pool)
        if agrees is False and fact is not None:
            return replace(c, contradicted=f"{fact.what} (line {fact.line})", bytes_agree=False)
        return replace(c, bytes_agree=agrees)
    # a fitted knob that keeps the rows (a memory fraction, a page, a block) cannot explain rows of other bytes
    if base_agrees is False:
        return replace(c, contradicted="the log's byte figures: its rows are not the config's")
    return c


def _cap(base: PoolPlan, lp: LoggedPool, c: Comparison, agrees: bool | None, run: Run) -> Cause | None:
    """A round pool below what the memory allows, with rows of the right bytes: a token cap, not another model."""
    if agrees is False or lp.unit not in ("tokens", "rows", "blocks") or lp.value >= c.low:
        return None
    if lp.value % 1000 and lp.value % 1024:
        return None
    if base.engine == "sglang":
        name = (f"a --max-total-tokens cap: the pool is the round {lp.value:,}, below the {c.low:,} the memory "
                "allows")  # fmt: skip
        change = f"--set max_total_tokens={lp.value}"
    else:
        name = (f"a cap on the KV cache (--kv-cache-memory or --num-gpu-blocks-override): the pool is the round "
                f"{lp.value:,}, below the {c.low:,} the memory allows")  # fmt: skip
        change = ""
    args = run.args.value if run.args is not None else None
    if args is not None and args.integer("max_total_tokens") not in (None, lp.value):
        return None
    return Cause(key="cap", name=name, change=change, cell_bytes=base.cell.total_bytes,
                 expected_cell_bytes=base.cell.total_bytes, value=lp.value, low=lp.value, high=lp.value, explains=True,
                 plan=None, fitted=True)  # fmt: skip


def _headline(model: ModelCheck, c: Comparison | None, causes: list[Cause], fact: ByteFact | None,
              startup: StartupCheck | None, problems: list[str], memory: _LogMemory,
              revealed: tuple[Revealed, ...], complete: bool = True) -> Headline:  # fmt: skip
    """Evidence first: a refusal; then the byte facts (rows of other bytes: another model, or the cause that makes
    them); then the budget; only then fitted knobs. Never a cause the byte facts contradict."""
    if startup is not None:
        return Headline(kind="refused")
    if not complete:
        return Headline(kind="cannot_tell", missing=("the pool lines: the log stops before them",))
    explaining = [x for x in causes if x.explains and not x.contradicted]
    other_model = model.kind == "class_differs"
    if fact is not None and not fact.agrees:
        named = [x for x in explaining if not x.fitted]
        if named:
            return Headline(kind="cause", cause=named[0])
        rows = [x for x in causes if x.bytes_agree and "+" not in x.key]
        if rows:  # the rows are this cause's; the count needs the budget the log does not print
            missing = () if c is None or c.memory_from_log else (
                "the log's memory lines (SGLang: 'Load weight begin' and 'Load weight end') to check the count",
            )  # fmt: skip
            return Headline(kind="cause", cause=rows[0], missing=missing)
        if near_rows(fact.low, fact.high, fact.config) or (c is not None and c.within):
            return Headline(kind="mismatch", missing=(  # the config's rows with a padding: never another model
                f"--model with the server's exact config: the log's {fact.what} is "
                f"{deviation_percent(fact.low, fact.high, fact.config)} off the config's {fact.config:,} {fact.unit},"
                " the same rows with a padding or alignment kvplan does not model, not another model's",
            ))  # fmt: skip
        if other_model or model.kind == "unknown":
            return Headline(kind="model", missing=("--model: the config of the model the server ran",))
        return Headline(kind="mismatch", missing=(ROWS_ADD,))
    if other_model and fact is None:
        return Headline(kind="cannot_tell", missing=(
            f"--model for {model.log_class} (the log's model; the config plans {model.arch_class})",
            "--deploy for its deployment",
        ))  # fmt: skip
    if not problems or set(problems) == {"admission"}:
        return Headline(kind="match")  # an asked request the pool rejects is a runbook check, said after the match
    if set(problems) <= {"memory"} and c is not None and c.within and c.memory_from_log:
        return Headline(kind="memory")  # the rows and the log's budget give the log's pool: the config's memory differs
    if explaining:
        return Headline(kind="cause", cause=explaining[0])
    toward = [r for r in revealed if r.drift and _toward(r, c)]
    if toward:
        return Headline(kind="cause", knob=toward[0].knob)
    if c is not None and not c.within and not c.memory_from_log:
        return Headline(kind="cannot_tell", missing=(
            "the log's memory lines (SGLang: 'Load weight begin' and 'Load weight end'; vLLM: 'Available KV cache "
            "memory')",
        ))  # fmt: skip
    return Headline(kind="mismatch", missing=(MISMATCH_ADD,))


def _toward(r: Revealed, c: Comparison | None) -> bool:
    """Whether the log's value of a knob moves the config's pool towards the log's (a drift that explains at least
    the direction of the gap). A knob whose value takes the pool further away is no cause: a GPTQ Qwen3-30B-A3B
    log of 12,079 tokens with chunked_prefill_size 4096 (kvcache-ai/ktransformers#1928) moved GLM-5.3's planned
    567,616 to 686,464, and was read as that drift."""
    if c is None:
        return True
    # more than half the gap: max_model_len 1,000,000 moved a pool 3.8x off the log's by 0.36 %
    return closes_gap(r.config_pool, r.pool_after, c.logged.value)


def _causes(arch: ModelArch, deps: tuple[Deployment, ...], base: PoolPlan, lp: LoggedPool, slack: int,
            revealed: dict[str, object]) -> list[Cause]:  # fmt: skip
    hypotheses = _hypotheses(arch, deps[0], base, revealed) + _version_hypotheses(deps[0], base, revealed)
    tested = [c for h in hypotheses if (c := _test(arch, deps, base, lp, slack, h)) is not None]
    tested = [c for c in tested if c.value != _measure(base, lp) or c.explains]
    if base.engine == "sglang" and "mem_fraction_static" not in revealed:
        mf = _mem_fraction(arch, deps, base, lp)
        if mf is not None:
            tested.append(mf)
    page = _one_page(base, lp)
    if page is not None:
        tested.append(page)
    if not any(c.explains for c in tested):
        for i, a in enumerate(hypotheses):
            for b in hypotheses[i + 1 :]:
                if a.key == b.key or {a.key, b.key} == {"sglang_0_5_9", "indexer_all"}:
                    continue
                c = _test(arch, deps, base, lp, slack, _combine(a, b))
                if c is not None and c.explains:
                    tested.append(c)
    tested.sort(key=lambda c: (not c.explains, "+" in c.key, abs(c.value - lp.value)))
    return tested


_PLAN_MAX_LEN = re.compile(r"max seq len \((\d{1,30})\)")


def _refuses_at(best: PoolPlan, max_model_len: int) -> bool:
    """Whether the plan refuses the start the way the log did: at the log's max seq len. A plan of another length
    refusing (GLM-5.3's 1,048,576 against a Qwen1.5-7B log refused at 32,768, QwenLM/Qwen3#16) predicts nothing."""
    if best.startup_error is None:
        return False
    m = _PLAN_MAX_LEN.search(best.startup_error)
    return m is None or int(m.group(1)) == max_model_len


def _startup(run: Run, best: PoolPlan, memory: _LogMemory) -> StartupCheck | None:
    if run.max_len_error is not None:
        e = run.max_len_error
        bpb = best.extras.get("bytes_per_block", 0)
        lo = hi = None
        # a uniform model's blocks only: a hybrid's request takes blocks of several groups (max_len_fitting is the
        # uniform bisection; it put DeepSeek-V4-Flash's 13,528 at 1,490,432)
        if memory.available_low is not None and memory.available_high is not None and bpb and not best.pools:
            lo = max_len_fitting(memory.available_low - bpb, bpb, best.page_tokens, best.dcp)
            hi = max_len_fitting(memory.available_high - bpb, bpb, best.page_tokens, best.dcp)
        planned = best.extras.get("max_model_len_needed_bytes")
        return StartupCheck(
            message="vLLM refused to start: one request of max_model_len does not fit in the KV cache",
            line=e.line,
            max_model_len=e.value.max_model_len,
            needed=e.value.needed,
            available=e.value.available,
            estimated_max_len=e.value.estimated_max_len,
            predicted=_refuses_at(best, e.value.max_model_len)
            and refusal_figures_agree(e.value.needed, planned, e.value.estimated_max_len, lo, hi),
            planned_refuses=_refuses_at(best, e.value.max_model_len),
            planned_needed_bytes=planned,
            planned_estimate_low=lo,
            planned_estimate_high=hi,
        )
    if run.v0_max_len_error is not None:
        v0 = run.v0_max_len_error
        return StartupCheck(
            message=(
                f"vLLM V0 refused to start: max seq len {v0.value.max_model_len:,} tokens is more than the "
                f"{v0.value.kv_tokens:,} tokens the KV cache holds"
            ),
            line=v0.line,
            max_model_len=v0.value.max_model_len,
            needed=None,
            available=None,
            estimated_max_len=v0.value.kv_tokens,
            predicted=_refuses_at(best, v0.value.max_model_len),
            planned_needed_bytes=None,
            planned_estimate_low=None,
            planned_estimate_high=None,
        )
    if run.negative_profile is not None and not run.errors:
        n = run.negative_profile
        return StartupCheck(message=f"SGLang: {n.value} (the weights left no room for the KV cache)", line=n.line,
                            max_model_len=None, needed=None, available=None, estimated_max_len=None,
                            predicted=best.startup_error is not None, planned_needed_bytes=None,
                            planned_estimate_low=None, planned_estimate_high=None)  # fmt: skip
    if run.errors:
        err = run.errors[0]
        return StartupCheck(
            message=err.value,
            line=err.line,
            max_model_len=None,
            needed=None,
            available=None,
            estimated_max_len=None,
            predicted=best.startup_error is not None,
            planned_needed_bytes=None,
            planned_estimate_low=None,
            planned_estimate_high=None,
        )
    return None


def _implied_from(run: Run, best: PoolPlan, c: Comparison, engine: str) -> Implied | None:
    if c.available_low is None or c.available_high is None:
        return None
    lp = c.logged
    if engine == "sglang":
        rows = run.kv[0].value.tokens if run.kv else lp.value // max(best.dcp, 1)
        how = "available (from the log's memory) / #tokens"
    else:
        if lp.unit not in ("tokens", "blocks"):
            return None
        blocks = lp.value if lp.unit == "blocks" else lp.value // (best.page_tokens * best.dcp)
        rows = blocks * best.page_tokens
        how = "Available KV cache memory / (GPU KV cache size / dcp)"
    if rows <= 0:
        return None
    return _implied(c.available_low, c.available_high, rows, best.page_tokens, best.arch, best.dcp, how)


def _mha_implied(run: Run) -> Implied | None:
    """For a K/V (MHA/GQA) pool kvplan cannot plan: the bytes per token its own KV line implies."""
    k = run.kv[0].value
    if k.k is None or k.v is None or k.tokens <= 0:
        return None
    rows = k.tokens + 1  # SGLang allocates size + page_size rows; page 1 for these models
    low = (k.k.low_bytes + k.v.low_bytes) // rows
    high = (k.k.high_bytes + k.v.high_bytes) // rows
    return Implied(low=low, high=high, rows=k.tokens, how="(K size + V size) / (#tokens + 1 padding row)")


def mha_self_check(run: Run) -> tuple[int, int] | None:
    """The KV budget the log's own memory figures give (free after − pre-load × (1 − mfs)), as a byte range."""
    pre = smallest(run.load_begin)
    end = smallest(At(e.value.avail, e.line) for e in run.load_end if e.value.avail is not None)
    mfs = run.args.value.number("mem_fraction_static") if run.args is not None else None
    if pre is None or end is None or mfs is None:
        return None
    whole, _, frac = mfs.partition(".")
    den = 10 ** len(frac)
    num = int(whole) * den + int(frac or "0")
    slack_lo = pre.value.low_bytes * (den - num) // den
    slack_hi = pre.value.high_bytes * (den - num) // den
    return end.value.low_bytes - slack_hi, end.value.high_bytes - slack_lo


# --------------------------------------------------------------------------- the log alone


def rank_presets(run: Run, evidence: Evidence, extra: tuple[ModelArch, ...] = ()) -> tuple[Candidate, ...]:
    """kvplan's model presets (and ``extra``, e.g. ``--model``) ranked by how close the bytes of one of their pool
    rows, as the log's engine and split allocate them, are to the bytes the log's figures give (item 3)."""
    if not evidence.has_bytes or not evidence.per_row_low or run.engine is None:
        return ()  # no range, or only an upper bound (the free-memory drop): every smaller model would 'fit'
    if evidence.hybrid is not None:
        return ()  # a hybrid's row is its full-attention layers' (or a shared block pool): a uniform preset's is not
    assert evidence.per_row_low is not None and evidence.per_row_high is not None

    sets = [f"engine={run.engine}"]
    if run.version is not None:
        try:
            rules_for(run.engine, run.version.value.lstrip("v"))
            sets.append(f"engine_version={run.version.value.lstrip('v')}")
        except InputError:
            pass
    for src in (run.args, run.cli_args):
        dtype = src.value.text("kv_cache_dtype") if src is not None else None
        if dtype and dtype != "auto":
            sets.append(f"kv_cache_dtype={dtype}")  # the K/V element size is the log's
            break
    tp = None
    if run.args is not None:
        tp = run.args.value.integer("tp_size") or run.args.value.integer("tensor_parallel_size")
    if run.cli_args is not None and tp is None:
        tp = run.cli_args.value.integer("tensor_parallel_size")
    sizes: dict[str, int] = {}
    archs: list[tuple[str, ModelArch]] = [(a.name, a) for a in extra]
    for name in preset_names("models"):
        try:
            archs.append((name, load_model(name)))
        except InputError:
            continue
    # the log's own multiplier: vLLM's 'Multiplying the GPU KV cache size by the dcp_world_size
    # N' means each logged token is 1/N of a rank's row (kv_cache_utils.py), and tp is a multiple of N
    # (vllm/config/parallel.py: "decode_context_parallel_size must be <= tensor_parallel_size")
    dcp = run.dcp_multiplier.value if run.dcp_multiplier is not None and run.dcp_multiplier.value > 1 else 1
    splits = (
        (tp,) if tp else (dcp,) if dcp > 1 else (1, 2, 4, 8)
    )  # the log prints no tp: a K/V row depends on it, so each split is a candidate
    for (name, arch), split in ((a, t) for a in archs for t in splits):
        label = name if tp or (split == 1 and arch.is_mla) else f"{name} at tp {split}"
        if dcp > 1:
            label = f"{name} at dcp {dcp}"
        elif not tp and arch.is_mla and split > 1:
            continue  # an MLA latent is not split by tp
        try:
            dt_sets = () if any(x.startswith("kv_cache_dtype=") for x in sets) else ("kv_cache_dtype=auto",)
            dep = load_deployment(None, (*sets, f"model={name}", f"tp={split}", *dt_sets,
                                         "page_size=default", "mla_layout=default", f"dcp={dcp}"))  # fmt: skip
        except InputError:
            continue
        # the bytes of a row do not depend on the memory: plan with room for 10,000 rows whatever the weights
        rows = 10_000
        if run.engine == "sglang":
            big = {"pre_load_free": 64 * GiB + rows * 400_000, "weights_per_gpu": 1, "mem_fraction_static": 0.9,
                   "max_total_tokens": rows}  # fmt: skip
        else:
            big = {"kv_cache_memory": 64 * GiB}
        p = _plan(arch, _with(dep, big))
        if p is None:
            continue
        if evidence.per_row_unit == "B per block":
            sizes[label] = p.extras.get("bytes_per_block", p.cell.total_bytes * p.page_tokens)
        elif p.engine == "sglang":
            sizes[label] = (p.allocated_bytes - _index_outside_kv_size(p, p.rows)) // max(p.rows + p.page_tokens, 1)
        else:  # per logged token: a rank's block holds page_tokens × dcp logged tokens
            sizes[label] = p.extras.get("bytes_per_block", 0) // max(p.page_tokens * p.dcp, 1) or p.cell.total_bytes
    return rank_candidates(evidence.per_row_low, evidence.per_row_high, sizes)[:5]


def examine(log: ParsedLog, *, why: str, arch_class: str = "", extra: tuple[ModelArch, ...] = ()) -> Diagnosis:
    """The doctor without a config: what the log says on its own (the evidence table, what is derived, the models
    whose rows fit), and what to add to tell more. ``why`` says why no config was compared."""
    run = log.chosen
    evidence = gather(run)
    evidence = replace(evidence, candidates=rank_presets(run, evidence, extra))
    model = ModelCheck(kind="unknown" if run.model_class is None else "class_differs", log_class=run.model_class,
                       arch_class=arch_class, model_path=run.model_path)  # fmt: skip
    startup = None
    if evidence.refused is not None:
        startup = StartupCheck(message=evidence.refused, line=evidence.refused_line or run.last_line,
                               max_model_len=None, needed=None, available=None, estimated_max_len=None,
                               predicted=False, planned_needed_bytes=None, planned_estimate_low=None,
                               planned_estimate_high=None)  # fmt: skip
    what = run.model_path or run.model_class or "the model the server ran"
    missing = (f"--model for {what} (a preset, a kvplan model YAML, or its config.json)",
               "--deploy for its deployment (or --emit-deploy FILE to write the one the log implies)")  # fmt: skip
    headline = Headline(kind="refused" if startup is not None else "cannot_tell", missing=missing)
    return Diagnosis(
        log=log,
        run=run,
        status=MISMATCH if startup is not None else CANNOT_TELL,
        problems=("startup",) if startup is not None else (),
        notes=(why,),
        model=model,
        startup=startup,
        headline=headline,
        evidence=evidence,
    )


def proposed_deployment(d: Diagnosis) -> tuple[tuple[str, str, str], ...]:
    """The deployment the log implies, as (key, YAML value, comment) rows for ``--emit-deploy`` (item 5): what the
    log prints, the best-fitting model preset where the log's rows fit one, and a comment for what it leaves out."""
    run = d.run
    rows: list[tuple[str, str, str]] = [("schema_version", "1", "")]
    slug = (run.model_path or run.model_class or "").replace("/", "-").replace(" ", "-")[:80]
    rows.append(("name", _yaml_str(f"{slug}-from-log" if slug else "from-log"),
                 f"proposed by kvplan doctor from {d.log.source}"))  # fmt: skip
    e = d.evidence
    fit = next((c for c in e.candidates if c.fits), None) if e is not None else None
    if d.best is not None:
        rows.append(("model", _yaml_str(d.best.arch.name), "the model the doctor compared the log with"))
    elif fit is not None:
        preset, _, split = fit.name.partition(" at tp ")
        preset = preset.partition(" at dcp ")[0]
        rows.append(("model", _yaml_str(preset), f"the preset whose rows fit the log's ({fit.bytes_per_row:,} B); "
                     f"the log names {run.model_path or run.model_class or 'no model'}"))  # fmt: skip
        if split:
            rows.append(("tp", split, "the split at which the preset's rows fit the log's (the log prints no tp)"))
    else:
        rows.append(("model", _yaml_str(run.model_path or "SET-ME"),
                     "the log's model: give a preset, a kvplan model YAML or a config.json path"))  # fmt: skip
    dcp_at = run.dcp_multiplier
    if dcp_at is not None and dcp_at.value > 1:
        rows.append(("dcp", str(dcp_at.value), f"the log's dcp_world_size, line {dcp_at.line}"))
        if not any(r[0] == "tp" for r in rows) and not _printed_tp(run):
            rows.append(("tp", str(dcp_at.value), "at least the dcp: vLLM needs tp a multiple of dcp (the log "
                         "prints no tp)"))  # fmt: skip
    if run.engine is not None:
        rows.append(("engine", _yaml_str(run.engine), ""))
    if run.version is not None:
        rows.append(("engine_version", _yaml_str(run.version.value.lstrip("v")), f"line {run.version.line}"))
    a = run.args.value if run.args is not None else None
    cli = run.cli_args.value if run.cli_args is not None else None
    for key, names in (
        ("tp", ("tp_size", "tensor_parallel_size")),
        ("pp", ("pp_size", "pipeline_parallel_size")),
        ("context_length", ("context_length", "max_model_len", "max_seq_len")),
        ("page_size", ("page_size", "block_size")),
        ("max_total_tokens", ("max_total_tokens",)),
    ):
        for src in (a, cli):
            v = next((src.integer(n) for n in names if src is not None and src.integer(n)), None)
            if v:
                rows.append((key, str(v), "from the log's configuration line"))
                break
    seen = {r[0] for r in rows}
    if "tp" not in seen:
        tps = {r for r in run.ranks if r.startswith("TP") or " TP" in r or "_TP" in r}
        count = len(tps) or 1
        rows.append(("tp", str(count), f"inferred: {count} tensor-parallel rank(s) print in the log; it prints no tp"))
        seen.add("tp")
    for src in (a, cli):
        if src is None:
            continue
        for n in ("mem_fraction_static", "gpu_memory_utilization"):
            if n not in seen and (num := src.number(n)) is not None:
                rows.append((n, num, "from the log's configuration line"))
                seen.add(n)
        if "kv_cache_dtype" not in seen and (dt := src.text("kv_cache_dtype")) is not None:
            rows.append(("kv_cache_dtype", _yaml_str(dt), "from the log's configuration line"))
            seen.add("kv_cache_dtype")
    if run.engine == "sglang" and a is not None and a.flag("enable_dp_attention") and (dp := a.integer("dp_size")):
        rows.append(("dp_attention", str(dp), "enable_dp_attention with dp_size"))
    gpus, figure = gpu_candidates(run)
    if len(gpus) == 1:
        rows.append(("gpu", _yaml_str(gpus[0]), f"the only catalog GPU whose CUDA total fits the log's {figure}"))
    elif gpus:
        rows.append(("# gpu", "", f"one of {', '.join(gpus)} (their CUDA totals fit the log's {figure}): set it"))
    else:
        rows.append(("# gpu", "", "not in the log: add 'gpu: <name from kvplan gpus>' (the default is the preset's)"))
    return tuple(rows)


def _printed_tp(run: Run) -> bool:
    srcs = (run.args, run.cli_args)
    return any(a is not None and (a.value.integer("tp_size") or a.value.integer("tensor_parallel_size")) for a in srcs)


def gpu_candidates(run: Run) -> tuple[tuple[str, ...], str]:
    """Catalog GPUs whose CUDA total fits the log's memory: V0's total_gpu_memory (torch's total: within its
    rounding and 0.1 GiB), or SGLang's free memory before the weights (the total less a CUDA context of 0.2-3 GiB)."""
    catalog = gpu_catalog()
    if run.v0_memory is not None and run.v0_memory.value.total is not None:
        g = run.v0_memory.value.total
        lo, hi, figure = g.low_bytes - GiB // 10, g.high_bytes + GiB // 10, f"total_gpu_memory {g.text} GiB"
    elif run.load_begin:
        g = max((b.value for b in run.load_begin), key=lambda x: x.bytes)
        lo, hi, figure = g.low_bytes + GiB // 5, g.high_bytes + 3 * GiB, f"free memory before the weights {g.text} GiB"
    else:
        return (), ""
    return tuple(k for k, gpu in catalog.items() if lo <= gpu.cuda_total_bytes <= hi), figure


def _yaml_str(text: str) -> str:
    return json.dumps(text)
