"""Properties of the prefix economics and the logits chunking."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kvplan.plan.prefix import prefix_hit
from kvplan.plan.workspace import sglang_prefill_chunking
from kvplan.units import cdiv
from tests.conftest import make_plan

SG = make_plan()
lengths = st.integers(min_value=1, max_value=2_000_000)


@given(lengths, st.data())
def test_saved_plus_paid_is_all(ctx: int, data: st.DataObject) -> None:
    hit = data.draw(st.integers(min_value=0, max_value=ctx))
    h = prefix_hit(SG, ctx, hit)
    assert h.pairs_saved + h.pairs_paid == h.pairs_total
    assert min(h.pairs_saved, h.pairs_cross, h.pairs_suffix, h.main_bytes_saved, h.reusable_tokens) >= 0
    assert h.reusable_tokens <= min(hit, ctx - 1)
    assert h.saved_ppm <= h.naive_ppm or h.reusable_tokens == 0


@given(lengths, st.data())
def test_savings_are_monotone_in_the_hit(ctx: int, data: st.DataObject) -> None:
    a = data.draw(st.integers(min_value=0, max_value=ctx))
    b = data.draw(st.integers(min_value=a, max_value=ctx))
    ha, hb = prefix_hit(SG, ctx, a), prefix_hit(SG, ctx, b)
    assert ha.pairs_saved <= hb.pairs_saved
    assert ha.main_bytes_saved + ha.indexer_bytes_saved <= hb.main_bytes_saved + hb.indexer_bytes_saved


@given(
    st.integers(min_value=1, max_value=65_536),
    st.integers(min_value=1, max_value=4_000_000),
    st.integers(min_value=1, max_value=8 << 30),
)
def test_chunks_cover_the_logits_within_budget(rows: int, cols: int, budget: int) -> None:
    c = sglang_prefill_chunking(rows, cols, budget)
    assert c.rows_per_chunk * c.chunks >= rows
    assert c.chunks == cdiv(rows, c.rows_per_chunk)
    if c.chunks > 1:
        # every chunk fits the budget unless a single row is already larger than it
        assert c.chunk_bytes <= budget or c.rows_per_chunk == 1
        assert c.chunks * c.chunk_bytes >= c.logits_bytes
