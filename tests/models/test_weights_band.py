"""Verdicts that rest on an estimated weight say so on their headline (issue 23 item 4), with the band of the path
the estimate took (kvplan.models.weights_band), each band the largest miss of that path on published load lines."""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.vllm_dsv4_memory import v4_load_buffers
from kvplan.models import weights_band as wb
from kvplan.models.arch import Split
from kvplan.models.deploy import Requirements
from kvplan.models.from_hf import load_model
from kvplan.plan.gate import check
from kvplan.render.gate_report import gate_report
from tests.conftest import make_plan

sys.path.insert(0, str(Path(__file__).parent))
from test_weights_published import DATA, MXFP4_ROWS, ROWS, error_ppm, mxfp4_error_ppm

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def _dsa(config: str) -> bool:
    return bool(json.loads((DATA / "hf" / config / "config.json").read_text()).get("index_topk"))


def test_each_band_is_its_paths_largest_published_miss() -> None:
    # per tensor from config.json, every row of the published table (known gaps included), split DSA / not
    plain = max(abs(error_ppm(r)) for r in ROWS if not _dsa(r.config))
    dsa = max(abs(error_ppm(r)) for r in ROWS if _dsa(r.config))
    assert (wb.PER_TENSOR.ppm, wb.PER_TENSOR_DSA.ppm) == (plain, dsa) == (8_023, 59_769)
    # MXFP4 experts: the gpt-oss rows (the 0.19 gpt-oss-20b TP2 known gap sets it)
    assert wb.MXFP4.ppm == max(abs(mxfp4_error_ppm(r)) for r in MXFP4_ROWS) == 21_974
    # parameter groups: DeepSeek-V4-Flash's two published vLLM load lines of a groups-only model. vLLM's figure
    # holds the checkpoint and what DeepseekV4Model.__init__ allocates (deepseek_v4.py: topk_indices_buffer
    # mnbt × 512 × 4 B, _mtp_hidden_buffer mnbt × 4 × 4,096 × 2 B), which kvplan now adds to an estimate
    # (kvplan.engines.vllm_dsv4_memory). Re-derived: the band was 41,513 ppm (−4.15 %, checkpoint only at TP8).
    # - vllm#41027, TP8, `vllm.entrypoints.openai.api_server` on H100 (mnbt default 8,192: engine/arg_utils.py,
    #   >= 70 GiB, API server): 'Model loading took 20.06 GiB' = 21,539,260,989 B vs 20,645,096,892 B
    #   + 16,777,216 + 268,435,456 = 20,930,309,564 B: −2.83 %;
    # - vllm#40821, TP2 EP2, --max-num-batched-tokens 32768: 74.85 GiB = 80,369,575,526 B vs 78,657,539,292 B
    #   + 67,108,864 + 1,073,741,824 = 79,798,389,980 B: −0.71 %.
    arch = load_model("deepseek-v4-flash")
    rows = ((Split.of(tp=8), 8_192, 21_539_260_989), (Split.of(tp=2, ep=2), 32_768, int(74.85 * 2**30)))
    misses = []
    for split, mnbt, pub in rows:
        est = arch.estimated_weights_per_gpu(split, engine="vllm") + sum(v4_load_buffers(arch, mnbt=mnbt).values())
        misses.append(round(Fraction(est - pub, pub) * 1_000_000))
    assert misses == [-28_272, -7_107]
    assert wb.GROUPS.ppm == max(abs(m) for m in misses) == 28_272


def _admit(*args: str) -> str:
    r = runner.invoke(app, ["admit", "--ctx", "128K", *args])
    assert r.exit_code in (0, 1), r.stdout[-600:]
    return r.stdout


@pytest.mark.parametrize(
    ("args", "headline"),
    [
        # the glm-5.3 preset's measured TP8 point (94.46 GiB): read, no tag
        ((), "ADMITTED: 1 × 131,072-token"),
        # weights set by the user: read
        (("--set", "weights_per_gpu=90GiB"), "ADMITTED: 1 × 131,072-token"),
        # a preset without a point: per tensor from its config (MLA, no indexer)
        (("--model", "deepseek-v3"), "ADMITTED (weights estimated ±0.8 %): 1 × 131,072-token"),
        # DSA per tensor: GLM-5's config (GLM-5.3's -5.98 % gap is the same path)
        (("--model", "glm-5"), "ADMITTED (weights estimated ±6.0 %): 1 × 131,072-token"),
        # a pool read from a log does not rest on the weights
        (("--model", "deepseek-v3", "--pool-tokens", "500000"), "ADMITTED: 1 × 131,072-token"),
    ],
)
def test_admit_headline_says_when_it_rests_on_an_estimate(args: tuple[str, ...], headline: str) -> None:
    out = _admit(*args)
    assert headline in " ".join(out.split()), out[:600]


def test_admit_rejection_says_it_too_and_json_carries_the_band() -> None:
    one_h100 = ("-d", "glm-5.3-8xh200-vllm", "--set", "gpu=h100", "--set", "tp=1", "--set", "gpus_per_node=1",
                "--set", "kv_cache_dtype=auto", "--set", "context_length=131072")  # fmt: skip
    out = " ".join(_admit("--model", "gpt-oss-120b", *one_h100).split())
    # the engine does not start at the point (3.83 GiB of KV memory, 5.07 GiB needed), but it would at the high end
    # of the band (issue 28): weights 69,077,887,616 B ±21,974 ppm (MXFP4) = 1,517,917,502 B and non-KV
    # 5,046,540,288 B ±815,178 ppm (engines/band.ERRORS[("vllm-v1", "0.21+", "*")]: vLLM 0.33 has no 0.21+ case on
    # Hopper/Blackwell, so the range on any GPU, three sources, the widest an RTX 4090 log at −81.5 %; ±540,432 ppm
    # before kthxo/distserving) = 4,113,828,618 B more for the pool: 4,116,748,058 + 1,517,917,502 + 4,113,828,618 =
    # 9,748,494,178 B = 9.08 GiB >= 5.07 GiB
    assert (
        "REJECTED at the point estimate; admitted at the high end of the band (weights estimated ±2.2 %): the engine "
        "does not start" in out
    )
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "gpt-oss-120b", *one_h100, "--format", "json"])
    assert json.loads(r.stdout)["weights_band_ppm"] == 21_974
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--format", "json"])
    assert json.loads(r.stdout)["weights_band_ppm"] is None  # measured


def test_fit_headline() -> None:
    r = runner.invoke(app, ["fit", "--model", "deepseek-v3", "--gpu", "h200", "--engine", "sglang", "--max-gpus",
                            "8", "--mtp", "off", "--require-ctx", "128K"])  # fmt: skip
    assert r.exit_code == 0, r.stdout[-600:]
    assert "FITS (weights estimated ±0.8 %): " in " ".join(r.stdout.split())


def test_gate_headline() -> None:
    req = Requirements(min_ctx_tokens=131_072)
    measured = check("a", make_plan(), req, None)
    estimated = check("b", make_plan(model="deepseek-v3"), req, None)
    dsa = check("c", make_plan(model="glm-5"), req, None)
    assert (measured.weights_band_ppm, estimated.weights_band_ppm, dsa.weights_band_ppm) == (None, 8_023, 59_769)
    assert gate_report((measured,)).verdict == "GATE PASSED: 1 config(s)"
    assert gate_report((estimated,)).verdict == "GATE PASSED (weights estimated ±0.8 %): 1 config(s)"
    both = gate_report((measured, estimated, dsa)).verdict
    assert both == "GATE PASSED (weights estimated in 2 of 3 configs, up to ±6.0 %): 3 config(s)"
