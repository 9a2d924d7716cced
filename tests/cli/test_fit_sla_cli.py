"""`kvplan fit --require-ttft / --require-tpot / --require-throughput`: the SLA section and JSON, the output without
an SLA left as it was, and bad values as one line, exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})
SMALL = ("--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8", "--mtp", "off")
LOAD = ("--isl", "1K", "--osl", "1K", "--concurrency", "8")


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


def test_without_an_sla_the_report_has_no_sla_key_or_section() -> None:
    r = run("fit", *SMALL, "--require-ctx", "1M", "--format", "json")
    assert r.exit_code == 0 and "sla" not in json.loads(r.stdout) and "sla" not in json.loads(r.stdout)["best"]
    assert "SLA" not in run("fit", *SMALL, "--require-ctx", "1M").output


def test_an_sla_is_priced_on_the_candidates_and_said_how() -> None:
    # no memory requirement given: the pool must hold the 8 clients of 1K + 1K at once (8 × 2,048)
    r = run("fit", *SMALL, *LOAD, "--require-tpot", "60ms", "--at", "p90", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["sla"] == {"isl": 1024, "osl": 1024, "concurrency": 8, "at": "p90", "ttft_us": None,
                        "tpot_us": 60_000, "output_tokens_per_s": None, "side": None, "range_ratio": 1.0}  # fmt: skip
    assert "8 × 2,048 at once" in d["requirements"]
    term = d["best"]["sla"]["terms"][0]
    assert term["name"] == "TPOT" and term["required"] == 60_000
    assert term["value_low"] <= term["value"] <= term["value_high"] and term["value"] <= 60_000
    assert d["best"]["sla"]["coefficients"]
    text = run("fit", *SMALL, *LOAD, "--require-tpot", "60ms").output
    assert "SLA: latency and throughput under the load (estimated)" in text and "priced by kvplan perf" in text


def test_an_sla_nothing_meets_exits_1_with_the_closest_and_its_shortfall() -> None:
    r = run("fit", *SMALL, *LOAD, "--require-tpot", "1ms", "--format", "json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert not d["fits"] and any("TPOT" in line and "missed" in line for line in d["closest_lacks"])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--require-ttft", "2", *LOAD), "--require-ttft '2': give a duration with its unit"),
        (("--require-ttft", "-1s", *LOAD), "--require-ttft '-1s'"),
        (("--require-tpot", "0ms", *LOAD), "--require-tpot must be positive"),
        (("--require-throughput", "fast", *LOAD), "--require-throughput 'fast': give a rate"),
        (("--require-tpot", "50ms", "--at", "p99", *LOAD), "--at 'p99': choose median or p90"),
        (("--require-tpot", "50ms", "--concurrency", "8"), "give --isl and --osl"),
        (("--require-tpot", "50ms", "--isl", "1K", "--osl", "1K"), "give --concurrency N"),
        (("--at", "p90", "--require-ctx", "1M"), "--at has no effect without --require-ttft"),
        (("--require-tpot", "50ms", *LOAD, "--pd", "--plot", "x.png"), "--pd writes no --emit-deploy"),
        (("--require-tpot", "50ms", *LOAD, "--acceptance-length", "0.5"), "--acceptance-length 0.5: a mean"),
        (("--acceptance-length", "2", "--require-ctx", "1M"), "--acceptance-length has no effect without"),
    ],
)
def test_bad_values_are_one_line_exit_2(args: tuple[str, ...], words: str) -> None:
    r = run("fit", *SMALL, *args)
    assert r.exit_code == 2, r.output
    assert words in r.output and "Traceback" not in r.output


def test_random_lengths_are_priced_as_perf_prices_them() -> None:
    # --range-ratio 0.8: each candidate priced by perf(range_ratio=0.8), lengths 1,024 drawn in [819, 1,024] priced
    # at their mean 922 (kvplan.perf.predict.mean_length) with no SGLang waves; the JSON says the ratio, the label too
    r = run("fit", *SMALL, *LOAD, "--require-tpot", "60ms", "--range-ratio", "0.8", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["sla"]["range_ratio"] == 0.8 and "(random lengths in [0.8 × L, L])" in d["requirements"]
    from kvplan.cli._common import load_plan
    from kvplan.perf.predict import perf

    best = d["best"]
    sets = [
        f"tp={best['tp']}",
        f"dp_attention={best['dp_attention']}",
        f"dcp={best['dcp']}",
        f"kv_cache_dtype={best['kv_cache_dtype']}",
        "speculative_num_draft_tokens=0",
    ]
    plan = load_plan("glm-5.3", "glm-5.3-8xh200-sglang", sets)
    want = perf(plan.arch, plan, isl=1024, osl=1024, concurrency=8, range_ratio=0.8)
    assert (want.isl, want.osl) == (922, 922)
    assert best["sla"]["terms"][0]["value"] == want.us["tpot"].value
    fixed = perf(plan.arch, plan, isl=1024, osl=1024, concurrency=8)
    assert fixed.us["tpot"].value != want.us["tpot"].value  # the ratio reached the pricing
    bad = run("fit", *SMALL, *LOAD, "--require-tpot", "60ms", "--range-ratio", "1.5")
    assert bad.exit_code == 2 and "--range-ratio 1.5: a share in [0, 1]" in bad.output
