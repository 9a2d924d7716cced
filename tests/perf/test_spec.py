"""Speculative decoding in kvplan.perf (MTP / EAGLE): the acceptance length given or defaulted with its band, the
schedule decoding A tokens a verify step, the step pricing D verified tokens a request and the draft module."""

from __future__ import annotations

import pytest

from kvplan.cli._common import load_plan
from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.perf.predict import perf
from kvplan.perf.sched import closed_loop
from kvplan.perf.shape import step_shape
from kvplan.perf.spec import acceptance
from kvplan.perf.step import Batch, parts


def test_the_mtp_default_and_its_band() -> None:
    # DeepSeek-V3 report §5.4.3: the 2nd token is accepted 85-90 % of the time -> low 1 + 0.85 = 1.85. High: with
    # D = 4 verified tokens (3 drafts) 1 + 0.9 + 0.81 + 0.729 = 3.439, capped at 3.20 (nebius/MTP-DeepSeek-V3-0324:
    # DeepSeek-V3's own MTP drafting 7 tokens averages 3.20 at temperature 0); the estimate is the midpoint 2.525
    a = acceptance(verify_tokens=4, has_mtp_layers=True, given=None)
    assert a is not None and (a.low_milli, a.high_milli, a.milli) == (1850, 3200, 2525) and not a.given
    # one draft (D = 2): high 1 + 0.9 = 1.90, estimate (1,850 + 1,900) / 2
    b = acceptance(verify_tokens=2, has_mtp_layers=True, given=None)
    assert b is not None and (b.low_milli, b.high_milli, b.milli) == (1850, 1900, 1875)
    assert "DeepSeek-V3 report" in a.line() and "band 1.85–3.20" in a.line()


def test_a_given_acceptance_length_is_the_point_and_checked() -> None:
    a = acceptance(verify_tokens=4, has_mtp_layers=True, given=2.4)
    assert a is not None and a.given and a.milli == 2400 and "given" in a.line()
    assert acceptance(verify_tokens=0, has_mtp_layers=True, given=None) is None
    with pytest.raises(ValueError, match="from 1 to the 4 tokens verified"):
        acceptance(verify_tokens=4, has_mtp_layers=True, given=4.5)
    with pytest.raises(ValueError, match="needs speculative decoding"):
        acceptance(verify_tokens=0, has_mtp_layers=True, given=2.0)
    with pytest.raises(ValueError, match="no default acceptance length for an EAGLE"):
        acceptance(verify_tokens=4, has_mtp_layers=False, given=None)


def test_the_schedule_decodes_a_tokens_a_step_and_vllm_counts_d_against_its_budget() -> None:
    # A = 2, D = 3, osl 5: the 4 tokens after the first take ceil(4 / 2) = 2 decode steps, each running 3 tokens a
    # request through the target (logits for all 3) and 3 through the draft. vLLM budget 12, both clients at once:
    # step 0 prefills r0 (10) and 2 tokens of r1; step 1 decodes r0 (3 of the budget, not 1) and finishes r1's 8
    # (9 left), sampling r0's 3 and r1's first
    spec = acceptance(verify_tokens=3, has_mtp_layers=True, given=2.0)
    s = closed_loop(engine="vllm", isl=10, osl=5, concurrency=2, cap=2, budget=12, num_prompts=2, spec=spec)
    assert s.steps[0] == Batch(prefill_tokens=12, prefill_pairs=58, sampled=1)
    assert s.steps[1] == Batch(prefill_tokens=8, prefill_pairs=52, decode_requests=1, decode_context=11, sampled=4,
                               verify_tokens=3, draft_tokens=3)  # fmt: skip
    assert s.first == (0, 1) and s.finished == (2, 3)  # two decode steps each: r0 at 1, 2; r1 at 2, 3
    # budget 10: step 0 holds r0 alone; beside r0's 3 verified tokens 7 are left each step: r1's 10 take 7 + 3
    tight = closed_loop(engine="vllm", isl=10, osl=5, concurrency=2, cap=2, budget=10, num_prompts=2, spec=spec)
    assert [b.prefill_tokens for b in tight.steps[:3]] == [10, 7, 3]


