"""kvplan.plan.fit: the search finds the known answers, and prunes with the engines' own messages.

GLM-5.3 on H200, SGLang 0.5.23, fp8_e4m3 (the default deployment), figures derived in tests/cli/test_gate.py:
- TP8 dcp 1: available 30,620,424,077 B, cell 656 × 78 + 132 × 21 = 53,940 B -> 30,620,424,077 // 53,940 =
  567,681 -> 567,616 rows (64-token pages): 567,616 < 1,048,576, 1M is rejected by the pool pages.
- TP8 dcp 2: trtllm rows of 576 B, cell 576 × 78 + 132 × 21 × 2 = 50,472 B; available 32,259,822,321 B (dcp > 1
  drops the prefill graph: mem_fraction_static 0.897) -> 639,104 rows -> logged 1,278,208 tokens >= 1M: admitted.
- TP4: the weights (173.88 GiB a GPU) exceed the 138.80 GiB pre-load free memory: SGLang does not start.
So 8 GPUs is the fewest that admit 1M, and TP8 dcp 2 (one knob off the default) is among them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.admit import Request, admit
from kvplan.plan.fit import FitQuery, Outcome, candidates, evaluate, fit, tp_sizes
from kvplan.render.fit_report import deploy_yaml

M = 1 << 20
K128 = 128 * 1024


def _glm_query(**kw: object) -> FitQuery:
    base: dict[str, object] = dict(
        model_ref="glm-5.3",
        gpus=(find_gpu("h200"),),
        engines=("sglang",),
        requirements=Requirements(min_ctx_tokens=M),
        max_gpus=8,
        mtp=(False,),
    )
    base.update(kw)
    return FitQuery(**base)  # type: ignore[arg-type]


def _find(outcomes: tuple[Outcome, ...], **knobs: object) -> Outcome:
    found = [o for o in outcomes if all(getattr(o.deployment, k) == v for k, v in knobs.items())]
    assert len(found) == 1, knobs
    return found[0]


def test_glm_default_rejects_1m_at_tp8_dcp1_and_fit_proposes_8_gpus() -> None:
    arch = load_model("glm-5.3")
    default = load_deployment(None, [])
    assert (default.tp, default.dcp, default.kv_cache_dtype) == (8, 1, "fp8_e4m3")
    f = fit(arch, _glm_query())
    # TP8 dcp 1 (the default deployment's layout): rejected by the pool, 567,616 rows < 1,048,576
    d1 = _find(f.outcomes, tp=8, dcp=1, dp_attention=1, kv_cache_dtype="fp8_e4m3")
    assert d1.plan is not None and d1.plan.logged_tokens == 567_616
    assert not d1.ok and d1.checks[0].admission.binding.name == "pool pages"
    # TP8 dcp 2: 1,278,208 tokens, admitted with the engine's default memory knob
    d2 = _find(f.outcomes, tp=8, dcp=2, dp_attention=1, kv_cache_dtype="fp8_e4m3")
    assert d2.ok and d2.plan is not None and d2.plan.logged_tokens == 1_278_208 and d2.memory is None
    # TP4 and below: pruned with SGLang's own startup refusal (weights do not fit)
    tp4 = [o for o in f.outcomes if o.deployment.tp == 4]
    assert tp4 and all(o.pruned and "pre-load free memory" in o.pruned for o in tp4)
    best = f.best
    assert best is not None and best.gpus == 8
    assert all(o.gpus >= 8 for o in f.admitted)
    # the best, re-planned through admit as a user would: admitted
    assert admit(best.plan, Request(ctx_tokens=M), remedies=False).admitted  # type: ignore[arg-type]


def test_llama_70b_prefers_fewer_gpus_when_both_fit() -> None:
    """Llama-3.1-70B (GQA: 8 kv heads of 128 + 128 dims, 80 layers), H200, SGLang, 8 × 128K at once, page 1.

    cell = kv heads per rank × 256 × dtype bytes × 80: TP2 fp8 4 × 256 × 1 × 80 = 81,920 B; TP4 bf16 2 × 256 × 2 ×
    80 = 81,920 B; TP8 fp8 1 × 256 × 80 = 20,480 B. TP2 fp8 holds available // 81,920 = 779,322 tokens ->
    779,322 // 131,072 = 5 < 8 requests; TP4 bf16 holds 98,373,088,968 // 81,920 = 1,200,843 -> 9 >= 8; TP8 holds
    more still. Both 4 and 8 GPUs admit; fit ranks the 4-GPU layout first.
    """
    arch = load_model("llama-3.1-70b")
    q = FitQuery(
        model_ref="llama-3.1-70b",
        gpus=(find_gpu("h200"),),
        engines=("sglang",),
        requirements=Requirements(concurrency=((8, K128),)),
        max_gpus=8,
        exhaustive=True,
    )
    f = fit(arch, q)
    tp2 = _find(f.outcomes, tp=2, kv_cache_dtype="fp8_e4m3")
    assert tp2.plan is not None and tp2.plan.cell.total_bytes == 81_920
    assert tp2.plan.logged_tokens == tp2.plan.available_bytes // 81_920
    assert not tp2.ok and tp2.checks[0].admission.max_concurrent == tp2.plan.logged_tokens // K128 == 5
    tp4 = _find(f.outcomes, tp=4, kv_cache_dtype="bf16")
    assert tp4.ok and tp4.plan is not None and tp4.plan.logged_tokens == 1_200_843
    assert tp4.checks[0].admission.max_concurrent == 1_200_843 // K128 == 9
    assert _find(f.outcomes, tp=8, kv_cache_dtype="bf16").ok
    assert {o.gpus for o in f.admitted} == {4, 8}
    assert f.best is not None and f.best.gpus == 4
    # fp8 cells are half as large, so at 4 GPUs fp8 has the most headroom and ranks first
    assert f.best.deployment.kv_cache_dtype == "fp8_e4m3"


def test_search_skips_gpu_counts_past_the_frontier() -> None:
    """First admitted at 8 GPUs: 16 is still planned (the frontier shows it), 32 is skipped, never planned."""
    arch = load_model("glm-5.3")
    f = fit(arch, _glm_query(max_gpus=32))
    planned = {o.gpus for o in f.outcomes}
    assert planned == {1, 2, 4, 8, 16}
    n32 = sum(1 for d in candidates(arch, _glm_query(max_gpus=32)) if d.tp == 32)
    assert f.skipped == n32 > 0
    assert {o.gpus for o in fit(arch, _glm_query(max_gpus=32, exhaustive=True)).outcomes} == {1, 2, 4, 8, 16, 32}


def test_tp_sizes_powers_of_two_and_divisors() -> None:
    assert tp_sizes(32) == (1, 2, 4, 8, 16, 32)
    assert tp_sizes(12) == (1, 2, 3, 4, 6, 8, 12)  # 8: a power of two; 3, 6, 12 divide 12


# --------------------------------------------------------------------------- pruning: the engines' own rules


def _dep(model: str, **knobs: object):  # type: ignore[no-untyped-def]
    arch = load_model(model)
    q = FitQuery(model_ref=model, gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=K128), max_gpus=8)  # fmt: skip
    dep = next(d for d in candidates(arch, q) if d.tp == 8)
    return arch, replace(dep, **knobs)


def test_prune_dcp_on_full_attention() -> None:
    arch, dep = _dep("llama-3.1-70b", dcp=2)
    o = evaluate(arch, dep, Requirements(min_ctx_tokens=K128))
    assert o.pruned is not None and "SGLang's decode context parallel shards an MLA latent: dcp 2" in o.pruned


def test_prune_dcp_with_index_kpool() -> None:
    arch, dep = _dep("glm-5.3", dcp=2)
    arch = replace(arch, index_kpool=2)  # type: ignore[call-arg]
    o = evaluate(arch, dep, Requirements(min_ctx_tokens=K128))
    assert o.pruned == "SGLang rejects --dcp-size 2 with index_kpool 2 (DSA DCP needs 1)"


def test_prune_no_dsa_backend_on_ampere() -> None:
    arch = load_model("glm-5.3")
    f = fit(arch, _glm_query(gpus=(find_gpu("a100-80gb"),)))
    assert f.best is None and not f.planned
    assert all(o.pruned and "has no DSA attention backend" in o.pruned for o in f.outcomes)


def test_prune_weights_do_not_fit() -> None:
    arch, dep = _dep("glm-5.3", tp=2, dp_attention=1, dcp=1)
    o = evaluate(arch, dep, Requirements(min_ctx_tokens=K128))
    assert o.pruned is not None and o.pruned.startswith("the engine does not start: weights ")


def test_hybrid_model_never_crashes() -> None:
    """gpt-oss: until issue 13's engine rules land, plan_pool refuses it (InputError): every candidate is pruned
    with that message; once they land, candidates are planned. Either way, no exception escapes."""
    arch = load_model("gpt-oss-120b")
    q = FitQuery(model_ref="gpt-oss-120b", gpus=(find_gpu("h200"),), engines=("sglang", "vllm"),
                 requirements=Requirements(min_ctx_tokens=K128), max_gpus=2)  # fmt: skip
    f = fit(arch, q)
    assert f.outcomes
    for o in f.pruned:
        assert o.pruned


def test_query_needs_requirements() -> None:
    with pytest.raises(InputError, match="nothing to fit"):
        _glm_query(requirements=Requirements())


def test_memory_knob_when_the_default_misses() -> None:
    """600K (614,400 tokens) on GLM-5.3 TP8 dcp 1 fp8, H200, SGLang: the default mem_fraction_static 0.886 holds
    567,616 tokens (module doc); admit's search in steps of 0.001 finds the smallest fraction whose pool holds it:
    available = int(((149,036,204,032 − 101,425,652,695) / 2^30 − 138.80078125 × (1 − f)) × 2^30) (test_gate's
    chain), cell 53,940 B, 64-token pages:
      f = 0.902: 33,005,003,341 B // 53,940 = 611,883 -> 611,840 rows < 614,400
      f = 0.903: 33,154,039,545 B // 53,940 = 614,646 -> 614,592 rows >= 614,400: admitted at 0.903.
    """
    arch, dep = _dep("glm-5.3", dcp=1, dp_attention=1, kv_cache_dtype="fp8_e4m3")
    o = evaluate(arch, dep, Requirements(min_ctx_tokens=600 * 1024))
    assert o.ok and o.memory == ("mem_fraction_static", 0.903, 0.886)
    assert o.plan is not None and o.plan.available_bytes == 33_154_039_545 and o.plan.logged_tokens == 614_592
    assert o.deployment.mem_fraction_static == 0.903


def test_memory_knob_lets_vllm_start() -> None:
    """vLLM refuses to start when its pool cannot hold max_model_len (fit asks for the longest required context,
    614,400): at the default gpu_memory_utilization 0.92 the fp8 pool is 533,312 tokens, so the engine does not
    start; admit's search (steps of 0.01) finds the utilization that starts and admits it, and fit keeps it."""
    arch = load_model("glm-5.3")
    q = FitQuery(model_ref="glm-5.3", gpus=(find_gpu("h200"),), engines=("vllm",),
                 requirements=Requirements(min_ctx_tokens=600 * 1024), max_gpus=8, mtp=(False,))  # fmt: skip
    dep = next(d for d in candidates(arch, q) if (d.tp, d.dcp, d.dp_attention, d.kv_cache_dtype) == (8, 1, 1, "fp8"))
    assert dep.context_length == 614_400
    o = evaluate(arch, dep, q.requirements)
    assert o.ok and o.memory is not None and o.memory[0] == "gpu_memory_utilization" and o.memory[2] == 0.92
    assert o.plan is not None and o.plan.startup_error is None and o.plan.logged_tokens >= 614_400
    # the smallest such step: one step lower, planned as is, does not start (or does not admit)
    lower = plan_pool(arch, replace(dep, gpu_memory_utilization=round(o.memory[1] - 0.01, 2)))
    assert lower.startup_error is not None or not admit(lower, Request(ctx_tokens=614_400), remedies=False).admitted


