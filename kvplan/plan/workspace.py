"""The memory outside the pool: indexer logits, top-k buffers, the indexer prefill buffer, request tables.

SGLang (shared/reference/sglang-0.5.23.md §3, §5): everything here lives in the slack
``pre_load_free × (1 − mem_fraction_static)``. Prefill logits are budgeted and cut into row chunks; decode
logits (batch × (1 + draft) rows × context) go to DeepGEMM's paged kernel with no budget check.
vLLM (shared/reference/vllm-0.33.0.md §6): the top-k buffers and the indexer prefill buffer are built with the
model, so vLLM's profile counts them as non-KV memory before it sizes the pool; prefill logits are capped by
``VLLM_SPARSE_INDEXER_MAX_LOGITS_MB`` (512).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kvplan import record
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import model_positions
from kvplan.engines.sglang import prefill_graph_batch_sizes
from kvplan.errors import InputError
from kvplan.limits import MAX_TOKENS, bounded_int
from kvplan.search import largest_true
from kvplan.units import MiB, cdiv

# SGLang mqa_logits_utils.py constants
LOGITS_BYTES_PER_ELEM = 4
LOGITS_STATIC_SKIP_ELEMS = 8_000_000
LOGITS_TOTAL_MEM_FRACTION = 0.3
LOGITS_ROW_ALIGN_ELEMS = 256
LOGITS_FREE_MEM_FRACTION = 0.2
"""SGLANG_DSA_MQA_LOGITS_FREE_MEM_FRACTION default."""
VLLM_MAX_LOGITS_BYTES = 512 * MiB
"""VLLM_SPARSE_INDEXER_MAX_LOGITS_MB default."""
TOPK_INDEX_BYTES = 4  # int32


def logits_row_bytes(cols: int, *, aligned: bool) -> int:
    """One fp32 logits row; DeepGEMM's paged path pads the row to 256 columns (1 KiB)."""
    if aligned:
        cols = cdiv(cols, LOGITS_ROW_ALIGN_ELEMS) * LOGITS_ROW_ALIGN_ELEMS
    return cols * LOGITS_BYTES_PER_ELEM


def sglang_static_budget(total_bytes: int, mem_fraction_static: float | None) -> int:
    """``mqa_logits_static_budget_bytes``: min(int(int(total × (1 − mfs)) × 0.2), int(total × 0.3)), at least 1."""
    cap = int(total_bytes * LOGITS_TOTAL_MEM_FRACTION)
    if mem_fraction_static is None:
        return max(1, cap)
    static_free = int(total_bytes * max(0.0, 1 - mem_fraction_static))
    return max(1, min(int(static_free * LOGITS_FREE_MEM_FRACTION), cap))


@record
class PrefillChunking:
    """How SGLang's ragged prefill path scores ``rows`` query tokens against ``cols`` keys."""

    rows: int
    cols: int
    logits_bytes: int
    """Unchunked: rows × cols × 4."""
    budget_bytes: int
    checked: bool
    """rows × cols >= 8,000,000 (below that SGLang never asks for the budget)."""
    rows_per_chunk: int
    chunks: int

    @property
    def chunk_bytes(self) -> int:
        """A full chunk: rows_per_chunk × cols × 4 (the peak; the last chunk may be smaller)."""
        return self.rows_per_chunk * self.cols * LOGITS_BYTES_PER_ELEM

    @property
    def last_chunk_rows(self) -> int:
        """rows − (chunks − 1) × rows_per_chunk: the remainder the last chunk scores."""
        return self.rows - (self.chunks - 1) * self.rows_per_chunk

    @property
    def last_chunk_bytes(self) -> int:
        return self.last_chunk_rows * self.cols * LOGITS_BYTES_PER_ELEM


