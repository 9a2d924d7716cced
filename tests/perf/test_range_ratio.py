"""`kvplan perf --range-ratio R`: lengths drawn uniformly from [R × L, L] as SGLang's bench_serving draws them, priced
at their means and without SGLang's waves (kvplan.perf.predict.mean_length, perf)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._common import load_plan
from kvplan.perf.predict import mean_length, perf
from kvplan.perf.trace_loop import Arrival, TraceLoad

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "mooncake_conversation_40.jsonl"


def test_mean_length_is_bench_servings_uniform_draws_mean() -> None:
    # sglang/bench_serving.py sample_random_requests: np.random.randint(max(int(input_len * range_ratio), 1),
    # input_len + 1): uniform over [lo, L], mean (lo + L) / 2, rounded half up here
    assert mean_length(1000, 0.0) == 501  # lo = max(0, 1) = 1: (1 + 1000) / 2 = 500.5 → 501
    assert mean_length(1024, 0.8) == 922  # lo = int(819.2) = 819: (819 + 1024) / 2 = 921.5 → 922
    assert mean_length(8000, 0.5) == 6000  # lo = 4000: (4000 + 8000) / 2
    assert mean_length(8000, 1.0) == 8000  # fixed: lo = L
    assert mean_length(1, 0.0) == 1  # lo = 1 = L


def test_random_lengths_price_the_means_without_sglangs_waves() -> None:
    # GLM-5.3 on 8 × H200 SGLang (the built-in deployment): hopper / sglang / mla is a row with a wave share, so a
    # closed loop of fixed lengths blends its waves (the share in the load line); lengths in [819, 1024] price the
    # means 922 + 922 with every client spread: the same as fixed lengths of 922 with the share at 0, which is
    # what the load line says
    plan = load_plan(None, "glm-5.3-8xh200-sglang", [])
    spread = perf(plan.arch, plan, isl=1024, osl=1024, concurrency=32, range_ratio=0.8)
    fixed = perf(plan.arch, plan, isl=922, osl=922, concurrency=32)
    assert (spread.isl, spread.osl, spread.range_ratio) == (922, 922, 0.8)
    assert fixed.coefficients.wave_share > 0 and "in waves" in fixed.assumptions[0]
    assert "in waves" not in spread.assumptions[0] and "spread over a request's service" in spread.assumptions[0]
    assert spread.us["ttft"].value < fixed.us["ttft"].value  # waves queue a whole wave's prefill before its TTFT
    assert "lengths uniform in [819, 1,024] + [819, 1,024]" in spread.assumptions[1]
    assert "priced at their means 922 + 922" in spread.assumptions[1] and "no SGLang waves" in spread.assumptions[1]
    assert fixed.assumptions[1].startswith("lengths fixed")


def test_vllm_has_no_waves_so_only_the_lengths_change() -> None:
    # vLLM never keeps waves (sched.WAVES): a ratio only moves the priced lengths to their means
    plan = load_plan(None, "glm-5.3-8xh200-vllm", [])
    spread = perf(plan.arch, plan, isl=1000, osl=1000, concurrency=8, range_ratio=0.0)
    fixed = perf(plan.arch, plan, isl=501, osl=501, concurrency=8)
    assert spread.us == fixed.us and spread.tokens_per_s_per_gpu == fixed.tokens_per_s_per_gpu
    # bench_serving's lowest input is 1 token at ratio 0 (max(int(0 × 1000), 1)), its outputs' counted as 1
    assert "lengths uniform in [1, 1,000] + [1, 1,000]" in spread.assumptions[1]


def test_a_ratio_outside_zero_to_one_or_with_a_trace_is_refused() -> None:
    plan = load_plan(None, "glm-5.3-8xh200-vllm", [])
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"--range-ratio is a share in \[0, 1\]"):
            perf(plan.arch, plan, isl=1000, osl=1000, concurrency=8, range_ratio=bad)
    one = TraceLoad(arrivals=(Arrival(0, 100, 10, "t:1"),), source="one request")
    with pytest.raises(ValueError, match="not for a trace"):
        perf(plan.arch, plan, isl=100, osl=10, trace=one, range_ratio=0.5)
    assert perf(plan.arch, plan, isl=100, osl=10, trace=one).range_ratio == 1.0


def test_cli_range_ratio_in_the_title_and_json() -> None:
    runner = CliRunner()
    args = ["perf", "-d", "glm-5.3-8xh200-vllm", "--isl", "1000", "--osl", "1000", "--concurrency", "4"]
    got = runner.invoke(app, [*args, "--range-ratio", "0", "--format", "json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert (data["isl"], data["osl"], data["range_ratio"]) == (501, 501, 0.0)
    table = runner.invoke(app, [*args, "--range-ratio", "0"], env={"COLUMNS": "200"})
    assert "isl 501, osl 501 (means, lengths from 0 × nominal), concurrency 4" in table.output
    bad = runner.invoke(app, [*args, "--range-ratio", "2"])
    assert bad.exit_code == 2 and "--range-ratio is a share in [0, 1]" in bad.output
    got = runner.invoke(app, ["perf", "-d", "glm-5.3-8xh200-vllm", "--trace", str(TRACE), "--range-ratio", "0.5"])
    assert got.exit_code == 2 and "a trace has its own lengths" in got.output