def test_emitted_yaml_carries_the_memory_knob(tmp_path: Path) -> None:
    """The vLLM candidate above, written as --emit-deploy writes it, loads and plans to the same pool."""
    arch = load_model("glm-5.3")
    q = FitQuery(model_ref="glm-5.3", gpus=(find_gpu("h200"),), engines=("vllm",),
                 requirements=Requirements(min_ctx_tokens=600 * 1024), max_gpus=8, mtp=(False,))  # fmt: skip
    dep = next(d for d in candidates(arch, q) if (d.tp, d.dcp, d.dp_attention, d.kv_cache_dtype) == (8, 1, 1, "fp8"))
    o = evaluate(arch, dep, q.requirements)
    assert o.memory is not None and o.plan is not None
    path = tmp_path / "fit.yaml"
    path.write_text(deploy_yaml(o))
    text = path.read_text()
    assert f"gpu_memory_utilization: {o.memory[1]}" in text and "context_length: 614400" in text
    loaded = load_deployment(str(path))
    assert loaded.gpu_memory_utilization == o.memory[1] and loaded.context_length == 614_400
    again = plan_pool(arch, loaded)
    assert again.logged_tokens == o.plan.logged_tokens
    assert admit(again, Request(ctx_tokens=614_400), remedies=False).admitted


