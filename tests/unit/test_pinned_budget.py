"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/budget.py, each pinned by a
figure derived from SGLang's source."""

from __future__ import annotations

from kvplan.plan.budget import budget, footprint
from tests.conftest import make_plan
from tests.unit.test_sglang import WORKED


def test_a_requests_draft_bytes_carry_the_draft_indexer() -> None:
    # GLM-5.3 on SGLang with MTP (tests/unit/test_sglang.py test_worked_example_mtp): the NextN layer adds
    # int(51,168 × 1 / 78) = 656 B of MLA and 132 B of indexer keys a row. 1,000 tokens take cdiv(1,000, 64) = 16
    # pages of 64 rows (the FlashMLA page) = 1,024 rows: draft 1,024 × (656 + 132) = 806,912 B, of which the
    # indexer is 1,024 × 132 = 135,168 B
    p = make_plan("glm-5.3-8xh200-sglang", speculative_num_draft_tokens=3)
    f = footprint(p, 1_000)
    assert (f.pages, f.draft_bytes) == (16, 806_912)
    assert budget(p, (1_000,)).per_row.draft_bytes == 656 + 132  # one row: the draft's MLA and indexer bytes


def test_tail_waste_is_spread_over_the_dcp_ranks() -> None:
    # GLM-5.3 on SGLang at dcp 8 (tests/unit/test_sglang.py test_worked_example_dcp8_forced_656): a per-rank row
    # is 73,344 B and a request's logical page is 64 × 8 = 512 tokens dealt round-robin over the 8 ranks. Its last
    # page is half empty on average, (512 − 1) / 2 tokens, 1/8 of them on each GPU:
    # 511 × 73,344 // (2 × 8) = 37,478,784 // 16 = 2,342,424 B a GPU
    p = make_plan(dcp=8, attention_backend="flashmla_kv", **WORKED)
    assert (p.logical_page_tokens, p.cell.total_bytes) == (512, 73_344)
    assert budget(p, (1_000,)).tail_waste_bytes == 2_342_424
