"""Bytes per token, per page and per context length: main KV vs indexer vs draft (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Budget:
    plan: PoolPlan
    per_row: Footprint
    """One pool row (one token at dcp 1): the cell."""
    per_page: Footprint
    per_context: tuple[Footprint, ...]
    tail_waste_tokens_x2: int
    """Expected tail-page waste per request, doubled to stay an int: (page − 1) tokens on average / 2."""

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
    )