def test_pd_prefill_and_decode_sized_separately_and_the_hand_off_is_transfer() -> None:
    """--pd for 1M + 16 × 128K on 8×H200 SGLang fp8: the prefill instance is asked for one 1M request, the decode
    instance for both requirements. Both searches rank TP8 DPA4 DCP8 first at 8 GPUs (fewer GPUs do not load the
    weights). The hand-off of the 1M request from that prefill plan, in 64-token pages (1,048,576 = 16,384 pages):
    dcp 8 -> rows per rank 1,048,576 / 8 = 131,072; SGLang's cell under dcp > 1 is the raw fp8 row plus the
    whole indexer K on each rank: 576 × 78 + 132 × 21 × 8 = 44,928 + 22,176 = 67,104 B; per rank 131,072 ×
    67,104 = 8,795,455,488 B; × 8 ranks = 70,363,643,904 B; at 400 Gbps = 50,000,000,000 B/s: 175,910 µs a rank.
    """
    from kvplan.plan.fit_pd import fit_pd
    from kvplan.plan.transfer import transfer

    arch = load_model("glm-5.3")
    q = _glm_query(requirements=Requirements(min_ctx_tokens=M, concurrency=((16, K128),)))
    f = fit_pd(arch, q)
    p, d = f.prefill.best, f.decode.best
    assert p is not None and d is not None and p.plan is not None
    assert [c.label for c in p.checks] == ["admits 1,048,576 tokens"]  # prefill: the longest context, once
    assert [c.label for c in d.checks] == ["admits 1,048,576 tokens", "admits 16 × 131,072 tokens"]
    assert (p.gpus, d.gpus) == (8, 8) and f.binds == "decode"  # equal GPUs: decode has the less headroom
    assert (p.deployment.tp, p.deployment.dp_attention, p.deployment.dcp) == (8, 4, 8)
    assert p.plan.cell.total_bytes == 576 * 78 + 132 * 21 * 8 == 67_104
    t = f.hand_off
    assert t is not None
    same = transfer(p.plan, M, unit="page", link="400Gbps")
    assert (t.bytes_per_rank, t.total_bytes) == (same.bytes_per_rank, same.total_bytes)
    assert t.bytes_per_rank == 131_072 * 67_104 == 8_795_455_488 and t.total_bytes == 70_363_643_904
    assert t.microseconds(t.bytes_per_rank) == 175_910
    # the prefill memory holds this many 1M prefills at once: admit's own count on the prefill plan
    assert f.prefill_in_flight == admit(p.plan, Request(ctx_tokens=M), remedies=False).max_concurrent >= 1
