"""The band's terms at the edges its mutants moved (kvplan.engines.band; issue 26). The band rule itself is DESIGN
§2.5.1: a term read from the engine's source or taken from the user carries no error; an estimate carries its
corpus error (ERRORS, pinned by tests/runbook/test_config_alone_band.py against the corpus fit)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.band import _pool_at, plan_at, pool_band, terms_of, version_range
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan


def test_a_runtime_overhead_given_makes_sglangs_pre_load_free_taken() -> None:
    # pre-load free = CUDA total − runtime_overhead: given the overhead, the term is the user's, no error
    p = make_plan(runtime_overhead="2GiB")
    term = next(t for t in terms_of(p) if t.knob == "pre_load_free")
    assert (term.source, term.ppm) == ("taken", 0)


def test_the_reserve_term_is_sglangs_slack() -> None:
    # SGLang's reserve is the chain's "slack (non-KV reserve)" = pre-load free × (1 − mem_fraction_static), read
    p = make_plan()
    slack = next(t.bytes for t in p.chain if t.label == "slack (non-KV reserve)")
    term = next(t for t in terms_of(p) if t.knob == "slack (non-KV reserve)")
    assert (term.source, term.value) == ("read", slack)
    assert slack is not None and slack < p.deployment.gpu.nvml_total_bytes // 4


def test_a_memory_term_is_never_below_zero() -> None:
    # the low end of an estimate is clipped at 0 B, never a negative (or a 1 B) figure
    p = make_plan("glm-5.3-8xh200-vllm")
    assert plan_at(load_model("glm-5.3"), p, "non_kv_other", -1).deployment.non_kv_other == 0


def test_a_pipeline_stage_band_without_the_whole_model_tracks_the_formula() -> None:
    # pp 2 on 2 × 8 H200: without the whole model the binding stage's pool is scaled by its KV budget (its cell is
    # fixed); the engine's formula at the ends (the whole model given) is the reference. SGLang: 2,867,584 -
    # 3,240,128 around 3,099,072; vLLM (non-KV memory ±48.8 %): 2,794,880 - 3,248,256 around 3,021,568. A memory
    # term's low end is clipped at 0 B on both paths (plan_at clips; the scaled path too: a band over ±100 %)
    arch = load_model("glm-5.3")
    for deploy, tolerance in (("glm-5.3-8xh200-sglang", 0.02), ("glm-5.3-8xh200-vllm", 0.0001)):
        p = make_plan(deploy, nodes=2, pp=2)
        scaled, exact = pool_band(p), pool_band(p, arch=arch)
        assert scaled.low < scaled.point == exact.point < scaled.high
        assert abs(scaled.low - exact.low) <= tolerance * exact.point
        assert abs(scaled.high - exact.high) <= tolerance * exact.point


def test_the_vllm_v1_version_ranges_split_where_the_profile_run_changes() -> None:
    # vLLM V1's non-KV term changes shape at 0.17.0 (vllm_profile.TRITON_TOPK_TOPP_SINCE: the Triton top-k/top-p
    # kernel, in the 0.19.0 wheel and not in 0.16.0's) and at 0.21.0 (versions.py: the CUDA-graph estimate in the
    # budget): 0.16.1 is still the first range, 0.17.0 and 0.20.2 the second, 0.21.0 the third
    got = [version_range("vllm-v1", v) for v in ("0.16.1", "0.17.0", "0.20.2", "0.21.0")]
    assert got == ["0.9-0.16", "0.17-0.20", "0.17-0.20", "0.21+"]


def test_a_stage_s_pre_load_free_shift_moves_its_budget_by_mem_fraction_static() -> None:
    # SGLang profile_max_num_token: the KV budget is pre-load free × mem_fraction_static − weights − ..., so a
    # pre-load free memory 20 GiB lower moves a pp stage's budget by 20 GiB × 0.89, not 20 GiB: the scaled path
    # (no whole model given) lands within one 64-token page of the engine's formula (2,385,152 tokens), where an
    # unscaled shift would say about 88,000 tokens fewer
    arch = load_model("glm-5.3")
    p = make_plan("glm-5.3-8xh200-sglang", nodes=2, pp=2)
    low = p.knob("pre_load_free").as_int() - (20 << 30)
    exact = plan_at(arch, p, "pre_load_free", low).logged_tokens
    assert exact == 2_385_152
    assert abs(_pool_at(p, None, "pre_load_free", low) - exact) < 64


def test_a_stage_without_a_kv_budget_holds_no_tokens_at_either_end() -> None:
    # a binding stage whose KV budget is 0 B (the engine starts no cache there) stays at 0 tokens whatever a term
    # moves: the scaled path never divides by that budget
    p = make_plan("glm-5.3-8xh200-sglang", nodes=2, pp=2)
    empty = replace(p, available_bytes=0)
    assert _pool_at(empty, None, "pre_load_free", p.knob("pre_load_free").as_int() + (1 << 30)) == 0
