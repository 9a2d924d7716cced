"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/sglang_hybrid.py, each
pinned by a figure from SGLang's source (0.5.23) or a field log."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines.sglang_hybrid import compress_state_write_pad, prefix_reuse_rules
from kvplan.errors import PlanError
from tests.engines.test_sglang_hybrid import _plan, _qwen3_next
from tests.engines.test_sglang_v4 import _plan as _v4_plan


def test_a_state_hit_names_the_track_interval(tmp_path: Path) -> None:
    # --mamba-track-interval defaults to 256 decode tokens (arg_groups/fields/exec_.py); a real SGLang start-up
    # prints it: server_args=ServerArgs(... mamba_track_interval=256 ...) in
    # tests/data/logs/field/sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log line 26
    (rule,) = prefix_reuse_rules(_plan(_qwen3_next(tmp_path), tp=4))
    assert "every 256 decode tokens" in rule


def test_the_c4_ring_serves_ten_draft_tokens_not_eleven() -> None:
    # deepseek_v4_memory_pool.py get_compress_state_write_pad: window = 4 × 2 = 8 for C4, the speculative ring 16
    # (get_compress_state_ring_size) serves 16 - 8 + 2 = 10 draft tokens; C128: 256 - 128 + 2 = 130; a ring no
    # wider than its window (the non-speculative 8 and 128) serves none
    assert (compress_state_write_pad(4, 16), compress_state_write_pad(128, 256)) == (10, 130)
    assert (compress_state_write_pad(4, 8), compress_state_write_pad(128, 128)) == (0, 0)
    # DSV4PoolConfigurator._assert_ring_serves_draft_tokens: 10 plan, 11 are refused naming the bound
    assert _v4_plan("deepseek-v4-flash", speculative_num_draft_tokens=10).rows > 0
    with pytest.raises(PlanError, match=r"ring_size=16 serves at most 10 draft tokens"):
        _v4_plan("deepseek-v4-flash", speculative_num_draft_tokens=11)


def test_v4_running_requests_reduced_to_half_the_rows() -> None:
    # kv_cache_configurator.py resolve_max_num_reqs: max_num_reqs = min(requested, token_capacity // 2)
    # (/work/shared/reference/sglang-0.5.23.md §5). DeepSeek-V4-Flash with 125,795 MiB of weights a GPU leaves
    # one 256-token page of rows: 256 // 2 = 128 < the 256 apply_deepseek_v4_defaults asks for
    p = _v4_plan("deepseek-v4-flash", weights_per_gpu="125795MiB")
    k = p.knob("max_running_requests")
    assert (p.rows, k.value) == (256, 128)
    assert k.origin.endswith("reduced to rows // 2 = 128")
