"""benchmarks/perf_calibrate.py's weight formats: a weight-only format (int4) priced at its own efficiencies where a
row's rows hold a native format too, as kvplan.perf.coeffs.Coefficients.for_quant prices it at run time."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from kvplan.perf.sched import Schedule
from kvplan.perf.step import Batch
from tests.scripts._load import ROOT, load

sys.path.insert(0, str(ROOT / "benchmarks"))  # perf_calibrate imports its sibling _silicon_rows
pc = load("kvplan_perf_calibrate", "benchmarks/perf_calibrate.py")

GB = 10**9


def _row(fmt: str, gemm_read_s: float) -> object:
    """One measured request of osl 2 whose only step (its decode) reads GEMM weights for ``gemm_read_s`` at full
    HBM bandwidth, with nothing else priced."""
    cols = ("dense GEMMs", "expert GEMMs", "attention")
    arrays = {f"{n}:{k}": np.zeros(1) for n in cols for k in "cpm"}
    arrays["expert GEMMs:m"] = np.asarray([gemm_read_s])
    for k in ("ar:link", "ar:calls", "pre:steps", "idx:calls", "ar:net", "ar:lat"):
        arrays[k] = np.zeros(1)
    sched = Schedule(runs=(Batch(decode_requests=1, decode_context=1, sampled=1),), arrived=(-1,), first=(-1,),
                     finished=(0,), cap=1, peak_running=1, warmup=0, measured=0)  # fmt: skip
    return pc.Row(id="x", key=("blackwell", "vllm", "mla"), group="g", train=True, isl=1, osl=2, concurrency=1,
                  gpus=1, ttft_ms=1.0, tpot_ms=1.0, arrays=arrays, sched=sched,
                  deployment=f"tp1 dp1 ep1 {fmt}/{fmt}")  # fmt: skip


def test_a_weight_only_row_reads_at_its_own_memory_efficiency() -> None:
    # the request's first token is sampled at step -1 (before the loop), its last at step 0: TPOT is step 0's time
    # over osl - 1 = 1 token: overhead + max(0, 1 s of reads / mem_eff); the int4 row at int4:mem_eff, the fp4 row at
    # the row's own (Coefficients.for_quant swaps the same three efficiencies in)
    c = {**pc.START, **pc.FIXED, "overhead_us": 0.0, "request_us": 0.0, "int4:mem_eff": 0.4}
    assert pc.predict(_row("int4", 1.0), c)[1] == pytest.approx(1e3 / 0.4)
    assert pc.predict(_row("fp4", 1.0), c)[1] == pytest.approx(1e3 / pc.START["mem_eff"])


def test_a_weight_only_format_is_fitted_apart_only_beside_a_native_one() -> None:
    both = pc.start_of([_row("fp4", 0.01), _row("int4", 0.01)])
    assert {k for k in both if ":" in k} == {"int4:gemm_eff", "int4:prefill_eff", "int4:mem_eff"}
    assert all(both[f"int4:{k}"] == pc.START[k] for k in pc.FORMAT_KEYS)  # started where the row's own start
    # int4 alone (Kimi-K2.5 on H200 vLLM) is the row's own format; fp4 and fp8 together share the row's
    assert not [k for k in pc.start_of([_row("int4", 0.01)]) if ":" in k]
    assert not [k for k in pc.start_of([_row("fp4", 0.01), _row("fp8", 0.01)]) if ":" in k]
