"""kvplan.perf.predict end to end on a case priced by hand: one client of Llama-3.1-8B on one H200 under vLLM, where
every step is bound by reading the weights once."""

from __future__ import annotations

import pytest

from kvplan.cli._common import load_plan
from kvplan.perf.predict import (
    PROMPTS_PER_CLIENT,
    RATE_PROMPTS,
    Load,
    _closed,
    _figures,
    _open,
    _quant,
    _thinking,
    decode_share,
    perf,
    rank_budget,
    running_cap,
)
from kvplan.perf.sched import Timings
from kvplan.perf.step import Batch
from tests.conftest import make_plan


class _OneSecond:
    """Every step one second (kvplan.perf.predict.StepPrice)."""

    def __call__(self, _b: Batch) -> float:
        return 1.0

    def each(self, b: Batch) -> list[float]:
        return [1.0] * b.repeat


def test_one_client_is_weight_read_bound_llama_8b_h200() -> None:
    plan = load_plan("llama-3.1-8b", "glm-5.3-8xh200-vllm", ["tp=1"])
    r = perf(plan.arch, plan, isl=16, osl=65, concurrency=1)
    c = r.coefficients
    # the row: H200 is Hopper, vLLM 0.33.0 has no row of its own, GQA: the gpt-oss H200 vLLM 0.18.0 row, borrowed
    assert (c.gpu_class, c.engine, c.family) == ("hopper", "vllm", "gqa") and "engine version" in r.borrowed
    # bf16 weights read each step: (attention 1,342,177,280 + MLP 5,637,144,576) × 2 B + LM head 128,256 × 4,096 × 2 B
    # = 15,009,316,864 B at 4.8 TB/s × mem_eff; the GEMM FLOPs of one token (2 × 7,504,658,432) at 989 TFLOPS ×
    # gemm_eff take under 0.4 ms, the KV of 80 tokens (80 × 8 × 256 × 2 B × 32 = 10.5 MB) 5 µs: a step is the read
    # plus its 32 layers' fixed latency (config num_hidden_layers × layer_us), and so is TPOT (one request: every step
    # decodes it); TTFT is a step (a 16-token prefill; the lone client finds the engine idle, no turnaround) plus the
    # row's request_us and client_us (one request in flight) outside the steps
    step_s = 15_009_316_864 / (4.8e12 * c.mem_eff) + 32 * c.layer_us * 1e-6
    assert abs(r.us["tpot"].value * 1e-6 / step_s - 1) < 0.005
    outside_s = (c.request_us + c.client_us) * 1e-6
    assert abs(r.us["ttft"].value * 1e-6 / (step_s + outside_s) - 1) < 0.005
    # output tok/s per GPU, Little's law for one client: 65 tokens per the latency outside + 65 steps (the prefill,
    # 64 decodes)
    e2e_s = outside_s + 65 * step_s
    assert abs(r.tokens_per_s_per_gpu["output"].value * e2e_s / 65 - 1) < 0.01
    assert r.peak_running == 1 and r.running_cap == 1024