def sglang_prefill_chunking(rows: int, cols: int, budget: int) -> PrefillChunking:
    """``_get_topk_ragged``: max_rows = min(max(1, budget // (cols × 4)), rows) when the logits exceed the budget."""
    full = rows * cols * LOGITS_BYTES_PER_ELEM
    checked = rows * cols >= LOGITS_STATIC_SKIP_ELEMS
    if not checked or full <= budget:
        return PrefillChunking(rows, cols, full, budget, checked, rows, 1)
    per = min(max(1, budget // (cols * LOGITS_BYTES_PER_ELEM)), rows)
    return PrefillChunking(rows, cols, full, budget, checked, per, cdiv(rows, per))


@record
class Item:
    name: str
    bytes: int
    phase: str
    """'persistent', 'prefill' or 'decode' (the transient peak is the larger phase)."""
    detail: str
    in_budget: bool = True
    """False where the engine does not budget it (SGLang decode logits)."""


@record(kw_only=True)
class WorkspaceQuery:
    batch: int = 1
    draft_tokens: int | None = None
    """MTP draft tokens; None = the deployment's."""
    ctx: int | None = None
    """Context of each running request; None = :func:`default_ctx` (the longest the pool holds for the batch)."""
    chunk: int | None = None
    """Prefill chunk (query rows); None = the engine's chunked_prefill_size / max_num_batched_tokens."""

    def __post_init__(self) -> None:
        for name, option in (("batch", "--batch"), ("draft_tokens", "--mtp"), ("ctx", "--ctx"), ("chunk", "--chunk")):
            v = getattr(self, name)
            if v is not None and v < 0 and name == "draft_tokens":
                raise InputError(f"{option} must be 0 or more draft tokens, got {v}")
            if v is not None and v <= 0 and name != "draft_tokens":
                raise InputError(f"{option} must be positive, got {v}")
            if v is not None:  # as --ctx is bounded: no batch or draft count past any pool
                bounded_int(v, name=option, low=0, high=MAX_TOKENS)


@record(kw_only=True)
class Workspace:
    plan: PoolPlan
    batch: int
    draft_tokens: int
    ctx: int
    chunk: int
    items: tuple[Item, ...]
    room_bytes: int
    """SGLang: the slack; vLLM: what the non-KV profile already reserved (items fit by construction)."""
    prefill: PrefillChunking | None
    """The DSA indexer's prefill logits, cut into row chunks; None for a model without an indexer."""
    budget_bytes: int
    """The indexer logits budget (SGLang's static budget, vLLM's 512 MiB cap); 0 without an indexer."""

    @property
    def persistent_bytes(self) -> int:
        return sum(i.bytes for i in self.items if i.phase == "persistent")

    def phase_bytes(self, phase: str) -> int:
        return sum(i.bytes for i in self.items if i.phase == phase)

    @property
    def peak_bytes(self) -> int:
        return self.persistent_bytes + max(self.phase_bytes("prefill"), self.phase_bytes("decode"))

    @property
    def left_bytes(self) -> int:
        """Room left for activations, NCCL and allocator slack, which kvplan does not count."""
        return self.room_bytes - self.peak_bytes

    @property
    def fits(self) -> bool:
        return self.left_bytes >= 0

    @property
    def pool_fits(self) -> bool:
        """The engine starts, every pool holds ``batch`` requests of ``ctx`` (a uniform plan's one implied pool
        is its pages) and the batch is within the running-request cap."""
        return (
            self.plan.startup_error is None
            and all(self.batch * pool.need(self.ctx) <= pool.capacity for pool in self.plan.hybrid_pools)
            and self.batch <= self.plan.max_running_requests
        )


def _sglang_items(p: PoolPlan, batch: int, draft: int, ctx: int, chunk: int) -> tuple[list[Item], int, int]:
    topk = p.arch.index_topk
    mfs = p.knob("mem_fraction_static").as_float()
    budget = sglang_static_budget(p.deployment.gpu.cuda_total_bytes, mfs)
    graph_bs = p.knob("cuda_graph_max_bs").as_int()
    decode_graph = 0 if p.deployment.disable_cuda_graph else graph_bs * 2 * MiB
    graph_on = not p.deployment.disable_cuda_graph and p.dcp == 1 and p.deployment.pp == 1
    if p.arch.is_mla:
        prefill_graph, graph_what = (1536 * MiB if graph_on else 0), "MLA prefill graph 1,536 MiB"
    else:  # memory_hook.reserve_for_graph_mb: 8 MiB per prefill capture size up to chunked_prefill_size
        sizes = len(prefill_graph_batch_sizes(chunk))
        prefill_graph, graph_what = (sizes * 8 * MiB if graph_on else 0), f"prefill graph {sizes} sizes × 8 MiB"
    graph_detail = f"SGLang's own reserve: decode max_bs {graph_bs} × 2 MiB"
    if prefill_graph:
        graph_detail += f" + {graph_what}"
    if p.deployment.disable_cuda_graph:  # nothing captured, nothing reserved
        graph_detail = "none: --disable-cuda-graph"
    pre = sglang_prefill_chunking(min(chunk, ctx), ctx, budget)
    rows = batch * (1 + draft)
    decode_cols = cdiv(ctx, p.page_tokens) * p.page_tokens
    items = [
        Item(
            "req_to_token",
            p.extras["req_to_token_bytes"],
            "persistent",
            f"({p.max_running_requests:,} + 1) × (context {p.context_len:,} + extra) × 4 B",
        ),
        Item(
            "CUDA graphs (estimate)",
            decode_graph + prefill_graph,
            "persistent",
            graph_detail,
        ),
        Item(
            "pool padding",
            # the Mamba state pool comes out of rest_memory before the KV pool (not out of the slack)
            max(p.allocated_bytes - p.extras.get("mamba_alloc_bytes", 0) - p.available_bytes, 0),
            "persistent",
            "padding rows and pages allocated beyond cell_size",
        ),
        Item(
            "prefill logits",
            pre.chunk_bytes,
            "prefill",
            f"{pre.rows:,} rows × {pre.cols:,} keys × 4 B"
            + (f" in {pre.chunks:,} chunks of {pre.rows_per_chunk:,} rows" if pre.chunks > 1 else ", one chunk"),
        ),
        Item("prefill top-k indices", pre.rows * topk * TOPK_INDEX_BYTES, "prefill", f"{pre.rows:,} × {topk:,} × 4 B"),
        Item(
            "decode logits",
            rows * logits_row_bytes(decode_cols, aligned=True),
            "decode",
            f"{batch:,} × (1 + {draft}) rows × {decode_cols:,} keys × 4 B, not budgeted by SGLang",
            in_budget=False,
        ),
        Item("decode top-k indices", rows * topk * TOPK_INDEX_BYTES, "decode", f"{rows:,} × {topk:,} × 4 B"),
    ]
    if not p.arch.has_indexer:  # indexer logits and top-k buffers exist only with a DSA indexer
        items = items[:3]
    return items, p.extras["slack_bytes"], budget


def _vllm_items(p: PoolPlan, batch: int, draft: int, ctx: int, chunk: int) -> tuple[list[Item], int, int]:
    e = p.extras
    topk = p.arch.index_topk
    mnbt = e["max_num_batched_tokens"]
    rows_per_chunk = max(1, VLLM_MAX_LOGITS_BYTES // (ctx * LOGITS_BYTES_PER_ELEM))
    prefill_rows = min(chunk, ctx)
    block_table = p.max_running_requests * cdiv(p.context_len, p.logical_page_tokens) * 4
    items = [
        Item(
            "topk_indices_buffer",
            e.get("topk_indices_buffer_bytes", 0),
            "persistent",
            f"{mnbt:,} × {topk:,} × 4 B" + (" × 2 (MTP copy)" if p.deployment.mtp else ""),
        ),
        Item("per-layer top-k", e.get("physical_topk_bytes", 0), "persistent", "one (rows + 1) × top-k per indexer"),
        Item(
            "indexer prefill buffer",
            e.get("indexer_prefill_buffer_bytes", 0),
            "persistent",
            f"max_model_len {p.context_len:,} × 8 × factor × 132 B",
        ),
        Item("block table", block_table, "persistent", f"{p.max_running_requests:,} × blocks per request × 4 B"),
        Item(
            "prefill logits",
            min(prefill_rows, rows_per_chunk) * ctx * LOGITS_BYTES_PER_ELEM,
            "prefill",
            (
                f"capped at 512 MiB: {rows_per_chunk:,} rows of {ctx:,} keys a chunk, "
                if ctx * LOGITS_BYTES_PER_ELEM <= VLLM_MAX_LOGITS_BYTES
                else f"one row of {ctx:,} keys a chunk, past the 512 MiB cap (split_indexer_prefill_chunks: >= 1), "
            )
            + f"{cdiv(prefill_rows, rows_per_chunk):,} chunks for {prefill_rows:,} rows",
        ),
    ]
    if not p.arch.has_indexer:  # no top-k buffers, indexer prefill buffer or indexer logits without an indexer
        items = [i for i in items if i.name == "block table"]
    # vLLM builds these with the model, so its memory profile reserves them before it sizes the pool, and it
    # caps each prefill logits tensor at 512 MiB: they fit by construction once the engine starts.
    room = sum(i.bytes for i in items if i.phase == "persistent") + (VLLM_MAX_LOGITS_BYTES if p.arch.has_indexer else 0)
    del batch, draft  # vLLM's decode logits path is not in the reference notes: not modelled
    return items, room, VLLM_MAX_LOGITS_BYTES


def default_ctx(plan: PoolPlan, batch: int) -> int:
    """The context a workspace question asks about when none is given: the longest that ``batch`` requests can
    each hold in the pool at once (whole pages), capped at the context length. A pool the engine would not build
    (or one page short of a request each) leaves the context length itself. ``batch`` is at least 1
    (:class:`WorkspaceQuery` refuses less)."""
    pages_each = plan.usable_pages // batch
    if plan.startup_error or pages_each <= 0:
        return plan.context_len
    if plan.pools:  # a hybrid: the longest whole-page context that every pool holds ``batch`` times
        page = plan.logical_page_tokens

        def holds(n: int) -> bool:
            return all(batch * pool.need(n * page) <= pool.capacity for pool in plan.pools)

        pages = largest_true(1, cdiv(plan.context_len, page), holds)
        return plan.context_len if pages is None else min(plan.context_len, pages * page)
    return min(plan.context_len, pages_each * plan.logical_page_tokens)


def workspace(plan: PoolPlan, q: WorkspaceQuery) -> Workspace:
    draft = plan.deployment.speculative_num_draft_tokens if q.draft_tokens is None else q.draft_tokens
    ctx = q.ctx or default_ctx(plan, q.batch)
    if plan.engine == "sglang":
        chunk = q.chunk or plan.knob("chunked_prefill_size").as_int()
        items, room, budget = _sglang_items(plan, q.batch, draft, ctx, chunk)
    else:
        chunk = q.chunk or plan.extras["max_num_batched_tokens"]
        items, room, budget = _vllm_items(plan, q.batch, draft, ctx, chunk)
    indexer = plan.arch.has_indexer  # the logits budget and its chunking are the DSA indexer's, no one else's
    prefill = sglang_prefill_chunking(min(chunk, ctx), ctx, budget) if indexer else None
    return Workspace(
        plan=plan,
        batch=q.batch,
        draft_tokens=draft,
        ctx=ctx,
        chunk=chunk,
        items=tuple(items),
        room_bytes=room,
        prefill=prefill,
        budget_bytes=budget if indexer else 0,
    )


# --------------------------------------------------------------------------- walls


@record
class Wall:
    """Growing ``knob`` from the query's value: the largest value that still fits and what breaks next.

    ``largest_fitting`` is −1 when the query's own values already do not fit (``breaks`` says why)."""

    knob: str
    largest_fitting: int
    breaks: str
    """'pool pages', 'running requests', 'engine starts', a workspace item, or '' if never within the range."""
    limit: int


def _first_failure(w: Workspace) -> str:
    p = w.plan
    if p.startup_error:
        return "engine starts"
    for pool in p.hybrid_pools:  # a uniform plan's one implied pool is its pages; a hybrid's, each pool
        if w.batch * pool.need(w.ctx) > pool.capacity:
            return "pool pages" if not p.pools else f"pool: {pool.name}"
    if w.batch > p.max_running_requests:
        return "running requests"
    if not w.fits:
        phase = "decode" if w.phase_bytes("decode") >= w.phase_bytes("prefill") else "prefill"
        biggest = max((i for i in w.items if i.phase in (phase, "persistent")), key=lambda i: i.bytes)
        return f"workspace ({biggest.name})"
    return ""


def _grow(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    found = largest_true(lo, hi, ok)
    return lo - 1 if found is None else found


def walls(plan: PoolPlan, q: WorkspaceQuery) -> tuple[Wall, ...]:
    """Search batch, MTP draft tokens and context, one at a time, for the first thing to hit the wall."""
    base = workspace(plan, q)
    q = replace(q, ctx=base.ctx)  # grow the batch at the query's context, not at each batch's default

    def at(p: PoolPlan, **changes: int) -> Workspace:
        return workspace(p, replace(q, **changes))

    def ok(w: Workspace) -> bool:
        return _first_failure(w) == ""

    if not ok(base):
        # already over at the query's own values: nothing to grow
        reason = _first_failure(base)
        return tuple(Wall(k, -1, reason, 0) for k in ("batch", "mtp draft tokens", "context"))
    out = []
    batch_limit = 1 << 20
    b = _grow(base.batch, batch_limit, lambda n: ok(at(plan, batch=n)))
    out.append(Wall("batch", b, _first_failure(at(plan, batch=b + 1)) if b < batch_limit else "", batch_limit))

    def with_draft(d: int) -> Workspace:
        dep = replace(plan.deployment, speculative_num_draft_tokens=d)
        return at(plan_pool(plan.arch, dep), draft_tokens=d)

    def draft_failure(d: int) -> str:
        """What stops ``d`` draft tokens; an engine rule kvplan refuses (a hybrid's speculative decoding) is a
        wall too, not an error: the query's own plan is fine."""
        try:
            return _first_failure(with_draft(d))
        except InputError as e:  # PlanError (SGLang) or vLLM's refusal: the only change is the draft tokens
            return f"not planned: {e}"

    d_limit = 64
    d = _grow(base.draft_tokens, d_limit, lambda n: draft_failure(n) == "")
    out.append(Wall("mtp draft tokens", d, draft_failure(d + 1) if d < d_limit else "", d_limit))

    def with_ctx(c: int) -> Workspace:
        dep = replace(plan.deployment, context_length=max(c, plan.context_len) if plan.engine == "sglang" else c)
        return at(plan_pool(plan.arch, dep), ctx=c)

    page = plan.logical_page_tokens
    c_limit = max(model_positions(plan), base.ctx)
    c = _grow(cdiv(base.ctx, page), c_limit // page, lambda n: ok(with_ctx(n * page))) * page
    # the limit (max_position_embeddings) need not be a whole page: it is the last value to try, and what
    # breaks there is the reason (a page past it was never asked)
    nxt = min(c + page, c_limit)
    breaks = _first_failure(with_ctx(nxt)) if c < nxt else ""
    if nxt == c_limit and c < nxt and not breaks:
        c = c_limit
    out.append(Wall("context", c, breaks, c_limit))
    return tuple(out)
