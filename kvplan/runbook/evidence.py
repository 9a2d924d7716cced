"""What a start-up log says on its own, before any config is compared with it (pure).

The doctor orders what it knows: (1) byte facts the log states (SGLang's 'KV size' / 'K size' + 'V size' for
'#tokens' rows; vLLM's 'Available KV cache memory' over 'GPU KV cache size' or V0's '# GPU blocks') fix the bytes
of one pool row; (2) its memory figures fix the budget (SGLang 'Load weight begin/end', 'Memory pool end'; vLLM
'Model loading took', V0's memory profile); (3) only what is left is fitted. This module gathers (1) and (2) and
derives what the log does not print: the pool's bytes from the drop in free memory when there is no KV line, the
weights from the free memory before and after loading, bytes per pool row (and the GQA shapes that fit), and
model candidates among kvplan's presets ranked by how far their bytes per row are from the log's (each rule at
the function that applies it).

Every size is an int of bytes; a printed GiB figure keeps its rounding (``Gib``: ±half a unit of its last decimal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kvplan.runbook.parse import At, Gib, Run, largest, smallest
from kvplan.units import cdiv

BYTES = "bytes"
TOKENS = "tokens"
ROWS = "rows per rank"
BLOCKS = "blocks"
SLOTS = "slots"
TEXT = "text"


@dataclass(frozen=True, kw_only=True)
class Fact:
    """One row of the evidence table: a figure the log prints, or one derived from such figures."""

    order: int
    """1 byte facts (fix the layout), 2 memory figures (fix the budget), 3 counts and settings, 4 derived."""
    name: str
    low: int | None = None
    high: int | None = None
    """A figure's range in its unit (equal for an exact count; a printed GiB figure's rounding for bytes)."""
    unit: str = TEXT
    text: str = ""
    """For a TEXT fact: the value as the log prints it; for others, the printed figure when there is one."""
    line: int | None = None
    how: str = ""
    """For a derived fact: the arithmetic."""


@dataclass(frozen=True, kw_only=True)
class Candidate:
    name: str
    bytes_per_row: int
    distance_ppm: int
    """|candidate − the log's mid value| / the log's mid value, in parts per million."""
    fits: bool
    """Within the log's range."""


@dataclass(frozen=True, kw_only=True)
class Evidence:
    engine: str | None
    version: str | None
    generation: str | None
    model_class: str | None
    model_path: str | None
    pool_value: int | None
    pool_unit: str | None
    pool_line: int | None
    per_row_low: int | None = None
    per_row_high: int | None = None
    per_row_unit: str = ""
    """'B per row' (SGLang: one rank's row), 'B per token' or 'B per block' (vLLM)."""
    per_row_how: str = ""
    per_row_line: int | None = None
    refused: str | None = None
    refused_line: int | None = None
    facts: tuple[Fact, ...] = ()
    gqa_shapes: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    missing: tuple[str, ...] = ()
    hybrid: str | None = None
    """'linear state' or 'sliding window' where the log's lines mark a hybrid pool: the pool row is then the
    full-attention layers' (SGLang) or the shared block pool over the logged tokens (vLLM), not a uniform row."""

    @property
    def has_bytes(self) -> bool:
        return self.per_row_low is not None and self.per_row_high is not None


def _gib_fact(order: int, name: str, at: At[Gib] | None) -> Fact | None:
    if at is None:
        return None
    g = at.value
    return Fact(order=order, name=name, low=g.low_bytes, high=g.high_bytes, unit=BYTES, text=f"{g.text} GiB",
                line=at.line)  # fmt: skip


@dataclass
class _Table:
    """The evidence table as gather fills it, engine line by line: the facts, the pool, one row's bytes."""

    facts: list[Fact] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    pool_value: int | None = None
    pool_unit: str | None = None
    pool_line: int | None = None
    lo: int | None = None
    hi: int | None = None
    unit: str = ""
    how: str = ""
    per_line: int | None = None
    refused: str | None = None
    refused_line: int | None = None

    def add(self, f: Fact | None) -> None:
        if f is not None:
            self.facts.append(f)

    def pool(self, value: int, unit: str, line: int | None) -> None:
        self.pool_value, self.pool_unit, self.pool_line = value, unit, line

    def per_row(self, lo: int | None, hi: int | None, unit: str, how: str, line: int | None) -> None:
        self.lo, self.hi, self.unit, self.how, self.per_line = lo, hi, unit, how, line


