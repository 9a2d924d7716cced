"""benchmarks/perf_published.py reads each published point's figures from its evidence file as printed: the values
below are the lines of benchmarks/published/*.txt (copied verbatim from their sources) that each point names."""

from __future__ import annotations

import math

import pytest

from tests.scripts._load import load

pp = load("kvplan_perf_published", "benchmarks/perf_published.py")


def by_id() -> dict[str, object]:
    return {p.id: p for p in pp.load_points()}


def test_a_bench_serving_block_gives_the_figures_the_load_and_the_seen_lengths() -> None:
    points = by_id()
    # sgl-cookbook-deepseek-r1-b200.txt line 78 (DeepSeek-R1.md §5.1.4, 1K/1K at --max-concurrency 1): "Successful
    # requests: 10", "Total input tokens: 6101", "Total generated tokens: 4210", "Median TTFT (ms): 140.76",
    # "Median TPOT (ms): 9.15", "Output token throughput (tok/s): 105.24" (the whole deployment's)
    a1 = points["A1"]
    assert (a1.ttft_ms, a1.tpot_ms, a1.out_tok_s, a1.per_gpu) == (140.76, 9.15, 105.24, False)
    assert (a1.concurrency, a1.prompts, a1.seen) == (1, 10, "610/421")  # 6101 / 10, 4210 / 10
    # the bench command's nominal lengths and bench_serving's default range ratio 0 (points.csv)
    assert (a1.isl, a1.osl, a1.range_ratio, a1.stat) == (1000, 1000, 0.0, "median")
    # gpustack-deepseek-v3.2-h200.txt line 1130 (SGLang DP8, 1K in / 2K out, 100 prompts): no "Max request
    # concurrency" line, every request sent at once; totals 100000 / 100 and 200000 / 100, "Median TTFT (ms):
    # 2216.52", "Median TPOT (ms): 39.40", "Output token throughput (tok/s): 2469.32"
    d7 = points["D7"]
    assert (d7.concurrency, d7.prompts, d7.isl, d7.osl, d7.range_ratio) == (0, 100, 1000, 2000, 1.0)
    assert (d7.ttft_ms, d7.tpot_ms, d7.out_tok_s) == (2216.52, 39.40, 2469.32)


def test_a_published_table_gives_one_column_of_means_per_gpu() -> None:
    # inferencex-870-dsr1-h200.txt line 13, column conc=64: "Mean TTFT (ms) | ... 423.1", "Mean TPOT (ms) | ...
    # 34.6", "**Output tput/GPU (tok/s)** | ... 223.6"; its 1024 / 1024 at range ratio 0.8 and 64 clients
    # (points.csv, from the InferenceX script), 10 prompts a client (--num-prompts CONC*10)
    b7 = by_id()["B7"]
    assert (b7.ttft_ms, b7.tpot_ms, b7.out_tok_s, b7.per_gpu, b7.stat) == (423.1, 34.6, 223.6, True, "mean")
    assert (b7.concurrency, b7.prompts, b7.isl, b7.osl, b7.range_ratio) == (64, 640, 1024, 1024, 0.8)


def test_the_evidence_is_checked_where_a_point_names_it() -> None:
    lines = ["python -m sglang.bench_serving \\", "  --random-input-len 1000 \\", "  --random-output-len 8000 \\", "",
             "============ Serving Benchmark Result ============", "Successful requests:  10", "Median TTFT (ms): 1.5",
             "==================================================", "Median TPOT (ms): 99"]  # fmt: skip
    pp._check_command(lines, 5, ("1000", "8000"), "here")  # the command above names the same lengths
    with pytest.raises(SystemExit, match=r"its command says --random-output-len 8000, points\.csv 1000"):
        pp._check_command(lines, 5, ("1000", "1000"), "here")
    assert pp._block(lines, 5, "here") == {"Successful requests": "10", "Median TTFT (ms)": "1.5"}  # to the rule
    with pytest.raises(SystemExit, match="line 4 is not a result block's title"):
        pp._block(lines, 4, "here")
    table = ["| Metric | conc=8 |", "|---|---:|", "| **Output tput/GPU (tok/s)** | 74.6 |",
             "| Mean TTFT (ms) | 330.6 |"]  # fmt: skip
    assert pp._table(table, 1, "conc=8", "here") == {"Output tput/GPU (tok/s)": "74.6", "Mean TTFT (ms)": "330.6"}
    with pytest.raises(SystemExit, match="no column 'conc=16'"):
        pp._table(table, 1, "conc=16", "here")


def test_every_point_priced_and_the_borrowed_floors_are_its_largest_misses() -> None:
    # WORST_BORROWED is read off these points (kvplan/perf/coeffs.py): each kind's largest miss either way, rounded
    # up to 0.01; a change to the model or the evidence that moves them shows here first
    from kvplan.perf.coeffs import WORST_BORROWED, WORST_SPECULATIVE

    priced = [pp.price(p) for p in pp.load_points()]
    assert len(priced) == 36
    for kind in ("engine version", "weight format", "speculative"):
        got = []
        for i in range(3):
            miss = max(max(x.predicted[i] / x.measured[i], x.measured[i] / x.predicted[i])
                       for x in priced if x.kind == kind)  # fmt: skip
            got.append(math.ceil(miss * 100) / 100)
        if kind == "weight format":  # its TTFT the larger miss of a calibration group (coeffs.WORST_BORROWED)
            assert got[0] == 7.61 and WORST_BORROWED[kind][0] == 14.99
            got[0] = 14.99
        assert tuple(got) == (WORST_SPECULATIVE if kind == "speculative" else WORST_BORROWED[kind]), kind
    # an engine or GPU class no row was fitted for, never measured borrowed, takes the largest of every kind
    others = [v for k, v in WORST_BORROWED.items() if k != "other"]
    assert WORST_BORROWED["other"] == tuple(max(v[i] for v in others) for i in range(3))
    # so every borrowed point lies inside its band (not an independent check: the floors come from them); the
    # cookbook's DeepSeek-R1 on B200 SGLang 0.5.6.post1, priced by its own row, is: 22 of its 27 figures inside
    assert all(all(x.inside) for x in priced if x.kind != "own row")
    own = [x for x in priced if x.kind == "own row"]
    assert {x.point.source for x in own} == {"sgl-cookbook-deepseek-r1-b200.txt"}
    assert sum(sum(x.inside) for x in own) == 22
