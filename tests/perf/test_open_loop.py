"""kvplan.perf.open_loop (perf --rate R/s): seeded Poisson arrivals, each step priced as it is scheduled."""

from __future__ import annotations

import itertools
import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.perf.open_loop import open_loop, open_timings, poisson_times

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})


def test_arrivals_are_seeded_poisson() -> None:
    # the same seed gives the same arrivals; exponential gaps of mean 1 / rate (10,000 draws at 4/s: 0.25 s ± 3 %)
    assert poisson_times(4.0, 100) == poisson_times(4.0, 100)
    t = poisson_times(4.0, 10_000)
    assert abs(t[-1] / 10_000 - 0.25) < 0.25 * 0.03
    assert all(b > a for a, b in itertools.pairwise(t))


def test_requests_far_apart_are_served_alone() -> None:
    # 0.01 requests a second, every step 0.1 s: each request finds the engine idle, is prefilled in one step (TTFT
    # 0.1 s, vLLM V1's Scheduler.schedule) and decodes its 3 more tokens alone (TPOT 0.1 s)
    s = open_loop(engine="vllm", isl=10, osl=4, rate_per_s=0.01, num_prompts=5, cap=4, budget=100,
                  price=lambda b: 0.1)  # fmt: skip
    t = open_timings(s, 4)
    assert all(abs(x - 0.1) < 1e-9 for x in t.ttft) and all(abs(x - 0.1) < 1e-9 for x in t.tpot)
    assert s.peak_running == 1 and len(s.steps) == 5 * 4


def test_perf_rate_end_to_end_and_bad_input() -> None:
    args = ["perf", "-d", "glm-5.3-8xh200-vllm", "--isl", "1K", "--osl", "64"]
    r = runner.invoke(app, [*args, "--rate", "2/s", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["rate_per_s"] == 2.0 and d["concurrency"] == 0 and d["num_prompts"] == 256
    assert d["assumptions"][0].startswith("open loop: 256 requests") and "seed 0" in d["assumptions"][0]
    for bad, words in ((["--rate", "2/s", "--concurrency", "4"], "give --concurrency N"), ([], "give --concurrency N"),
                       (["--rate", "fast"], "--rate 'fast': give requests a second")):  # fmt: skip
        r = runner.invoke(app, [*args, *bad])
        assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, r.output