def gather(run: Run) -> Evidence:
    """The evidence table of one server start, in the doctor's order."""
    t = _Table()
    if run.engine == "sglang":
        _sglang_pool(run, t)
        _sglang_hybrid_facts(run, t.add, t.missing)
        _sglang_memory(run, t)
        _sglang_settings(run, t)
    elif run.engine == "vllm":
        avail, block = _vllm_budget(run, t)
        _vllm_pool(run, t, avail, block)
        _vllm_refused(run, t)
    shapes: tuple[str, ...] = ()
    if t.lo is not None and t.hi is not None:
        t.add(Fact(order=1, name=f"bytes of one pool row ({t.unit}), derived", low=t.lo, high=t.hi, unit=BYTES,
                   how=t.how, line=t.per_line))  # fmt: skip
        if run.kv and run.kv[0].value.mha and t.unit == "B per row":
            shapes = gqa_shapes(t.lo, t.hi)
    t.facts.sort(key=lambda f: f.order)
    return Evidence(
        engine=run.engine,
        version=run.version.value if run.version is not None else None,
        generation=run.generation,
        model_class=run.model_class,
        model_path=run.model_path,
        pool_value=t.pool_value,
        pool_unit=t.pool_unit,
        pool_line=t.pool_line,
        per_row_low=t.lo,
        per_row_high=t.hi,
        per_row_unit=t.unit,
        per_row_how=t.how,
        per_row_line=t.per_line,
        refused=t.refused,
        refused_line=t.refused_line,
        facts=tuple(t.facts),
        gqa_shapes=shapes,
        missing=tuple(t.missing),
        hybrid=run.hybrid,
    )


def _sglang_pool(run: Run, t: _Table) -> None:
    """SGLang's pool (the summary's logical tokens, else bench_latency's, else one rank's rows) and the bytes of a
    row from its 'KV size' (or 'K size' + 'V size')."""
    k = run.kv[0] if run.kv else None
    if run.summary is not None:
        t.pool(run.summary.value.max_total_num_tokens, TOKENS, run.summary.line)
        t.add(Fact(order=3, name="max_total_num_tokens (logical: rows × dcp)", low=t.pool_value, high=t.pool_value,
                   unit=TOKENS, line=t.pool_line))  # fmt: skip
    if t.pool_value is None and run.total_tokens is not None:
        tt = run.total_tokens
        t.pool(tt.value, TOKENS, tt.line)
        t.add(Fact(order=3, name="max_total_num_tokens (bench_latency, SGLang 0.3.x)", low=tt.value, high=tt.value,
                   unit=TOKENS, line=tt.line))  # fmt: skip
    if k is not None:
        rows = k.value.tokens
        t.add(Fact(order=3, name="KV Cache is allocated #tokens (rows per rank)", low=rows, high=rows, unit=ROWS,
                   line=k.line))  # fmt: skip
        if t.pool_value is None:
            t.pool(rows, ROWS, k.line)
        if k.value.kv is not None:
            t.add(_gib_fact(1, "KV size (the pool tensors of one rank)", At(k.value.kv, k.line)))
            # rows + one padding page of rows are allocated; the page is 1 (MHA/MLA) to 64 (DSA): the range
            # covers both ends
            t.per_row(k.value.kv.low_bytes // (rows + 64) if rows else None, k.value.kv.high_bytes // rows if rows
                      else None, "B per row", "KV size / (#tokens + the padding page)", k.line)  # fmt: skip
        elif k.value.k is not None and k.value.v is not None:
            t.add(_gib_fact(1, "K size (one rank)", At(k.value.k, k.line)))
            t.add(_gib_fact(1, "V size (one rank)", At(k.value.v, k.line)))
            if rows:
                t.per_row((k.value.k.low_bytes + k.value.v.low_bytes) // (rows + 1),
                          (k.value.k.high_bytes + k.value.v.high_bytes) // (rows + 1), "B per row",
                          "(K size + V size) / (#tokens + 1 padding row)", k.line)  # fmt: skip
    if t.lo is not None and run.hybrid is not None:
        t.how += " (a hybrid: the full-attention layers only)"


