"""The pool's band (kvplan.engines.band, issue 28 items 1-3): each term read, taken or estimated; an estimate's
band from its corpus error, propagated through the engine's own formula; a verdict that flips inside it says so."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._common import load_plan
from kvplan.engines.band import ERRORS, gpu_class, pool_band
from kvplan.models.gpus import find_gpu
from kvplan.plan.admit import Request, admit
from kvplan.plan.band_verdict import judge

runner = CliRunner(env={"KVPLAN_FORMAT": None})

# The glm-5.3-8xh200-sglang preset (SGLang 0.5.23, H200, weights a measured point, vLLM recipes PR #893): the one
# estimate is the pre-load free memory, the CUDA total less the assumed 1 GiB CUDA context + NCCL:
# 150,109,945,856 − 1,073,741,824 = 149,036,204,032 B. Its error on the corpus, SGLang on Hopper/Blackwell, is
# the Qwen3-235B-A22B-FP8 4×H100 row (vllm#21348): the log's pool 367,404 needs a pre-load free 1.554 % below
# the modelled one (ERRORS, 15,540 ppm), so delta = 149,036,204,032 × 15,540 // 10^6 = 2,316,022,610 B.
# SGLang (model_runner.py profile_max_num_token): available = free_after_weights − pre_load_free × (1 − mfs),
# here pre_load_free × 0.886 − 101,425,652,695 (in GiB floats), rows = available // 53,940 // 64 × 64:
#   146,720,181,422 B -> 28,568,428,044 B -> 529,600 tokens; 151,352,226,642 B -> 32,672,420,109 B -> 605,696.
SGLANG_LOW, SGLANG_POINT, SGLANG_HIGH = 529_600, 567_616, 605_696


def test_sglang_preset_band_is_the_formula_at_the_pre_load_free_ends() -> None:
    p = load_plan(None, None, [])
    assert ERRORS[("sglang", "*", "hopper-blackwell")].ppm == 15_540
    b = pool_band(p)
    assert (b.low, b.point, b.high) == (SGLANG_LOW, SGLANG_POINT, SGLANG_HIGH)
    sources = {t.knob: t.source for t in b.terms}
    # the weights: a measured point; the reserve: SGLang's heuristic (mem_fraction_static 0.886), read
    assert sources == {"weights_per_gpu": "taken", "pre_load_free": "estimate", "slack (non-KV reserve)": "read"}


def test_every_figure_given_makes_the_band_the_point() -> None:
    # weights and pre-load free memory set by the user: nothing estimated, low == high == logged_tokens
    p = load_plan(None, None, ["weights_per_gpu=101425652695B", "pre_load_free=149036204032B"])
    b = pool_band(p)
    assert b.exact and b.low == b.high == p.logged_tokens == SGLANG_POINT
    assert {t.knob: t.source for t in b.terms} == {
        "weights_per_gpu": "taken",
        "pre_load_free": "taken",
        "slack (non-KV reserve)": "read",
    }


def test_json_carries_pool_band_as_raw_integers() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "1M", "--format", "json"])
    band = json.loads(r.stdout)["plan"]["pool_band"]
    assert (band["low"], band["high"]) == (SGLANG_LOW, SGLANG_HIGH)
    pre = next(t for t in band["basis"] if t["term"] == "pre_load_free")
    assert pre == {**pre, "source": "estimate", "bytes": 149_036_204_032, "error_ppm": 15_540}


def _verdict(*args: str) -> str:
    """The verdict line (wrapped at 80 columns) without the title above it."""
    r = runner.invoke(app, ["admit", *args])
    head = r.stdout.split("\n\n", 1)[0]
    at = min(i for i in (head.find("ADMITTED"), head.find("REJECTED")) if i >= 0)
    return " ".join(head[at:].split())


def test_a_verdict_that_flips_inside_the_band_says_so() -> None:
    # 550K = 563,200 tokens: the point pool 567,616 holds it, the low end 529,600 does not
    text = _verdict("--ctx", "550K")
    assert text.startswith("ADMITTED at the point estimate; rejected at the low end of the band: 1 × 563,200-token")
    assert "the pool holds ≈ 567,616 tokens (band 529,600 – 605,696: pre-load free estimated ±1.6 %)" in text
    # 590K = 604,160 tokens: over the point, under the high end 605,696
    text = _verdict("--ctx", "590K")
    assert text.startswith("REJECTED at the point estimate; admitted at the high end of the band: 604,160 tokens")


def test_a_verdict_that_holds_over_the_band_does_not_flip() -> None:
    # 300K = 307,200 tokens: under the low end 529,600 (the workspace binds first)
    text = _verdict("--ctx", "300K")
    assert text.startswith("ADMITTED: 1 × 307,200-token request(s) fit; the pool holds ≈ 567,616 tokens (band")
    p = load_plan(None, None, [])
    bv = judge(admit(p, Request(ctx_tokens=307_200), remedies=False))
    assert (bv.point, bv.low, bv.high, bv.words()) == (True, True, True, "")


def test_an_exact_plan_prints_as_before() -> None:
    text = _verdict("--ctx", "1M", "--set", "pre_load_free=149036204032B")
    assert text == "REJECTED: 1,048,576 tokens needed, the pool holds 567,616"


def test_vllm_non_kv_band() -> None:
    # glm-5.3-8xh200-vllm (vLLM 0.33.0): non_kv_other 6,364,856,320 B modelled. No corpus case of vLLM 0.21+ on
    # Hopper/Blackwell; the 0.21+ range has three sources (vLLM 0.26.0 on an A40; vLLM 0.24.0 on an RTX 4090 and an
    # RTX 5090, kthxo/distserving; vLLM 0.24.0 on 4 × L40S, aws-samples), so band.fitted takes
    # ERRORS[("vllm-v1", "0.21+", "*")] = 815,178 ppm (the RTX 4090 log, −81.5 %: 4 cases, 3 sources; 540,432 ppm,
    # the A40, before kthxo/distserving) -> delta
    # 6,364,856,320 × 815,178 // 10^6 = 5,188,490,845 B. vLLM (gpu_worker.determine_available_memory): available =
    # requested − weights − non_kv = 28,959,817,153 ∓ delta; num_blocks = available // 3,452,160 (64 × 53,940 B),
    # × 64 tokens: the low end 23,771,326,308 // 3,452,160 = 6,885 -> 440,640; the high end 34,148,307,998 //
    # 3,452,160 = 9,891 -> 633,024 (the point: 8,388 -> 536,832)
    p = load_plan(None, "glm-5.3-8xh200-vllm", [])
    assert ("vllm-v1", "0.21+", "hopper-blackwell") not in ERRORS and ERRORS[("vllm-v1", "0.21+", "*")].sources == 3
    assert ERRORS[("vllm-v1", "0.21+", "*")].ppm == 815_178
    b = pool_band(p)
    assert (b.low, b.point, b.high) == (440_640, 536_832, 633_024)


def test_gpu_classes() -> None:
    assert [gpu_class(find_gpu(k)) for k in ("h100-sxm", "a40", "rtx-3090", "rtx-pro-6000", "mi355x", "l4")] == [
        "hopper-blackwell",
        "ampere-ada",
        "consumer",
        "consumer",
        "amd",
        "ampere-ada",
    ]


def _workspace_verdict(*args: str) -> str:
    r = runner.invoke(app, ["workspace", *args])
    head = r.stdout.split("\n\n", 1)[0]
    at = min(i for i in (head.find("FITS"), head.find("DOES NOT FIT")) if i >= 0)
    return " ".join(head[at:].split())


def test_a_workspace_verdict_that_flips_inside_the_band_says_so() -> None:
    # SGLang's room for the workspaces is the slack, pre_load_free × (1 − mem_fraction_static): at mfs 0.903,
    # 149,036,204,032 × 0.097 = 13.46 GiB at the point, 146,720,181,422 × 0.097 = 13.25 GiB at the low end of the
    # pre-load free band (±2,316,022,610 B, above); the workspaces (13.28 GiB) do not depend on it
    text = _workspace_verdict("--set", "mem_fraction_static=0.903")
    assert text.startswith(
        "FITS at the point estimate; DOES NOT FIT at the low end of the band: 13.28 GiB of workspaces in 13.46 GiB"
    )
    # the preset's own 0.886: 15.82 GiB of room, 2.07 GiB left, more than the band moves it (±0.25 GiB)
    assert _workspace_verdict().startswith("FITS: 13.75 GiB of workspaces in 15.82 GiB, 2.07 GiB left")


def test_admit_json_carries_the_verdict_at_the_band_ends() -> None:
    # 563,200 tokens (550K): admitted by the point pool 567,616 and the high end 605,696, not the low end 529,600
    r = runner.invoke(app, ["admit", "--ctx", "550K", "--format", "json"])
    d = json.loads(r.stdout)
    assert d["admitted"] is True and d["band_verdict"] == {"low": False, "point": True, "high": True}
