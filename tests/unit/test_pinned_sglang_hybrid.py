"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/sglang_hybrid.py, each
pinned by a figure from SGLang's source (0.5.23) or a field log."""

from __future__ import annotations

from pathlib import Path

from kvplan.engines.sglang_hybrid import prefix_reuse_rules
from tests.unit.test_sglang_hybrid import _plan, _qwen3_next


def test_a_state_hit_names_the_track_interval(tmp_path: Path) -> None:
    # --mamba-track-interval defaults to 256 decode tokens (arg_groups/fields/exec_.py); a real SGLang start-up
    # prints it: server_args=ServerArgs(... mamba_track_interval=256 ...) in
    # tests/data/logs/field/sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log line 26
    (rule,) = prefix_reuse_rules(_plan(_qwen3_next(tmp_path), tp=4))
    assert "every 256 decode tokens" in rule
