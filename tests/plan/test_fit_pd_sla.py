"""kvplan.plan.fit_pd_sla and the PD side of kvplan.plan.fit_sla: fit --pd with SLAs, each side priced against its
own requirements (decode: TPOT and throughput, its steps its decodes alone; prefill: TTFT with clients waiting the
decode side's time of a request, plus the KV hand-off)."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from kvplan.cli._common import load_plan
from kvplan.models.deploy import Requirements
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.perf.open_loop import open_timings, thinking_loop
from kvplan.perf.predict import perf
from kvplan.plan.fit import FitQuery
from kvplan.plan.fit_pd import fit_pd
from kvplan.plan.fit_pd_sla import decode_time_s, pd_fits
from kvplan.plan.fit_sla import SlaSpec, hand_off_band


def test_the_hand_off_of_one_request_llama_8b_tp2() -> None:
    # Llama-3.1-8B, bf16 KV: 2 (K, V) × 32 layers × 8 kv heads × 128 × 2 bytes = 131,072 B a token, 65,536 on each
    # of 2 TP ranks (4 heads each). 32,768 tokens (whole 16-token pages): 2,147,483,648 B a rank; at 400 Gb/s =
    # 50,000,000,000 B/s that is 42,949.67 µs, rounded up 42,950 (each rank over its own link). High: both ranks'
    # 4,294,967,296 B over one link, 85,900 µs. Low, SGLang: only the last 8,192-token chunk's share
    # (chunked_prefill_size here) is left after the prefill (send_kv_chunk): 42,950 × 8,192 // 32,768 = 10,737;
    # vLLM's NixlConnector reads the blocks once the prefill is done: low = the estimate
    plan = load_plan("llama-3.1-8b", "glm-5.3-8xh200-vllm", ["tp=2"])
    b = hand_off_band(plan, 32_768, "400Gbps", 8192)
    assert (b.value, b.low, b.high) == (42_950, 42_950, 85_900)
    sglang = load_plan("llama-3.1-8b", "glm-5.3-8xh200-sglang", ["tp=2", "dp_attention=1", "ep=1",
                                                                 "speculative_num_draft_tokens=0"])  # fmt: skip
    b = hand_off_band(sglang, 32_768, "400Gbps", 8192)
    assert (b.value, b.low, b.high) == (42_950, 10_737, 85_900)


def test_clients_that_think_between_requests() -> None:
    # 2 clients, 4 one-token requests of 10 tokens, each step 0.1 s, think 1 s: first requests at 0 and 0.5 s (spread
    # over one think time); r0 ends at 0.1 s and its client sends at 1.1 s, r1 at 0.6 s and 1.6 s; each request finds
    # the engine idle: TTFT 0.1 s each, the run from 0 to 1.7 s
    s = thinking_loop(engine="vllm", isl=10, osl=1, clients=2, think_s=1.0, num_prompts=4, cap=4, budget=100,
                      price=lambda b: 0.1)  # fmt: skip
    assert [round(x, 9) for x in s.arrival_s] == [0.0, 0.5, 1.1, 1.6]
    t = open_timings(s, 1)
    assert [round(x, 9) for x in t.ttft] == [0.1] * 4 and round(t.duration, 9) == 1.7


def test_each_side_is_priced_against_its_own_requirements() -> None:
    q = FitQuery(model_ref="llama-3.1-8b", gpus=(find_gpu("h200"),), engines=("vllm",),
                 requirements=Requirements(concurrency=((16, 33_792),)), max_gpus=2,
                 sla=SlaSpec(isl=32_768, osl=1024, concurrency=16, ttft_us=60_000_000, tpot_us=20_000))  # fmt: skip
    pd = fit_pd(load_model("llama-3.1-8b"), q, sides=pd_fits)
    p, d = pd.prefill.best, pd.decode.best
    assert p is not None and d is not None and p.sla and d.sla and p.sla.perf and d.sla.perf
    assert [t.name for t in d.sla.terms] == ["TPOT"] and [t.name for t in p.sla.terms] == ["TTFT"]
    # the prefill side's clients wait the decode side's time of a request: its median e2e less its median TTFT
    us = d.sla.perf.us
    assert pd.sla_think_s == (us["e2e"].value - us["ttft"].value) / 1e6
    assert p.sla.perf.osl == 1 and f"{pd.sla_think_s:,.3f} s after" in p.sla.perf.assumptions[0]
    # TTFT on the prefill side: its own TTFT plus the hand-off, band to band
    h = p.sla.hand_off_us
    assert h == hand_off_band(p.plan, 32_768, "400Gbps", 8192)  # type: ignore[arg-type]
    got, own = p.sla.terms[0].got, p.sla.perf.us["ttft"]
    assert (got.value, got.low, got.high) == (own.value + h.value, own.low + h.low, own.high + h.high)
    # the decode side's steps are its decodes alone: vLLM's mixed steps lose their prefill chunks, so its TPOT is
    # below the same instance's serving both phases
    both = perf(load_model("llama-3.1-8b"), d.plan, isl=32_768, osl=1024, concurrency=16)  # type: ignore[arg-type]
    assert d.sla.perf.us["tpot"].value < both.us["tpot"].value


def test_the_decode_time_of_a_request() -> None:
    # kvplan.plan.fit_pd_sla: the prefill side's clients wait the decode side's median end to end less its median
    # TTFT; no decode instance priced -> None; a one-token output ends at its first token (e2e == TTFT): 0 s, not 1 µs
    def priced(e2e_us: int, ttft_us: int) -> Any:
        us = {"e2e": NS(value=e2e_us), "ttft": NS(value=ttft_us)}
        return NS(best=NS(sla=NS(perf=NS(us=us))))

    assert decode_time_s(NS(best=None)) is None  # type: ignore[arg-type]
    assert decode_time_s(NS(best=NS(sla=None))) is None  # type: ignore[arg-type]
    assert decode_time_s(priced(5_000, 5_000)) == 0.0
    assert decode_time_s(priced(2_500_000, 500_000)) == 2.0