# The pool's bytes from the drop in free memory between 'Load weight end' and 'Memory pool end' when there is no
# KV line (the drop also holds the request-to-token table and, on SGLang, the allocator's free lists: an upper
# bound, said so); the weights from the free memory before and after loading (``begin - end``) when 'mem usage' is
# not printed.
def _sglang_memory(run: Run, t: _Table) -> None:
    """SGLang's memory lines; the weights from free memory before and after loading, the pool from the drop."""
    begin = smallest(run.load_begin)
    end = smallest(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail is not None)
    usage = largest(At(e.value.usage, e.line, e.rank) for e in run.load_end if e.value.usage is not None)
    pool_end = smallest(run.pool_end)
    t.add(_gib_fact(2, "free before the weights (Load weight begin avail mem)", begin))
    t.add(_gib_fact(2, "free after the weights (Load weight end avail mem)", end))
    t.add(_gib_fact(2, "weights (Load weight end mem usage)", usage))
    t.add(_gib_fact(2, "free after the pool (Memory pool end avail mem)", pool_end))
    if usage is None and begin is not None and end is not None:
        t.add(Fact(order=4, name="weights, derived", low=max(begin.value.low_bytes - end.value.high_bytes, 0),
                   high=begin.value.high_bytes - end.value.low_bytes, unit=BYTES,
                   how="Load weight begin avail mem − Load weight end avail mem"))  # fmt: skip
    if end is not None and pool_end is not None:
        drop_lo = max(end.value.low_bytes - pool_end.value.high_bytes, 0)
        drop_hi = end.value.high_bytes - pool_end.value.low_bytes
        t.add(Fact(order=4, name="the pool and its tables, derived", low=drop_lo, high=drop_hi, unit=BYTES,
                   how="Load weight end avail mem − Memory pool end avail mem (an upper bound on the KV pool: "
                   "the request-to-token table is in it too)"))  # fmt: skip
        if t.lo is None and t.pool_value:
            t.per_row(0, drop_hi // t.pool_value, "B per row", "the free-memory drop / rows: an upper bound",
                      pool_end.line)  # fmt: skip
    if begin is None or end is None:
        t.missing.append("the 'Load weight begin' and 'Load weight end' lines (the budget)")


def _sglang_settings(run: Run, t: _Table) -> None:
    """The server_args knobs that size the pool, what is missing, and a failed start."""
    if run.args is not None:
        for key in ("tp_size", "dp_size", "mem_fraction_static", "kv_cache_dtype", "max_total_tokens",
                    "context_length", "page_size"):  # fmt: skip
            v = run.args.value.text(key)
            if v is not None:
                t.add(Fact(order=3, name=f"server_args {key}", text=v, line=run.args.line))
    if not run.kv and run.summary is None:
        t.missing.append("the 'KV Cache is allocated' line or the scheduler summary (the pool)")
    if run.errors:
        t.refused, t.refused_line = run.errors[0].value, run.errors[0].line
    elif run.negative_profile is not None:
        t.refused, t.refused_line = run.negative_profile.value, run.negative_profile.line


def _vllm_budget(run: Run, t: _Table) -> tuple[At[Gib] | None, int | None]:
    """vLLM's KV budget and memory lines (V0: the memory profile); the block size where the log prints it."""
    avail = smallest(run.available_kv)
    v0 = run.v0_memory
    if avail is None and v0 is not None and v0.value.kv is not None:
        avail = At(v0.value.kv, v0.line, v0.rank)
    loading = largest(run.model_loading)
    t.add(_gib_fact(2, "KV budget (Available KV cache memory; V0: kv_cache_size)", avail))
    t.add(_gib_fact(2, "weights (Model loading took)", loading))
    if v0 is not None:
        t.add(_gib_fact(2, "GPU memory (total_gpu_memory)", At(v0.value.total, v0.line) if v0.value.total else None))
        if v0.value.utilization is not None:
            t.add(Fact(order=3, name="gpu_memory_utilization", text=v0.value.utilization, line=v0.line))
        t.add(_gib_fact(2, "activation peak", At(v0.value.peak, v0.line) if v0.value.peak else None))
        t.add(_gib_fact(2, "non-torch memory", At(v0.value.non_torch, v0.line) if v0.value.non_torch else None))
    block = run.block_size.value if run.block_size is not None else None
    if run.hybrid_block is not None:
        block = run.hybrid_block.value
        t.add(Fact(order=3, name="attention block size (raised so a page holds a Mamba state page)",
                   low=block, high=block, unit=TOKENS, line=run.hybrid_block.line))  # fmt: skip
    if run.mamba_padding is not None:
        t.add(Fact(order=3, name="Mamba page padding", text=f"{run.mamba_padding.value} %",
                   line=run.mamba_padding.line))  # fmt: skip
    return avail, block


