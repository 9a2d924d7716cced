"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/budget.py, each pinned by a
figure derived from SGLang's source."""

from __future__ import annotations

from pathlib import Path

from kvplan.plan.budget import budget, footprint, kind_costs
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
