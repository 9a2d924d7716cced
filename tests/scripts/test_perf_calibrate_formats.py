"""benchmarks/perf_calibrate.py's weight formats: a weight-only format (int4) priced at its own efficiencies where a
row's rows hold a native format too, as kvplan.perf.coeffs.Coefficients.for_quant prices it at run time."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest

from kvplan.perf.sched import Schedule
from kvplan.perf.step import Batch
from tests.scripts._load import ROOT, load

sys.path.insert(0, str(ROOT / "benchmarks"))  # perf_calibrate imports its sibling _silicon_rows
pc = load("kvplan_perf_calibrate", "benchmarks/perf_calibrate.py")

GB = 10**9


def _row(fmt: str, gemm_read_s: float, engine: str = "vllm") -> object:
    """One measured request of osl 2 whose only step (its decode) reads GEMM weights for ``gemm_read_s`` at full
    HBM bandwidth, with nothing else priced."""
    cols = (*pc.GEMM_PARTS, "attention")
    arrays = {f"{n}:{k}": np.zeros(1) for n in cols for k in "cpm"}
    arrays["expert GEMMs:m"] = np.asarray([gemm_read_s])
    for k in ("ar:link", "ar:calls", "pre:steps", "idx:calls", "ar:net", "ar:lat", "layers:calls"):
        arrays[k] = np.zeros(1)
    sched = Schedule(runs=(Batch(decode_requests=1, decode_context=1, sampled=1),), arrived=(-1,), first=(-1,),
                     finished=(0,), cap=1, peak_running=1, warmup=0, measured=0)  # fmt: skip
    return pc.Row(id="x", key=("blackwell", engine, "mla"), group="g", train=True, isl=1, osl=2, concurrency=1,
                  gpus=1, ttft_ms=1.0, tpot_ms=1.0, arrays=arrays, sched=sched,
                  deployment=f"tp1 dp1 ep1 {fmt}/{fmt}")  # fmt: skip


def test_a_weight_only_row_reads_at_its_own_memory_efficiency() -> None:
    # the request's first token is sampled at step -1 (before the loop), its last at step 0: TPOT is step 0's time
    # over osl - 1 = 1 token: no layers + max(0, 1 s of reads / mem_eff); the int4 row at int4:mem_eff, the fp4 row at
    # the row's own (Coefficients.for_quant swaps the same three efficiencies in)
    c = {**pc.START, **pc.FIXED, "request_us": 0.0, "int4:mem_eff": 0.4}
    assert pc.predict(_row("int4", 1.0), c)[1] == pytest.approx(1e3 / 0.4)
    assert pc.predict(_row("fp4", 1.0), c)[1] == pytest.approx(1e3 / pc.START["mem_eff"])


def test_a_weight_only_format_is_fitted_apart_only_beside_a_native_one() -> None:
    both = pc.start_of([_row("fp4", 0.01), _row("int4", 0.01)])
    assert {k for k in both if ":" in k} == {"int4:gemm_eff", "int4:prefill_eff", "int4:mem_eff"}
    assert all(both[f"int4:{k}"] == pc.START[k] for k in pc.FORMAT_KEYS)  # started where the row's own start
    # int4 alone (Kimi-K2.5 on H200 vLLM) is the row's own format; fp4 and fp8 together share the row's
    assert not [k for k in pc.start_of([_row("int4", 0.01)]) if ":" in k]
    assert not [k for k in pc.start_of([_row("fp4", 0.01), _row("fp8", 0.01)]) if ":" in k]


def test_only_vllm_rows_fit_a_latency_per_request_in_flight() -> None:
    # coeffs.Coefficients.client_us: vLLM's API server streams every request in one event loop; SGLang's detokenizer
    # is a process of its own, its rows fit none (and no row here keeps waves: no wave_share either)
    assert pc.start_of([_row("fp4", 0.01)])["client_us"] == 200.0
    assert "client_us" not in pc.start_of([_row("fp4", 0.01, engine="sglang")])


def test_a_requests_times_from_every_term_of_its_steps() -> None:
    # four steps, each with its own terms at the START / FIXED coefficients (gemm 0.6, prefill 0.6, attention 0.4,
    # mem 0.7, link 0.7, comm 8 µs a call, 40 µs a layer, indexer 20 µs a call); one request sent after
    # step 0, its first token at step 1, its last at step 3 (osl 3: two tokens after the first), 2 clients
    r = _row("fp4", 0.0)
    a = r.arrays
    for k in a:
        a[k] = np.zeros(4)
    a["dense GEMMs:m"][0] = 0.35  # 0.35 / mem 0.7 = 0.5 s
    a["expert GEMMs:c"][1], a["ar:link"][1], a["ar:calls"][1] = 0.3, 0.35, 1000  # 0.5 + 0.5 + 8 ms
    a["attention:p"][2], a["idx:calls"][2], a["ar:net"][2], a["ar:lat"][2] = 0.2, 100, 0.35, 0.25  # 1.252 s
    a["attention GEMMs:m"][2] = 0.7  # the attention projections priced apart (bf16 beside NVFP4): / mem 0.7 = 1 s
    a["dense GEMMs:p"][3], a["pre:steps"][3] = 0.3, 1  # / prefill 0.6 = 0.5 s, + prefill_us 300 µs
    a["layers:calls"][:] = (61, 61, 61, 78)  # 40 µs a layer: 2.44 ms a step of 61 layers, 3.12 ms of 78
    r.sched = Schedule(runs=(Batch(decode_requests=1, decode_context=1, sampled=1),) * 4, arrived=(0,), first=(1,),
                       finished=(3,), cap=1, peak_running=1, warmup=0, measured=0)  # fmt: skip
    r.osl, r.concurrency, r.gpus = 3, 2, 2
    c = {**pc.START, **pc.FIXED, "request_us": 1000.0, "client_us": 500.0, "prefill_us": 300.0}
    t = [0.5, 1.008, 2.252, 0.5003]
    t = [x + 40e-6 * n for x, n in zip(t, (61, 61, 61, 78), strict=True)]
    outside = (1000 + 500 * 2) * 1e-6  # request_us + client_us a client in flight
    ttft, tpot, tput = pc.predict(r, c)
    assert ttft == pytest.approx((t[1] + outside) * 1e3)  # sent at step 0's end, first token at step 1's
    assert tpot == pytest.approx((t[2] + t[3]) / 2 * 1e3)  # steps 2 and 3 over osl - 1 = 2 tokens
    assert tput == pytest.approx(2 * 3 / (t[1] + t[2] + t[3] + outside) / 2)  # clients × osl / e2e / GPUs
    # one output token: no time per output token (max(osl - 1, 1) keeps the division defined)
    r.osl, r.sched = 1, replace(r.sched, finished=(1,))
    assert pc.predict(r, c)[1] == 0.0


def test_the_band_check_counts_each_figure_inside_the_printed_band(capsys: pytest.CaptureFixture[str]) -> None:
    # one request read in 1 s / mem 0.7 a step: TPOT 1,428.6 ms, TTFT 0 (sent and answered before step 0, nothing
    # outside the steps), 1 client × 2 tokens / 1.4286 s = 1.4 tok/s; measured TTFT 1 ms, TPOT 1,400 ms, so 2 tokens /
    # (1 + 1,400 ms) = 1.4276 tok/s. A row MAPE of 10 % prints a band × / ÷ 1.15: TPOT and tok/s inside, TTFT not;
    # of 1 %, × / ÷ 1.015: TPOT 2.0 % and tok/s 2.0 % off, both outside
    r = _row("fp4", 1.0)
    r.ttft_ms, r.tpot_ms = 1.0, 1400.0
    c = {**pc.START, **pc.FIXED, "request_us": 0.0}
    checks = [("g", [r], c, "later")]
    pc._inside_band(checks, {r.key: [(1, [0.1, 0.1, 0.1])]})
    pc._inside_band(checks, {r.key: [(1, [0.01, 0.01, 0.01])]})
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "# blackwell/vllm/mla: 0 of 1, 1 of 1, 1 of 1"
    assert out[3] == "# blackwell/vllm/mla: 0 of 1, 0 of 1, 0 of 1"


def test_a_rows_held_out_mape_weights_its_groups_by_their_rows(capsys: pytest.CaptureFixture[str]) -> None:
    # two groups of 16 and 56 rows (coeffs.heldout_mape): TTFT (16 × 0.182 + 56 × 0.519) / 72 = 0.4441, TPOT
    # (16 × 0.094 + 56 × 0.334) / 72 = 0.2807, tok/s (16 × 0.090 + 56 × 0.209) / 72 = 0.1826
    pc._per_row({("blackwell", "sglang", "mla"): [(16, [0.182, 0.094, 0.090]), (56, [0.519, 0.334, 0.209])]})
    assert capsys.readouterr().out == "# blackwell/sglang/mla: 0.444, 0.281, 0.183\n"


def test_the_fit_runs_to_its_minimum() -> None:
    # three requests reading 1, 2 and 2 s of weights a step at full HBM bandwidth, measured at 2,000, 4,000 and
    # 4,400 ms a token: a TPOT of reads / mem_eff (no layers here) prices the first two exactly at mem_eff 0.5, and
    # not the third, so the loss has a minimum above 0, mem_eff about 0.5 (it starts at 0.7). Fitted, no step of the
    # fine factors on any one coefficient lowers it by CONVERGED or more (six rounds of the coarse factors alone, the
    # fit before, stopped where a fine step still lowered it), and a coefficient nothing here prices (the DSA
    # indexer's, the layers') is left where it started
    rows = [_row("fp4", 1.0), _row("fp4", 2.0), _row("fp4", 2.0)]
    for r, tpot in zip(rows, (2000.0, 4000.0, 4400.0), strict=True):
        r.tpot_ms = tpot
    c = pc.fit(rows)
    best = pc.loss(rows, c)
    assert best > 0.02
    assert 0.45 < c["mem_eff"] < 0.55 and c["indexer_us"] == pc.START["indexer_us"]
    assert c["layer_us"] == pc.START["layer_us"]
    for k in pc.start_of(rows):
        for f in pc.STEPS[-1]:
            trial = {**c, k: min(c[k] * f, 1.0) if k.endswith(("_eff", "_share")) else c[k] * f}
            assert pc.loss(rows, trial) >= best * (1 - pc.CONVERGED), (k, f)


def test_the_fit_keeps_the_lowest_training_loss_of_its_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # one request reading 1 s of weights a step at full HBM bandwidth over 61 layers, measured at 2,000 ms a token:
    # mem_eff and layer_us trade against each other (1 / mem_eff + 61 × layer_us = 2 s), so where the descent stops
    # depends on its start. The fit descends from START and from each of RESTARTS and returns the lowest loss: here
    # the restart (layer_us 1 µs) ends lower, and its coefficients are the fit's; with the restart dropped, START's
    r = _row("fp4", 1.0)
    r.arrays["layers:calls"] = np.asarray([61.0])
    r.tpot_ms = 2000.0
    rows = [r]
    first, restart = (pc.descend(rows, {**pc.start_of(rows), **over}) for over in ({}, *pc.RESTARTS))
    assert restart[0] < first[0]
    assert pc.fit(rows) == restart[1]
    monkeypatch.setattr(pc, "RESTARTS", ())
    assert pc.fit(rows) == first[1]