def test_sglang_splits_its_prefill_budget_over_dp_ranks_down_to_one_token() -> None:
    # server_args._handle_data_parallelism: chunked_prefill_size // dp_size a rank; vLLM's max_num_batched_tokens is
    # each EngineCore's own. A knob of 4 over 8 ranks floors to 0 there, which schedules nothing: kvplan keeps 1
    eight = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8", "chunked_prefill_size=16384"])
    assert rank_budget(eight) == 16_384 // 8
    assert rank_budget(load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8", "chunked_prefill_size=4"])) == 1
    assert rank_budget(load_plan(None, "glm-5.3-8xh200-vllm", ["dp_attention=8", "max_num_batched_tokens=4"])) == 4


def test_a_group_the_model_lacks_is_priced_bf16() -> None:
    # GLM-5.3's preset: block-fp8 attention (1 byte a weight + one fp32 scale per 128 x 128: 1.0002 B) -> fp8; a
    # model with no such group (none of its tensors) is priced at bf16's 2 bytes, the slower read
    arch = load_plan(None, "glm-5.3-8xh200-sglang", []).arch
    assert _quant(arch, "attention") == "fp8"
    assert _quant(arch, "no_such_group") == "bf16"


def test_a_request_must_fit_one_dp_rank_pool() -> None:
    # DP attention: each rank holds its requests whole in its own pool and its own scheduler admits against it
    # (Batch.across), so a request one token longer than a rank's pool is refused; one a token short of it is
    # priced (SGLang PrefillAdder.add_one_req admits only while input + output < the free pool: a request that
    # fills the rank's pool exactly is never admitted)
    plan = load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"])
    rank = plan.usable_tokens
    r = perf(plan.arch, plan, isl=rank - 65, osl=64, concurrency=1)
    assert r.peak_running == 1  # one client: one rank runs it, the other seven idle
    with pytest.raises(ValueError, match=f"larger than one DP rank's pool \\({rank:,} tokens\\)"):
        perf(plan.arch, plan, isl=rank - 63, osl=64, concurrency=1)


def test_sglang_blends_its_waves_by_the_wave_share_and_vllm_never_does() -> None:
    # 2 clients of 10 + 5 tokens, a budget of 10, every step 1 s; 6 requests, the first 2 a warm-up
    # spread (share 0): SGLang sees a request sent after step s at s + 3 while busy (event_loop_overlap), so each
    # measured TTFT is 3 s (two steps' wait, its own prefill); the other client's prefill batch stops its 4 decodes
    # once (get_next_batch_to_run: prefill first): TPOT (4 + 1) / 4 = 1.25 s, e2e 3 + 5 = 8 s
    # waves (share 1): both clients send when their wave ends together and the idle engine takes both; the budget
    # prefills one a step: TTFT 1 and 2 s; both decode 4 steps after the second prefill: TPOT 5 / 4 = 1.25 and
    # 4 / 4 = 1.0 s, e2e 2 + 4 = 6 s
    def run(engine: str, share: float) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], str]:
        ld = Load(engine=engine, isl=10, osl=5, cap=2, budget=10, spec=None, wave_share=share)
        t, _, _, how = _closed(ld, 2, _OneSecond())
        return tuple(sorted(t.ttft)), tuple(sorted(t.tpot)), tuple(sorted(t.e2e)), how

    assert run("sglang", 0.0)[:3] == ((3.0,) * 4, (1.25,) * 4, (8.0,) * 4)
    assert run("sglang", 1.0)[:3] == ((1.0, 1.0, 2.0, 2.0), (1.0, 1.0, 1.25, 1.25), (6.0,) * 4)
    # half in waves: each sorted figure the mean of the two (kvplan.perf.sched.blend), said on the load's line
    half = run("sglang", 0.5)
    assert half[:3] == ((2.0, 2.0, 2.5, 2.5), (1.125, 1.125, 1.25, 1.25), (7.0,) * 4)
    assert "clients 50% spread over a request's service, 50% in waves" in half[3] and "DP attention" not in half[3]
    # 2 clients, PROMPTS_PER_CLIENT (3) requests each: 2 warm-up (aiperf --warmup-request-count C), 6 - 2 measured
    assert "steady state: 2 warm-up requests, 4 measured" in half[3]
    # vLLM decodes each request beside the others' prefills: nothing keeps waves (sched.WAVES), the share is unused
    assert run("vllm", 0.5) == run("vllm", 0.0) and "in waves" not in run("vllm", 0.5)[3]


def test_a_dense_model_takes_the_band_of_the_held_out_dense_groups() -> None:
    # every coefficient row is fitted on MoE models; the held-out dense groups the Hopper vLLM GQA row priced are
    # Llama-3.1-70B H200 (60 rows, TPOT MAPE 84.1 %) and Llama-3.1-8B vLLM 0.12.0 (21 rows, 413.1 %):
    # (60 × 84.1 + 21 × 413.1) / 81 = 169.4 % (benchmarks/perf_calibrate.py, README "Held-out error")
    plan = load_plan("llama-3.1-8b", "glm-5.3-8xh200-vllm", ["tp=1"])
    r = perf(plan.arch, plan, isl=16, osl=65, concurrency=1)
    assert r.heldout[1] == 1.694 and r.heldout_of.startswith("dense models")
    # vLLM 0.33.0 is outside the row's 0.18.0 and its GEMMs are bf16, not the row's fp4: borrowed across a weight
    # format ('other'), × / ÷ max(1 + 2 × 1.5 × 1.694, WORST_BORROWED other TPOT 12.10) = 12.10 (band_mape)
    tpot = r.us["tpot"]
    assert r.borrowed.endswith("fitted on fp4 GEMMs, not bf16")
    assert abs(tpot.high / tpot.value - 12.10) < 0.01 and abs(tpot.value / tpot.low - 12.10) < 0.02
    # a MoE model on the same row's class keeps the MoE error: GLM-5.3 on the Hopper vLLM MLA row, TPOT 4.5 %
    moe = load_plan(None, "glm-5.3-8xh200-vllm", [])
    m = perf(moe.arch, moe, isl=1024, osl=64, concurrency=1)
    assert m.heldout == m.coefficients.heldout_mape and m.heldout_of == "MoE models"