def _vllm_pool(run: Run, t: _Table, avail: At[Gib] | None, block: int | None) -> None:
    """vLLM's pool (V0's blocks, V1's 'GPU KV cache size') and the bytes of a block or a token from the budget."""
    if run.v0_blocks is not None:
        b = run.v0_blocks
        t.pool(b.value.gpu_blocks, BLOCKS, b.line)
        t.add(Fact(order=3, name=f"# {b.value.device} blocks (V0)", low=t.pool_value, high=t.pool_value,
                   unit=BLOCKS, line=b.line))  # fmt: skip
        if avail is not None and t.pool_value:
            t.per_row(avail.value.low_bytes // (t.pool_value + 1) + 1, avail.value.high_bytes // t.pool_value,
                      "B per block", "KV budget / # GPU blocks", b.line)  # fmt: skip
    elif run.kv_cache_size is not None:
        kv = run.kv_cache_size
        t.pool(kv.value.tokens, TOKENS, kv.line)
        t.add(Fact(order=3, name="GPU KV cache size (× dcp)", low=t.pool_value, high=t.pool_value, unit=TOKENS,
                   line=kv.line))  # fmt: skip
        if avail is not None and t.pool_value:
            # num_blocks = available // block bytes and the count is num_blocks × block: per token within
            # available / (tokens + one block) .. available / tokens (a block of up to 256 tokens)
            how = "Available KV cache memory / GPU KV cache size"
            if run.hybrid is not None:
                how += " (a hybrid: every group shares the blocks; not one layer's bytes per token)"
            t.per_row(avail.value.low_bytes // (t.pool_value + (block or 256)) + 1,
                      avail.value.high_bytes // t.pool_value, "B per token", how, kv.line)  # fmt: skip
    if run.profiling_override is not None:
        o = run.profiling_override
        t.add(Fact(order=3, name="profiling-time num_gpu_blocks override (not the pool)",
                   text=f"{o.value.blocks:,} blocks", line=o.line))  # fmt: skip
    if avail is None:
        t.missing.append("the 'Available KV cache memory' line (V0: the memory profiling lines)")
    if t.pool_value is None:
        t.missing.append("the 'GPU KV cache size' line (V0: '# GPU blocks')")


def _vllm_refused(run: Run, t: _Table) -> None:
    """A refused start: the max-model-len check (V1, V0), else the first error line."""
    if run.max_len_error is not None:
        e = run.max_len_error
        t.refused, t.refused_line = (
            f"max_model_len {e.value.max_model_len:,} needs {e.value.needed.text} GiB of KV cache, "
            f"{e.value.available.text} GiB is available",
            e.line,
        )
    elif run.v0_max_len_error is not None:
        e0 = run.v0_max_len_error
        t.refused, t.refused_line = (
            f"max seq len {e0.value.max_model_len:,} tokens is more than the {e0.value.kv_tokens:,} tokens "
            "the KV cache holds",
            e0.line,
        )
    elif run.errors:
        t.refused, t.refused_line = run.errors[0].value, run.errors[0].line


def _sglang_hybrid_facts(run: Run, add: Callable[[Fact | None], None], missing: list[str]) -> None:
    """The state pool of a linear-attention hybrid and the SWA pool of a sliding-window one (SGLang)."""
    if run.mamba:
        m = run.mamba[0]
        slots = m.value.slots
        add(Fact(order=3, name="Mamba state pool (max_mamba_cache_size; + 1 padding slot)", low=slots, high=slots,
                 unit=SLOTS, line=m.line))  # fmt: skip
        add(_gib_fact(1, "Mamba conv state (one rank)", At(m.value.conv, m.line)))
        add(_gib_fact(1, "Mamba ssm state (one rank)", At(m.value.ssm, m.line)))
        conv, ssm = m.value.conv, m.value.ssm
        per_lo = (conv.low_bytes + ssm.low_bytes) // (slots + 1)
        per_hi = (conv.high_bytes + ssm.high_bytes) // (slots + 1)
        add(Fact(order=4, name="bytes of one Mamba state slot, derived", low=per_lo, high=per_hi, unit=BYTES,
                 how="(conv_state size + ssm_state size) / (max_mamba_cache_size + 1)", line=m.line))  # fmt: skip
    sw = run.swa_pool
    if sw is not None:
        add(Fact(order=3, name="full pool (full_layer_tokens / full size)", low=sw.value.full_tokens,
                 high=sw.value.full_tokens, unit=ROWS, line=sw.line))  # fmt: skip
        add(Fact(order=3, name="sliding-window pool (swa_layer_tokens / swa size)", low=sw.value.swa_tokens,
                 high=sw.value.swa_tokens, unit=ROWS, line=sw.line))  # fmt: skip
        add(_gib_fact(1, "SWAKVPool mem usage (both pools' K + V, one rank)",
                      At(sw.value.usage, sw.line) if sw.value.usage is not None else None))  # fmt: skip
    if run.swa_kv:
        s = run.swa_kv[0]
        add(_gib_fact(1, "sliding-window pool K size (one rank)", At(s.value.k, s.line) if s.value.k else None))
        add(_gib_fact(1, "sliding-window pool V size (one rank)", At(s.value.v, s.line) if s.value.v else None))
        if not run.kv:
            missing.append("the full pool's 'KV Cache is allocated' line (a rank's second line of a SWA hybrid)")


# For a K/V (GQA) pool: the kv heads x head_dim x layers that fit the bytes per pool row.
def gqa_shapes(low: int, high: int) -> tuple[str, ...]:
    """K+V bytes per token of one rank = layers × kv heads per rank × head_dim × 2 (K and V) × element bytes: the
    common shapes (head_dim 64/128/256, 1-16 kv heads per rank, bf16 or fp8) whose product lies in low..high."""
    out: list[str] = []
    for head_dim in (128, 64, 256, 96, 80):
        for elem, dtype in ((2, "bf16"), (1, "fp8")):
            for heads in range(1, 17):
                per_layer = heads * head_dim * 2 * elem
                layers_lo, layers_hi = cdiv(low, per_layer), high // per_layer
                for layers in range(max(layers_lo, 1), min(layers_hi, 160) + 1):
                    out.append(f"{layers} layers × {heads} kv heads × head_dim {head_dim} × 2 × {elem} B ({dtype})")
    return tuple(out[:8])


# Model candidates among kvplan's presets (and ``--model``), ranked by how far their bytes per row are from the
# log's.
def rank_candidates(
    low: int, high: int, sizes: dict[str, int], likeness: Mapping[str, tuple[int, int]] | None = None
) -> tuple[Candidate, ...]:
    """Models by how close their bytes per row (``sizes``: name -> bytes, as the log's engine and split would
    allocate them) are to the log's low..high, nearest first. Rows alone can tie (Grok-2 at tp 2 has Llama-3.1-8B's
    131,072 B): among those that fit, ``likeness`` (name -> (not the class the log prints, bytes from the log's
    weights figure)) ranks the model the log's other lines describe first."""
    like = likeness or {}
    mid = (low + high) // 2 or 1
    out = [
        Candidate(name=name, bytes_per_row=b, distance_ppm=abs(b - mid) * 1_000_000 // mid, fits=low <= b <= high)
        for name, b in sizes.items()
        if b > 0
    ]
    out.sort(key=lambda c: (not c.fits, like.get(c.name, (1, 0)) if c.fits else (0, 0), c.distance_ppm, c.name))
    return tuple(out)
