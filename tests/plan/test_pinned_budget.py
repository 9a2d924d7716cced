"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/budget.py, each pinned by a
figure derived from SGLang's source."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.plan.budget import budget, footprint, kind_costs, pool_needs
from tests.conftest import make_plan
from tests.engines.test_sglang import WORKED
from tests.engines.test_sglang_hybrid import _plan as hybrid
from tests.engines.test_sglang_hybrid import _qwen3_next as qwen3_next


def test_a_requests_draft_bytes_carry_the_draft_indexer() -> None:
    # GLM-5.3 on SGLang with MTP (tests/engines/test_sglang.py test_worked_example_mtp): the NextN layer adds
    # int(51,168 × 1 / 78) = 656 B of MLA and 132 B of indexer keys a row. 1,000 tokens take cdiv(1,000, 64) = 16
    # pages of 64 rows (the FlashMLA page) = 1,024 rows: draft 1,024 × (656 + 132) = 806,912 B, of which the
    # indexer is 1,024 × 132 = 135,168 B
    p = make_plan("glm-5.3-8xh200-sglang", speculative_num_draft_tokens=3)
    f = footprint(p, 1_000)
    assert (f.pages, f.draft_bytes) == (16, 806_912)
    assert budget(p, (1_000,)).per_row.draft_bytes == 656 + 132  # one row: the draft's MLA and indexer bytes


def test_tail_waste_is_spread_over_the_dcp_ranks() -> None:
    # GLM-5.3 on SGLang at dcp 8 (tests/engines/test_sglang.py test_worked_example_dcp8_forced_656): a per-rank row
    # is 73,344 B and a request's logical page is 64 × 8 = 512 tokens dealt round-robin over the 8 ranks. Its last
    # page is half empty on average, (512 − 1) / 2 tokens, 1/8 of them on each GPU:
    # 511 × 73,344 // (2 × 8) = 37,478,784 // 16 = 2,342,424 B a GPU
    p = make_plan(dcp=8, attention_backend="flashmla_kv", **WORKED)
    assert (p.logical_page_tokens, p.cell.total_bytes) == (512, 73_344)
    assert budget(p, (1_000,)).tail_waste_bytes == 2_342_424


def test_a_linear_state_costs_per_request_not_per_token(tmp_path: Path) -> None:
    # Qwen3-Next on SGLang at tp 4 (tests/engines/test_sglang_hybrid.py test_qwen3_next_golden_tp4): a GDN layer's
    # state is conv 12,288 B + recurrent 524,288 B whatever the length (MambaPool's per-request slot), × 36 layers
    # = 19,316,736 B a request and nothing a token; the 12 GQA layers take 12 × 2 kv heads / 4 → 1 head ×
    # (256 + 256) × 2 B = 12 × 1,024 = 12,288 B a token
    p = hybrid(qwen3_next(tmp_path), tp=4)
    costs = {k.kind: (k.per, k.bytes_per_token, k.request_max_bytes) for k in kind_costs(p)}
    assert costs == {"Gated DeltaNet state": ("request", 0, 19_316_736), "GQA": ("token", 12_288, 0)}


# Fresh seed 42996 (issue 26): each term of a request's footprint and the shares the budget prints.


def test_a_requests_footprint_term_by_term() -> None:
    # GLM-5.3 fp8 on SGLang with its NextN layer (tests/engines/test_sglang.py test_worked_example_mtp): a row is
    # 51,168 B MLA (656 × 78 layers) + 2,772 B index K + 656 + 132 B draft = 54,728 B. 1,000 tokens take 16 pages
    # of 64 = 1,024 rows: 52,396,032 + 2,838,528 + 806,912 = 56,041,472 B on each GPU
    p = make_plan("glm-5.3-8xh200-sglang", speculative_num_draft_tokens=3)
    f = footprint(p, 1_000)
    assert (f.main_bytes, f.indexer_bytes, f.draft_bytes) == (52_396_032, 2_838_528, 806_912)
    assert f.total_bytes == 56_041_472 == 1_024 * 54_728
    b = budget(p, (1_000,))
    # one row: the cell itself, no page; one page: 64 rows; the tail of a 64-token page is 63 / 2 tokens on average
    assert (b.per_row.tokens, b.per_row.pages, b.per_row.total_bytes) == (1, 0, 54_728)
    assert (b.per_page.pages, b.per_page.total_bytes) == (1, 64 * 54_728)
    assert b.tail_waste_tokens_x2 == 63


def test_the_indexer_shares_in_ppm() -> None:
    # GLM-5.3 fp8 on SGLang, no MTP: index K 2,772 B against 51,168 B of MLA: 54,174.48 ppm -> 54,174; of the whole
    # 53,940 B row: 51,390.43 -> 51,390 (floored: DESIGN §2, ints)
    b = budget(make_plan("glm-5.3-8xh200-sglang"), ())
    assert (b.indexer_share_of_main_ppm, b.indexer_share_of_total_ppm) == (54_174, 51_390)
    # a cell whose index K is exactly a quarter of its MLA (a fifth of the row): 250,000 and 200,000 ppm, not one
    # part either side
    p = make_plan("glm-5.3-8xh200-sglang")
    q = replace(p, cell=replace(p.cell, main_bytes=4_000, indexer_bytes=1_000))
    assert q.cell.total_bytes == 5_000
    b = budget(q, ())
    assert (b.indexer_share_of_main_ppm, b.indexer_share_of_total_ppm) == (250_000, 200_000)
    # and shares just under a whole ppm: 2 of 3 is 666,666.67 ppm -> 666,666 (not 666,667); index K 2,000 B beside
    # 3,000 B of MLA (2/3 of it, 2/5 of the row) and beside 1,000 B (2/3 of the row)
    for main, of_main, of_total in ((3_000, 666_666, 400_000), (1_000, 2_000_000, 666_666)):
        cell = replace(p.cell, main_bytes=main, indexer_bytes=2_000)
        b = budget(replace(p, cell=cell), ())
        assert (b.indexer_share_of_main_ppm, b.indexer_share_of_total_ppm) == (of_main, of_total)
    # no main KV (a cell of index K alone): 0 ppm of it, no division by zero
    assert (
        budget(replace(p, cell=replace(p.cell, main_bytes=0, indexer_bytes=2_000)), ()).indexer_share_of_main_ppm == 0
    )


def test_a_hybrid_pools_need_is_units_times_unit_bytes(tmp_path: Path) -> None:
    # Qwen3-Next on SGLang at tp 4: the full-attention pool holds one kind, 1-token pages of its 12 layers ×
    # 12,288 / 12 = 1,024 B (1 kv head at tp 4 × (256 + 256) × 2 B): 12,288 B a unit; a 4,096-token request takes
    # 4,096 units = 50,331,648 B on each GPU
    p = hybrid(qwen3_next(tmp_path), tp=4)
    full = next(n for n in pool_needs(p, 4_096) if n.pool.name.startswith("full attention"))
    assert (full.pool.unit_bytes, full.units, full.bytes) == (12_288, 4_096, 50_331_648)
    ((kind, units, nbytes),) = [(d.kind, d.units, d.bytes) for d in full.demands]
    assert (kind, units, nbytes) == ("full attention", 4_096, 50_331_648)