def test_vllm_client_latency_grows_with_the_requests_in_flight() -> None:
    # Coefficients.client_us: 10 ms a client in flight, 2 clients of 10 + 5 tokens (each step 1 s): every TTFT and
    # end to end 2 × 10 ms = 0.02 s later than without it, TPOT (tokens after the first) unchanged
    def run(client_s: float) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        ld = Load(engine="vllm", isl=10, osl=5, cap=2, budget=10, spec=None, client_s=client_s)
        t, _, _, _ = _closed(ld, 2, _OneSecond())
        return t.ttft, t.tpot, t.e2e

    (t0, p0, e0), (t1, p1, e1) = run(0.0), run(0.01)
    assert all(abs(b - a - 0.02) < 1e-9 for a, b in zip(t0 + e0, t1 + e1, strict=True)) and p0 == p1
    # and an open loop's share is by its peak running set: Load.before_first
    assert Load(engine="vllm", isl=1, osl=1, cap=1, budget=1, spec=None, request_s=0.1,
                client_s=0.01).before_first(7) == 0.1 + 0.07  # fmt: skip


def test_the_latency_outside_the_steps_is_said_with_its_figures() -> None:
    # the Hopper vLLM MLA row: request_us 83,500 µs = 83.5 ms, client_us 3,350 µs = 3.35 ms a request in flight;
    # SGLang's rows fit no client_us (its detokenizer is a process of its own): only the fixed part is said
    plan = load_plan(None, "glm-5.3-8xh200-vllm", [])
    r = perf(plan.arch, plan, isl=1024, osl=64, concurrency=1)
    assert any(a.startswith("before each first token, outside the steps: 83.5 ms fitted") and "+ 3.35 ms a request"
               in a for a in r.assumptions)  # fmt: skip
    sg = load_plan(None, "glm-5.3-8xh200-sglang", [])
    r = perf(sg.arch, sg, isl=1024, osl=64, concurrency=1)
    line = next(a for a in r.assumptions if a.startswith("before each first token"))
    assert "145.0 ms fitted" in line and "a request in flight" not in line
    # and the published point it is checked against names the row that prices it (Blackwell SGLang MLA, 149,000 µs)
    assert "DeepSeek-R1 on B200 141 ms at one client where the B200 SGLang row's 149 ms alone is more" in line


def test_the_kv_dtype_and_the_nodes_a_tp_group_spans_are_said() -> None:
    # GLM-5.3's preset KV is fp8_ds_mla (1 byte an element), Llama-3.1-8B's under kv_cache_dtype auto its bf16
    # checkpoint's 2 bytes; a tp 16 group over 8-GPU nodes spans 2 of them, where the engines' custom all-reduce
    # (intra-node only) gives way to NCCL over the NICs
    glm = load_plan(None, "glm-5.3-8xh200-sglang", [])
    said = perf(glm.arch, glm, isl=1024, osl=64, concurrency=1).assumptions
    assert any(a.endswith("; KV cache fp8") for a in said)
    assert any(a.endswith("one all-reduce pair a layer over NVLink") for a in said)
    llama = load_plan("llama-3.1-8b", "glm-5.3-8xh200-vllm", ["tp=1", "kv_cache_dtype=auto"])
    said = perf(llama.arch, llama, isl=1024, osl=64, concurrency=1).assumptions
    assert any(a.endswith("; KV cache bf16") for a in said)
    wide = load_plan(None, "glm-5.3-8xh200-sglang", ["tp=16", "nodes=2"])
    assert any("across 2 nodes over the nodes' 8 × 400 Gb/s NICs" in a
               for a in perf(wide.arch, wide, isl=1024, osl=64, concurrency=1).assumptions)  # fmt: skip


def test_the_running_cap_by_the_pool_and_under_dp_ranks() -> None:
    # each running request holds its whole length: the default plan's 567,616-token pool holds
    # 567,616 // (1,000 + 24) = 554 at once; a request of the whole pool plus one token fits none, and the cap
    # stays 1 (the loop then refuses it by its own check), not 2
    p = make_plan()
    assert running_cap(p, 1000, 24)[0] == 554
    assert running_cap(p, p.usable_tokens, 1) == (1, "pool 567,616 tokens × 1 DP rank(s) // (isl + osl) = 0")
    # two DP ranks each run their own cap of 1 (one Scheduler / EngineCore a rank): both clients run at once
    two = Load(engine="vllm", isl=10, osl=5, cap=1, budget=10, spec=None, ranks=2)
    one = Load(engine="vllm", isl=10, osl=5, cap=1, budget=10, spec=None, ranks=1)
    assert _closed(two, 2, _OneSecond())[2].peak == 2 and _closed(one, 2, _OneSecond())[2].peak == 1


