"""The doctor's explanations for a full-attention model (issue 11: the runbook stops assuming MLA)."""

from __future__ import annotations

from kvplan.runbook.doctor.causes import _hypotheses, _implied
from tests.engines.test_gqa_goldens import _plan


def test_full_attention_hypotheses_change_the_kv_dtype_not_an_mla_layout() -> None:
    p = _plan("sglang", "llama-3.1-70b", tp=8)
    keys = {h.key for h in _hypotheses(p.arch, p.deployment, p, {})}
    assert "kv_dtype" in keys and "layout" not in keys and "indexer_all" not in keys
    (h,) = (h for h in _hypotheses(p.arch, p.deployment, p, {}) if h.key == "kv_dtype")
    assert h.changes == (("kv_cache_dtype", "fp8_e4m3"),)  # bf16 plan: the other element size is fp8


def test_implied_shapes_are_kv_heads_for_full_attention() -> None:
    # 80 layers × 1 kv head × (128 + 128) × 2 B = 40,960 B per row: a window around it names that shape
    p = _plan("sglang", "llama-3.1-70b", tp=8)
    rows = 1_000_000
    i = _implied(40_960 * rows, 40_960 * rows + 1000, rows, 1, p.arch, 1, "test")
    assert "80 layers × 1 kv heads × (128 + 128) × 2 B (bf16)" in i.shapes
    assert not any("MLA" in s for s in i.shapes)
