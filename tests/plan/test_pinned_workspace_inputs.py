"""Workspace inputs and SGLang's logits budget at their edges (issue 26)."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.plan.workspace import WorkspaceQuery, sglang_static_budget, workspace
from tests.conftest import make_plan


def test_logits_budget_is_at_least_one_byte() -> None:
    # SGLang mqa_logits_static_budget_bytes: min(int(int(total × (1 − mfs)) × 0.2), int(total × 0.3)), at least 1:
    # mfs 1.0 leaves nothing free, so the budget is the floor of 1 B; with no mfs it is 30 % of the total
    assert sglang_static_budget(1000, 1.0) == 1
    assert sglang_static_budget(1000, None) == 300
    # 1,000 B at mfs 0.5: int(int(500) × 0.2) = 100 < 300
    assert sglang_static_budget(1000, 0.5) == 100


def test_zero_draft_tokens_is_a_question_and_a_negative_one_is_not() -> None:
    assert WorkspaceQuery(batch=1, draft_tokens=0).draft_tokens == 0  # --mtp 0: no speculative decoding
    with pytest.raises(InputError, match="--mtp must be 0 or more draft tokens, got -1"):
        WorkspaceQuery(batch=1, draft_tokens=-1)
    with pytest.raises(InputError, match="--batch must be positive, got 0"):
        WorkspaceQuery(batch=0)


def test_sglang_pool_padding() -> None:
    # NSATokenToKVPool allocates size + page_size rows (the padding page slot 0 writes to): (567,616 + 64) ×
    # 53,940 B = 30,620,659,200 B, beyond the 30,620,424,077 B profile_max_num_token sized the pool from:
    # 235,123 B the pool takes out of the slack
    p = make_plan()
    w = workspace(p, WorkspaceQuery(batch=1, ctx=131_072))
    assert next(i.bytes for i in w.items if i.name == "pool padding") == 235_123