def test_an_open_loops_throughput_is_every_output_token_over_the_whole_run() -> None:
    # bench_serving's output throughput: RATE_PROMPTS requests × osl tokens over the run from the first arrival to
    # the last token (drain included); requests 100 s apart on 1 s steps each run alone
    ld = Load(engine="vllm", isl=10, osl=4, cap=4, budget=100, spec=None)
    t, out, ran, _ = _open(ld, 0.01, lambda _b: 1.0)
    assert ran.requests == RATE_PROMPTS and out == RATE_PROMPTS * 4 / t.duration
    assert t.duration > RATE_PROMPTS  # arrivals ~100 s apart: the run is longer than one second a request


def test_thinking_clients_throughput_is_every_output_token_over_the_run() -> None:
    # the PD prefill side's clients (kvplan.plan.fit_pd_sla) think between requests: PROMPTS_PER_CLIENT requests a
    # client, each of osl tokens, over the run from the first arrival to the last token; 1 s steps, 5 s of thinking
    ld = Load(engine="vllm", isl=10, osl=4, cap=4, budget=100, spec=None)
    t, out, ran, how = _thinking(ld, 2, 5.0, lambda _b: 1.0)
    assert ran.requests == 2 * PROMPTS_PER_CLIENT and out == ran.requests * 4 / t.duration
    assert t.duration > 2 * 5.0 and "5.000 s after its last finishes" in how  # two thinks a client at least


def test_itl_is_the_schedules_median_gap_in_microseconds() -> None:
    t = Timings(ttft=(1.0,), tpot=(0.5,), e2e=(2.5,), duration=2.5, itl_median=0.25)
    us, tput = _figures(t, (0.0, 0.0, 0.0), None, out=1.0, isl=2, osl=4)
    assert us["itl"].value == 250_000 and us["tpot"].value == 500_000 and us["e2e"].value == 2_500_000
    # total tok/s: output × (isl + osl) / osl = 1 × 6 / 4 = 1.5 tokens a second, rounded to 2 (not 6 // 4 = 1)
    assert tput["output"].value == 1 and tput["total"].value == 2


def test_a_pd_decode_instance_runs_the_steps_decodes_alone() -> None:
    # a mixed step with speculative decoding (D = 4 verified a request): the decode instance runs its 3 decodes over
    # their 30 tokens of context and samples at every verified position, 3 × 4 = 12; the prefill (5 tokens) stays on
    # the prefill instance, and a step with no decode runs nothing there
    mixed = Batch(prefill_tokens=5, prefill_pairs=15, decode_requests=3, decode_context=30, sampled=13, verify_tokens=4,
                  draft_tokens=4)  # fmt: skip
    assert decode_share(mixed) == Batch(decode_requests=3, decode_context=30, sampled=12, verify_tokens=4,
                                        draft_tokens=4)  # fmt: skip
    assert decode_share(Batch(prefill_tokens=5, prefill_pairs=15, sampled=1)) is None


def test_the_pool_line_names_each_engines_own_way_out() -> None:
    # vLLM V1 preempts the newest running request (Scheduler.schedule → _preempt_request); SGLang retracts decode
    # requests (update_running_batch → retract_decode); the pool, its ranks and the count as given
    from kvplan.perf.predict import _pool_line

    vllm, sglang = _pool_line("vllm", 1_000, 2, 3), _pool_line("sglang", 1_000, 1, 0)
    assert "vLLM V1 preempts the newest running request" in vllm and "retract_decode" not in vllm
    assert "SGLang retracts decode requests" in sglang and "preempts the newest" not in sglang
    assert "1,000 tokens (2 DP rank(s) as one pool)" in vllm and vllm.endswith(": 3 preemption(s)")


def test_a_defaulted_acceptance_length_widens_the_decode_bands_by_its_own() -> None:
    # the MTP default A = 2.525 in a band 1.85–3.20 (kvplan.perf.spec): TPOT goes as 1 / A, so its high end is
    # priced at A's low end (× 2.525 / 1.85) and its low end at A's high end (÷ 3.20 / 2.525), beside the held-out
    # 10 %: a TPOT of 10,000 µs runs 10,000 / (1.1 × 1.2673) = 7,173.5 → 7,173 to 10,000 × 1.1 × 1.3649 = 15,013.5 →
    # 15,014 (ends rounded outwards); output tok/s goes as A: 100 in 100 / (1.1 × 1.3649) = 66.6 → 66 to
    # 100 × 1.1 × 1.2673 = 139.4 → 140
    from kvplan.perf.predict import _figures
    from kvplan.perf.spec import Acceptance

    t = Timings(ttft=(0.1,), tpot=(0.01,), e2e=(1.0,), duration=1.0, itl_median=0.01)
    spec = Acceptance(verify_tokens=4, milli=2525, low_milli=1850, high_milli=3200, source="default")
    us, tput = _figures(t, (0.1, 0.1, 0.1), spec, out=100.0, isl=1, osl=1)
    assert (us["tpot"].low, us["tpot"].high) == (7173, 15014)
    assert (tput["output"].low, tput["output"].high) == (66, 140)
