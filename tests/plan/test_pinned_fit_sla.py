"""kvplan.plan.fit_sla pinned at the boundaries its mutants move (scripts/mutate.py).

The expected values are the SLA search's rules (README "Latency and throughput", issue 30): a requirement is met when
even the band's unfavourable end meets it (TTFT / TPOT at their high end, throughput at its low end), "≤" and "≥"
inclusive; margins are (required − estimate) / required for a latency, (estimate − required) / required for
throughput, in whole ppm rounded down (DESIGN §2: ints); the candidates rank by GPUs, then met at the band's
unfavourable end, then the least margin (most first). check_sla is fed small hand-built perf results (kvplan perf
stands in for a fake that records what it was asked), so no figure here is kvplan perf's own output.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvplan.cli._common import load_plan
from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.from_hf import load_model
from kvplan.perf.predict import Band, PerfResult, perf
from kvplan.plan import fit_sla
from kvplan.plan.fit_sla import AT_ESTIMATE, MET, SlaCheck, SlaSpec, SlaTerm, check_sla

MODEL, DEPLOYMENT = "llama-3.1-70b", "glm-5.3-8xh200-vllm"


def _term(name: str, required: int, v: int, lo: int, hi: int) -> SlaTerm:
    return SlaTerm(name=name, required=required, got=Band(v, lo, hi), unit="tok/s" if name == "throughput" else "us")


def test_the_label_shows_each_requirement_as_given() -> None:
    # --require-ttft 1.5ms --require-tpot 25.5ms --require-throughput 12000 --at p90 --concurrency 1000 --isl 1024
    # --osl 256: the durations are held in µs (units.parse_duration_us: 1,500 and 25,500) and shown back in ms
    spec = SlaSpec(isl=1024, osl=256, concurrency=1000, ttft_us=1_500, tpot_us=25_500, output_tokens_per_s=12_000,
                   at="p90")  # fmt: skip
    assert (
        spec.label
        == "TTFT ≤ 1.5 ms, TPOT ≤ 25.5 ms, ≥ 12,000 output tok/s (p90) at 1,000 clients of 1,024 + 256 tokens"
    )
    assert (
        SlaSpec(isl=1, osl=1, concurrency=1, tpot_us=40_000).label
        == "TPOT ≤ 40 ms (median) at 1 clients of 1 + 1 tokens"
    )


def test_a_requirement_met_exactly_is_met() -> None:
    # "TPOT ≤ 50 ms" holds at 50 ms: a band whose high end is 50,000 µs is met at its unfavourable end, and an
    # estimate of exactly 50,000 µs with the high end above is met at the estimate only (margin 0)
    assert _term("TPOT", 50_000, 45_000, 40_000, 50_000).verdict == MET
    edge = _term("TPOT", 50_000, 50_000, 40_000, 60_000)
    assert (edge.verdict, edge.margin_ppm) == (AT_ESTIMATE, 0)
    # "≥ 20,000 output tok/s" holds at 20,000: a low end of 20,000 meets it
    assert _term("throughput", 20_000, 30_000, 20_000, 40_000).verdict == MET
    tput = _term("throughput", 20_000, 20_000, 15_000, 25_000)
    assert (tput.verdict, tput.margin_ppm) == (AT_ESTIMATE, 0)


def test_margins_are_whole_ppm_rounded_down() -> None:
    # TTFT ≤ 30 ms at an estimate of 10 ms: (30 − 10) / 30 = 2/3 = 666,666.67 ppm -> 666,666
    assert _term("TTFT", 30_000, 10_000, 8_000, 12_000).margin_ppm == 666_666
    # ≥ 30,000 tok/s at an estimate of 50,000: (50 − 30) / 30 = 2/3 -> 666,666
    assert _term("throughput", 30_000, 50_000, 40_000, 60_000).margin_ppm == 666_666
    # a miss: TPOT ≤ 30 ms at 40 ms: (30 − 40) / 30 = −333,333.3 -> −333,334 (rounded down, away from met)
    assert _term("TPOT", 30_000, 40_000, 35_000, 45_000).margin_ppm == -333_334


def test_a_candidate_is_as_good_as_its_least_met_requirement() -> None:
    ttft = _term("TTFT", 1_000_000, 500_000, 400_000, 600_000)  # margin 500,000 ppm, met at the band's high end
    tpot = _term("TPOT", 50_000, 45_000, 40_000, 55_000)  # margin 100,000 ppm, met at the estimate only
    c = SlaCheck(terms=(ttft, tpot))
    assert c.margin_ppm == 100_000  # the least of the two
    assert c.ok and not c.ok_at_band_edge  # TPOT's high end 55 ms misses 50 ms
    assert c.rank == (True, -100_000)
    both = SlaCheck(terms=(ttft, _term("TPOT", 50_000, 45_000, 40_000, 50_000)))
    assert both.ok_at_band_edge and both.rank == (False, -100_000)
    # not priced: neither admitted nor met at the band's edge, and it meets no share of the requirements
    err = SlaCheck(error="perf has no datasheet peaks for L40S")
    assert (err.ok, err.ok_at_band_edge, err.closeness_ppm) == (False, False, 0)
    # its margin is the whole requirement short, −100 %: ranked level with a priced miss of exactly −100 %
    assert err.margin_ppm == -1_000_000 and err.rank == (True, 1_000_000)
    assert err.lacks == ("SLA not priced: perf has no datasheet peaks for L40S",)


def test_closeness_of_a_met_and_a_barely_missed_sla() -> None:
    # met: the whole share, 1,000,000 ppm (fit's closest candidate: 1,000,000 less the largest shortfall)
    assert SlaCheck(terms=(_term("TPOT", 50_000, 45_000, 40_000, 50_000),)).closeness_ppm == 1_000_000
    # TPOT ≤ 1 s missed by 1 µs: (1,000,000 − 1,000,001) / 1,000,000 = −1 ppm -> 999,999, just below a met one
    near = SlaCheck(terms=(_term("TPOT", 1_000_000, 1_000_001, 1_000_001, 1_000_002),))
    assert not near.ok and near.closeness_ppm == 999_999


def test_what_a_latency_miss_says() -> None:
    # item 5 of issue 26: the message carries both figures, in ms with one decimal (55,500 µs is 55.5 ms)
    c = SlaCheck(terms=(_term("TPOT", 50_000, 55_500, 40_000, 80_000), _term("TTFT", 2_000, 1_500, 1_000, 1_900)))
    assert c.lacks == ("TPOT 55.5 ms against 50.0 ms: met only inside the band",)


# --------------------------------------------------------------------------- check_sla on hand-built perf results


@pytest.fixture(scope="module")
def arch() -> ModelArch:
    return load_model(MODEL)


@pytest.fixture(scope="module")
def shape(arch: ModelArch) -> PerfResult:
    """A perf result whose figures are replaced by hand below (only its bookkeeping fields are kvplan's)."""
    return perf(arch, _plan(), isl=1024, osl=1024, concurrency=8)


def _plan(*sets: str) -> PoolPlan:
    return load_plan(MODEL, DEPLOYMENT, ["tp=4", "kv_cache_dtype=fp8", *sets])


class _Perf:
    """Stands in for kvplan perf: returns one hand-built result and records what each call asked for."""

    def __init__(self, result: PerfResult) -> None:
        self.result, self.calls = result, list[dict[str, Any]]()

    def __call__(self, arch: ModelArch, plan: PoolPlan, **kw: Any) -> PerfResult:
        self.calls.append({"plan": plan, **kw})
        return self.result


@pytest.fixture
def priced(shape: PerfResult, monkeypatch: pytest.MonkeyPatch) -> _Perf:
    us = {"ttft": Band(100_000, 80_000, 120_000), "ttft_p90": Band(300_000, 250_000, 350_000),
          "tpot": Band(20_000, 16_000, 24_000), "tpot_p90": Band(45_000, 40_000, 50_000)}  # fmt: skip
    result = replace(shape, gpus=4, us=us, tokens_per_s_per_gpu={"output": Band(1_000, 800, 1_200),
                                                                 "total": Band(2_000, 1_600, 2_400)})  # fmt: skip
    fake = _Perf(result)
    monkeypatch.setattr(fit_sla, "perf", fake)
    return fake


def test_the_statistic_asked_is_the_one_checked(arch: ModelArch, priced: _Perf) -> None:
    # --at p90 reads TTFT / TPOT at the 90th percentile (ttft_p90, tpot_p90), the default the medians
    spec = {"isl": 1024, "osl": 1024, "concurrency": 8, "ttft_us": 200_000, "tpot_us": 30_000}
    median = check_sla(arch, _plan(), SlaSpec(**spec))
    assert [(t.name, t.got) for t in median.terms] == [("TTFT", Band(100_000, 80_000, 120_000)),
                                                        ("TPOT", Band(20_000, 16_000, 24_000))]  # fmt: skip
    assert median.ok_at_band_edge  # 120 ms ≤ 200 ms and 24 ms ≤ 30 ms at the high ends
    p90 = check_sla(arch, _plan(), SlaSpec(**spec, at="p90"))
    assert [(t.name, t.got) for t in p90.terms] == [("TTFT", Band(300_000, 250_000, 350_000)),
                                                     ("TPOT", Band(45_000, 40_000, 50_000))]  # fmt: skip
    assert not p90.ok  # 250 ms low end still above 200 ms: TTFT missed


def test_throughput_is_the_deployments_per_gpu_times_its_gpus(arch: ModelArch, priced: _Perf) -> None:
    # 1,000 (800 – 1,200) output tok/s a GPU on 4 GPUs: 4,000 (3,200 – 4,800) for the deployment
    c = check_sla(arch, _plan(), SlaSpec(isl=1024, osl=1024, concurrency=8, output_tokens_per_s=3_200))
    (t,) = c.terms
    assert (t.name, t.got, t.verdict) == ("throughput", Band(4_000, 3_200, 4_800), MET)


def test_the_acceptance_length_goes_only_to_candidates_that_draft(arch: ModelArch, priced: _Perf) -> None:
    # kvplan.perf.spec.acceptance: a deployment drafts when it verifies >= 2 tokens a step
    # (speculative_num_draft_tokens, SGLang's count with the verified token); 0 or 1 drafts nothing, and an
    # acceptance length given for those would be refused, so fit applies --acceptance-length only from 2
    for draft, given in ((0, None), (1, None), (2, 1.8), (3, 1.8)):
        spec = SlaSpec(isl=1024, osl=1024, concurrency=8, tpot_us=30_000, acceptance_length=1.8)
        check_sla(arch, _plan(f"speculative_num_draft_tokens={draft}"), spec)
        assert priced.calls[-1]["acceptance_length"] == given, draft


def test_candidates_price_apart_where_their_load_differs(arch: ModelArch, priced: _Perf) -> None:
    spec = SlaSpec(isl=1024, osl=1024, concurrency=8, tpot_us=30_000)
    # running caps 2 and 4 below the 8 clients: each runs a different batch, so each is priced
    check_sla(arch, _plan("max_running_requests=2"), spec)
    check_sla(arch, _plan("max_running_requests=4"), spec)
    assert len(priced.calls) == 2
    # caps 16 and 32 hold all 8 clients: the same closed loop, priced once (the module doc's cache)
    check_sla(arch, _plan("max_running_requests=16"), spec)
    check_sla(arch, _plan("max_running_requests=32"), spec)
    assert len(priced.calls) == 3
    # a different step budget (max_num_batched_tokens 4,096 and 16,384, both set) chunks prefill differently
    check_sla(arch, _plan("max_num_batched_tokens=4096"), spec)
    check_sla(arch, _plan("max_num_batched_tokens=16384"), spec)
    assert len(priced.calls) == 5


def test_a_candidate_perf_cannot_price_says_why(arch: ModelArch, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> PerfResult:
        raise ValueError("perf has no datasheet peaks for L40S (kvplan.perf.peaks: H100, H200, B200, B300)")

    monkeypatch.setattr(fit_sla, "perf", refuse)
    c = check_sla(arch, _plan(), SlaSpec(isl=1024, osl=1024, concurrency=8, tpot_us=30_000))
    assert (c.ok, c.terms, c.perf) == (False, (), None)
    assert c.lacks == (
        "SLA not priced: perf has no datasheet peaks for L40S (kvplan.perf.peaks: H100, H200, B200, B300)",
    )


# --------------------------------------------------------------------------- fresh seed 29480 (issue 26)


def _pool(plan: PoolPlan, tokens: int) -> PoolPlan:
    return replace(plan, usable_pages=tokens // plan.logical_page_tokens)


def test_a_pool_that_binds_is_priced_apart_from_one_that_holds_every_client(arch: ModelArch, priced: _Perf) -> None:
    # 8 clients of 1,024 + 1,024 tokens: 16,384 tokens held at once at most (kvplan.perf.engine admits each request
    # with its whole isl + osl). A pool of exactly 16,384 tokens (1,024 vLLM blocks of 16) holds every client, as
    # does one of 163,840: the same closed loop, priced once. One of 16,368 (1,023 blocks) makes a client wait:
    # priced apart
    spec = SlaSpec(isl=1024, osl=1024, concurrency=8, tpot_us=30_000)
    p = _plan()
    check_sla(arch, _pool(p, 16_384), spec)
    check_sla(arch, _pool(p, 163_840), spec)
    assert len(priced.calls) == 1
    check_sla(arch, _pool(p, 16_368), spec)
    assert len(priced.calls) == 2


def test_the_prefill_side_prices_one_token_requests_plus_the_hand_off(
    arch: ModelArch, priced: _Perf, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --pd, the prefill side: its requests end at their first token (SGLang's prefill server samples it and hands
    # the KV to the decode side, srt/disaggregation/prefill.py), so perf prices osl 1 with the clients thinking
    # the decode side's time between requests; TTFT is the prefill's plus the hand-off's, end for end
    asked: list[tuple[object, ...]] = []
    monkeypatch.setattr(fit_sla, "hand_off_band", lambda *a: asked.append(a[1:]) or Band(1_000, 500, 4_000))
    spec = SlaSpec(isl=1024, osl=1024, concurrency=8, ttft_us=200_000, tpot_us=30_000, side="prefill", think_s=2.5)
    c = check_sla(arch, _plan(), spec)
    assert (priced.calls[-1]["osl"], priced.calls[-1]["think_s"]) == (1, 2.5)
    # the median TTFT 100 (80 – 120) ms of the hand-built result plus 1 (0.5 – 4) ms; TPOT is the decode side's
    assert [(t.name, t.got) for t in c.terms] == [("TTFT", Band(101_000, 80_500, 124_000))]
    assert c.hand_off_us == Band(1_000, 500, 4_000)
    # the hand-off of one 1,024-token request at the default 400 Gb/s link, with the plan's step budget: vLLM 0.33's
    # max_num_batched_tokens default of 8,192 on an H200 (engine/arg_utils.py, OPENAI_API_SERVER, >= 70 GiB)
    assert asked == [(1024, "400Gbps", 8192)]


def test_the_hand_off_low_end_is_the_last_chunks_share_on_sglang() -> None:
    # Llama-3.1-70B (80 layers, 8 kv heads of 128: config.json), fp8 KV: 2 × 80 × 8 × 128 × 1 B = 163,840 B a token,
    # 40,960 on each of 4 TP ranks (2 heads each). At 400 Gb/s = 50,000,000,000 B/s, each rank over its own link:
    # 16,384 tokens: 671,088,640 B a rank, 13,421.77 µs -> 13,422; high, the 4 ranks' 2,684,354,560 B over one
    # link, 53,687.09 -> 53,688 µs; low, SGLang sends each chunk as it is prefilled (send_kv_chunk), so only the
    # last 4,096-token chunk's share is left: 13,422 × 4,096 // 16,384 = 3,355
    sets = ["tp=4", "kv_cache_dtype=fp8", "dp_attention=1", "ep=1", "speculative_num_draft_tokens=0"]
    sglang = load_plan(MODEL, "glm-5.3-8xh200-sglang", sets)
    b = fit_sla.hand_off_band(sglang, 16_384, "400Gbps", 4_096)
    assert (b.value, b.low, b.high) == (13_422, 3_355, 53_688)
    # 2,048 tokens inside one 4,096-token chunk: the whole request is its last chunk; 83,886,080 B a rank,
    # 1,677.72 -> 1,678 µs, low the same 1,678; high 335,544,320 B, 6,710.89 -> 6,711 µs
    b = fit_sla.hand_off_band(sglang, 2_048, "400Gbps", 4_096)
    assert (b.value, b.low, b.high) == (1_678, 1_678, 6_711)
    # vLLM (NixlConnector reads the blocks once the prefill finished): low = the estimate
    b = fit_sla.hand_off_band(_plan(), 16_384, "400Gbps", 4_096)
    assert (b.value, b.low, b.high) == (13_422, 13_422, 53_688)


def test_the_decode_side_prices_its_decodes_alone(arch: ModelArch, priced: _Perf) -> None:
    # --pd, the decode side: the prefill is done elsewhere (perf's phase "decode"); TTFT is the prefill side's
    # requirement, so only TPOT and throughput are checked here; one instance prices both phases (phase None)
    spec = {"isl": 1024, "osl": 1024, "concurrency": 8, "ttft_us": 1, "tpot_us": 30_000, "output_tokens_per_s": 1}
    c = check_sla(arch, _plan(), SlaSpec(**spec, side="decode"))  # type: ignore[arg-type]
    assert priced.calls[-1]["phase"] == "decode" and priced.calls[-1]["osl"] == 1024
    assert [t.name for t in c.terms] == ["TPOT", "throughput"]
    one = check_sla(arch, _plan("max_running_requests=7"), SlaSpec(**spec))  # type: ignore[arg-type]
    assert priced.calls[-1]["phase"] is None
    assert [t.name for t in one.terms] == ["TTFT", "TPOT", "throughput"]


def test_dp_attention_ranks_pool_together(arch: ModelArch, priced: _Perf) -> None:
    # SGLang dp_attention 2: the loop admits against both ranks' pools (kvplan.perf.predict: usable_tokens × dp).
    # 8,192 tokens a rank (SGLang pages of 1 token) × 2 = 16,384 = 8 clients × (1,024 + 1,024): every client held,
    # priced with a pool of 10 times that; 8,191 a rank (16,382) binds: priced apart
    sets = ["tp=4", "kv_cache_dtype=fp8", "dp_attention=2", "ep=1", "speculative_num_draft_tokens=0"]
    p = load_plan(MODEL, "glm-5.3-8xh200-sglang", sets)
    assert (p.logical_page_tokens, p.deployment.dp_attention) == (1, 2)
    spec = SlaSpec(isl=1024, osl=1024, concurrency=8, tpot_us=30_000)
    check_sla(arch, _pool(p, 8_192), spec)
    check_sla(arch, _pool(p, 81_920), spec)
    assert len(priced.calls) == 1
    check_sla(arch, _pool(p, 8_191), spec)
    assert len(priced.calls) == 2
