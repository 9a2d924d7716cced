"""Bytes per token, per page and per context length: main KV vs indexer vs draft (pure)."""

from __future__ import annotations

from kvplan import record
from kvplan.engines.common import Pool, PoolPlan
from kvplan.models.cache import CacheKind
from kvplan.models.costs import CostBasis
from kvplan.models.costs import KindCost as KindCost


@record(kw_only=True)
class Footprint:
    """What one request of ``tokens`` tokens holds on ONE GPU, page-rounded as the engine allocates."""

    tokens: int
    pages: int
    """Pages of ``logical_page_tokens`` tokens (64 × dcp)."""
    main_bytes: int
    indexer_bytes: int
    draft_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.main_bytes + self.indexer_bytes + self.draft_bytes


def footprint(plan: PoolPlan, tokens: int) -> Footprint:
    """Per-GPU bytes of a request: pages × page rows × bytes per row (each rank holds 64 rows a page)."""
    pages = plan.pages_for(tokens)
    rows = pages * plan.page_tokens
    c = plan.cell
    return Footprint(
        tokens=tokens,
        pages=pages,
        main_bytes=rows * c.main_bytes,
        indexer_bytes=rows * c.indexer_bytes,
        draft_bytes=rows * (c.draft_main_bytes + c.draft_indexer_bytes),
    )


@record(kw_only=True)
class Budget:
    plan: PoolPlan
    per_row: Footprint
    """One pool row (one token at dcp 1): the cell."""
    per_page: Footprint
    per_context: tuple[Footprint, ...]
    tail_waste_tokens_x2: int
    """Expected tail-page waste per request, doubled to stay an int: (page − 1) tokens on average / 2."""
    kinds: tuple[KindCost, ...] = ()
    """A hybrid's cache kinds (empty for a uniform model)."""
    pools_per_context: tuple[tuple[PoolNeed, ...], ...] = ()
    """A hybrid's per-pool needs, one tuple per context of ``per_context`` (empty for a uniform model)."""

    @property
    def indexer_share_of_main_ppm(self) -> int:
        """Indexer bytes per main-KV byte, in parts per million (an int; render turns it into %)."""
        c = self.plan.cell
        return c.indexer_bytes * 1_000_000 // c.main_bytes if c.main_bytes else 0

    @property
    def indexer_share_of_total_ppm(self) -> int:
        c = self.plan.cell
        return c.indexer_bytes * 1_000_000 // c.total_bytes if c.total_bytes else 0

    @property
    def tail_waste_bytes(self) -> int:
        """Expected bytes lost in a request's last, partly filled page: (page − 1) / 2 rows × cell."""
        return (self.plan.logical_page_tokens - 1) * self.plan.cell.total_bytes // (2 * self.plan.dcp)


def budget(plan: PoolPlan, contexts: tuple[int, ...]) -> Budget:
    c = plan.cell
    row = Footprint(
        tokens=plan.dcp,
        pages=0,
        main_bytes=c.main_bytes,
        indexer_bytes=c.indexer_bytes,
        draft_bytes=c.draft_main_bytes + c.draft_indexer_bytes,
    )
    return Budget(
        plan=plan,
        per_row=row,
        per_page=footprint(plan, plan.logical_page_tokens),
        per_context=tuple(footprint(plan, n) for n in contexts),
        tail_waste_tokens_x2=plan.logical_page_tokens - 1,
        kinds=kind_costs(plan),
        pools_per_context=tuple(pool_needs(plan, n) for n in contexts) if plan.pools else (),
    )


# --------------------------------------------------------------------------- hybrid models


def kind_costs(plan: PoolPlan) -> tuple[KindCost, ...]:
    """The hybrid's kinds with their bytes on one GPU (empty for a uniform plan, whose cell says it all)."""
    if not plan.pools:
        return ()
    counts: dict[CacheKind, int] = {}
    for layer in plan.arch.layers:
        for c in layer.caches:
            counts[c] = counts.get(c, 0) + 1
    out: list[KindCost] = []
    on = CostBasis(plan.attn_tp, plan.kv_dtype, plan.engine, plan.mla_layout)
    for c, n in counts.items():
        out += c.kind_costs(n, on)
    return tuple(out)


@record(kw_only=True)
class DemandNeed:
    """What one request takes for one kind (one Demand) of a pool: units and their bytes on one GPU."""

    kind: str
    per: str
    units: int
    bytes: int


@record(kw_only=True)
class PoolNeed:
    """What one request of ``tokens`` takes from one pool on ONE GPU: Pool.need units × the pool's unit bytes."""

    pool: Pool
    tokens: int
    demands: tuple[DemandNeed, ...]

    @property
    def units(self) -> int:
        return sum(d.units for d in self.demands)

    @property
    def bytes(self) -> int:
        return self.units * self.pool.unit_bytes


def pool_needs(plan: PoolPlan, tokens: int) -> tuple[PoolNeed, ...]:
    """Per pool, per kind: the units one request of ``tokens`` takes (empty for a uniform plan).

    vLLM's one block id holds a page of every layer of one KV cache group, so a group's block costs the pool's
    ``unit_bytes`` (group size × page); SGLang's pools hold one kind each (a page of every layer of the kind).
    """
    out = []
    for pool in plan.pools:
        demands = tuple(
            DemandNeed(kind=d.kind, per=d.per, units=(u := d.need(tokens, pool.page_tokens)), bytes=u * pool.unit_bytes)
            for d in pool.demands
        )
        out.append(PoolNeed(pool=pool, tokens=tokens, demands=demands))
    return tuple(out)
