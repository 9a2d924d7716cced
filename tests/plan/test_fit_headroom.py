"""fit's headroom is measured on checks that can bind (issue 23 item 8).

vLLM 0.33 sizes its DSA / workspace buffers inside the non-KV profile run (gpu_model_runner.py ``profile_run``;
``determine_available_memory`` subtracts the measured peak before the KV cache is sized), so admit's workspace
check for vLLM has need == have by construction (``Check.reserved``). Counting it gave every vLLM candidate
0.0 % headroom ("binds workspace"), and vLLM lost every tie. The headroom is the least margin of the checks a
request can run short of: the pool and the running requests (and SGLang's workspace, sized by its own slack).

Llama-3.1-70B on 2 × H200 (TP2), 8 × 32K at once and one 128K request. The pools (``have``) are the engines'
plans, derived in tests/engines/test_gqa_goldens.py; the need is each engine's page rule:
- vLLM 0.33: block_size 16 (FLASH_ATTN), 8 × ceil(32,768 / 16) = 16,384 blocks; running requests 8 of
  max_num_seqs 1,024 (vLLM's default on an H200, engine/arg_utils.py ``get_batch_defaults``).
- SGLang 0.5.23: page_size 1, 8 × 32,768 = 262,144 pages.
"""

from __future__ import annotations

from kvplan.models.deploy import Requirements
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.fit import FitQuery, Outcome, fit

K = 1024


def _fit() -> tuple[Outcome, ...]:
    q = FitQuery(
        model_ref="llama-3.1-70b",
        gpus=(find_gpu("h200"),),
        engines=("sglang", "vllm"),
        requirements=Requirements(min_ctx_tokens=128 * K, concurrency=((8, 32 * K),)),
        max_gpus=2,
    )
    return fit(load_model("llama-3.1-70b"), q).admitted


def _one(ranked: tuple[Outcome, ...], engine: str, dtype: str) -> Outcome:
    (o,) = [o for o in ranked if o.deployment.engine == engine and o.deployment.kv_cache_dtype == dtype]
    return o


def test_vllm_headroom_is_the_pool_not_the_reserved_workspace() -> None:
    v = _one(_fit(), "vllm", "fp8")
    assert v.gpus == 2 and v.plan is not None and v.plan.page_tokens == 16
    ws = [c for r in v.checks for c in r.admission.checks if c.name == "workspace"]
    assert ws and all(c.reserved and c.need == c.have and not c.can_bind for c in ws)  # profiled: need == have
    have = v.plan.usable_pages
    need = 8 * (32 * K // 16)  # 16,384 blocks for 8 × 32K; the single 128K request needs 8,192
    assert need == 16_384 and have > need
    # the pool binds (the running requests: 8 of 1,024 leave 99.2 %), at the 8 × 32K requirement
    assert v.headroom_ppm == (have - need) * 1_000_000 // have > 0
    assert v.binding is not None and v.binding[0] == "pool pages" and v.binding[1].concurrency


def test_ties_rank_by_real_headroom_across_engines() -> None:
    """At 2 GPUs the order is the pools' real margins: SGLang fp8 and vLLM fp8 hold about twice the bf16 pool, so
    vLLM fp8 (a 16-token block rounds 32K exactly) ranks above SGLang bf16; before the fix vLLM's 0.0 % put it
    last."""
    ranked = [o for o in _fit() if o.gpus == 2]
    s8, v8 = _one(tuple(ranked), "sglang", "fp8_e4m3"), _one(tuple(ranked), "vllm", "fp8")
    s16 = _one(tuple(ranked), "sglang", "bf16")
    for o in (s8, v8, s16):
        assert o.plan is not None
        need = 8 * 32 * K // o.plan.page_tokens  # pages for 8 × 32K (page 1 SGLang, 16 vLLM)
        assert o.headroom_ppm == (o.plan.usable_pages - need) * 1_000_000 // o.plan.usable_pages
    assert v8.headroom_ppm > s16.headroom_ppm
    assert ranked.index(v8) < ranked.index(s16)
    # sorted by (GPUs, -headroom): the frontier's order is the headroom's order
    assert [o.headroom_ppm for o in ranked] == sorted((o.headroom_ppm for o in ranked), reverse=True)