def test_verified_tokens_multiply_the_attention_flops_not_the_kv_read() -> None:
    # Llama-3.1-8B, one request at 1,000 tokens (tests/perf/test_step.py: 524,288,000 FLOPs, 131,072,000 B): 3
    # verified tokens attend to the same 1,000 keys (3 × the FLOPs), the KV read once; the dense GEMMs run 3 tokens
    shape = step_shape(load_model("llama-3.1-8b"))
    one = {p.name: p for p in parts(shape, Batch(decode_requests=1, decode_context=1000, sampled=1), Split.of(tp=1),
                                     "bf16", "bf16")}  # fmt: skip
    b = Batch(decode_requests=1, decode_context=1000, sampled=3, verify_tokens=3, draft_tokens=3)
    three = {p.name: p for p in parts(shape, b, Split.of(tp=1), "bf16", "bf16")}
    assert three["attention"].flops == 3 * 524_288_000 and three["attention"].bytes == 131_072_000
    assert three["dense GEMMs"].flops == 3 * one["dense GEMMs"].flops
    # the draft: 3 passes of one layer's GEMMs (7,504,658,432 − LM head 525,336,576 over 32 layers) and the LM head
    dense = shape.dense_params
    assert three["draft"].flops == 2 * 1 * 3 * (dense // 32 + shape.lm_head_params) and "draft" not in one


def test_tpot_goes_as_one_over_the_acceptance_length_for_one_client() -> None:
    # GLM-5.3 (MTP layers) on 8×H200 SGLang with 4 draft tokens, one client, 1,024 output tokens: each decode step
    # prices alike (one request, the same D = 4), so TPOT is a step × the steps over the 1,023 tokens after the first:
    # ceil(1,023 / 1) = 1,023 steps at A = 1, ceil(1,023 / 2) = 512 at A = 2
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["speculative_num_draft_tokens=4"])
    at = {a: perf(plan.arch, plan, isl=256, osl=1024, concurrency=1, acceptance_length=a).us["tpot"] for a in (1, 2)}
    assert abs(at[2].value / at[1].value - 512 / 1023) < 0.01
    # given: the band is the coefficients' alone; defaulted: wider by the acceptance band (× 2.525 / 1.85 up)
    d = perf(plan.arch, plan, isl=256, osl=1024, concurrency=1).us["tpot"]
    assert d.high / d.value > at[2].high / at[2].value * 2.525 / 1.85 * 0.99


def test_a_speculative_deployments_band_is_at_least_the_published_speculative_miss() -> None:
    # no coefficient row was fitted on speculative steps; the published GLM-5 EAGLE points (benchmarks/
    # perf_published.py) missed by up to × 2.38 in TPOT: an acceptance given as measured still leaves the band that
    # wide (coeffs.WORST_SPECULATIVE), and the acceptance line says so
    from kvplan.cli._common import load_plan
    from kvplan.perf.predict import perf

    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["speculative_num_draft_tokens=4"])
    r = perf(plan.arch, plan, isl=1024, osl=256, concurrency=8, acceptance_length=3.0)
    tpot = r.us["tpot"]
    assert tpot.high / tpot.value >= 2.38 - 1e-3 and tpot.value / tpot.low >= 2.38 - 1e-3
    assert any("no row was fitted on speculative steps" in a for a in r.assumptions)
    plain = perf(plan.arch, load_plan(None, "glm-5.3-8xh200-sglang", ["speculative_num_draft_tokens=0"]),
                 isl=1024, osl=256, concurrency=8)  # fmt: skip
    assert plain.us["tpot"].high / plain.us["tpot"].value < 2.0  # the row's own band, narrower


def test_the_itl_is_the_engine_benchmarks_own_with_speculative_decoding() -> None:
    # a step streams A tokens on average. SGLang's bench_serving spreads each chunk's gap over its tokens
    # (python/sglang/bench_serving.py: adjust_itl = chunk_gap / num_new_tokens, extended once a token): a 35 ms step
    # at A = 3.5 is an ITL of 10 ms. vllm bench serve appends one gap a chunk (vllm/benchmarks/lib/
    # endpoint_request_func.py: output.itl.append(timestamp - most_recent_timestamp)): 35 ms. Without speculative
    # decoding a chunk is one token either way: unchanged, nothing said
    from kvplan.perf.predict import _bench_itl
    from kvplan.perf.sched import Timings
    from kvplan.perf.spec import Acceptance

    t = Timings(ttft=(0.1,), tpot=(0.01,), e2e=(1.0,), duration=1.0, itl_median=0.035)
    spec = Acceptance(verify_tokens=4, milli=3500, low_milli=3500, high_milli=3500, source="given")
    sglang, said = _bench_itl(t, "sglang", spec)
    assert abs(sglang.itl_median - 0.010) < 1e-12 and sglang.tpot == t.tpot and "÷ 3.50" in said
    vllm, said_vllm = _bench_itl(t, "vllm", spec)
    assert vllm == t and "one gap a step" in said_vllm
    assert _bench_itl(t, "sglang", None) == (t, "")
