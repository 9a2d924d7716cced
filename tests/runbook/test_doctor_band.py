"""The doctor and the band (issue 28 item 3): a log whose pool lies inside the band of a config-alone plan is within
the expected error of that plan, not a MISMATCH explained by a fitted cause; a cause the log's own figures name
still wins, and a log outside the band is still a mismatch."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.runbook.doctor import MATCH, MISMATCH
from tests.runbook.conftest import run_doctor

VLLM = "glm-5.3-8xh200-vllm"
SETS = ("context_length=1M",)  # the recipe's 1M (tests/runbook/test_doctor.py::test_vllm_null_block)
# vLLM 0.33.0, GLM-5.3 on 8×H200, no memory line in the log: the config's 27,852,520,897 B // 3,452,160 B a block =
# 8,068 blocks = 516,352 tokens. Its one estimate is the non-KV memory, 6,364,856,320 B ±815,178 ppm (engines/band
# ERRORS[("vllm-v1", "0.21+", "*")]: no vLLM 0.21+ case on Hopper/Blackwell, three sources in 0.21+ (a vLLM 0.26.0
# A40 log, kthxo/distserving's vLLM 0.24.0 RTX 4090 and 5090 logs, aws-samples' 4 × L40S), the widest the RTX 4090
# at −81.5 %; ±540,432 ppm before kthxo/distserving) = ±5,188,490,845 B: 22,664,030,052 // 3,452,160 = 6,565 blocks =
# 420,160 tokens;
# 33,041,011,742 // 3,452,160 = 9,571 blocks = 612,544 tokens.
BAND = (420_160, 612_544)


def _log(tokens: int) -> str:
    return f"(EngineCore_DP0 pid=2) INFO 03-01 12:00:01 [k.py:1] GPU KV cache size: {tokens:,} tokens\n"


def test_a_log_inside_the_band_is_within_the_expected_error() -> None:
    d = run_doctor(_log(515_520), deploy=VLLM, sets=SETS)  # 8,055 blocks: 13 short of the point, inside the band
    c = d.comparison
    assert c is not None and not c.within and c.band is not None and c.band[:2] == BAND and c.in_band
    assert (d.status, d.headline.kind, d.problems, d.causes) == (MATCH, "band", (), ())


def test_the_doctor_says_so(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(_log(515_520), encoding="utf-8")
    r = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"}).invoke(
        app, ["doctor", "--log", str(log), "--deploy", VLLM, "--set", "context_length=1M"]
    )
    flat = " ".join(r.stdout.split())
    assert r.exit_code == 0, flat[:800]
    assert (
        "WITHIN THE EXPECTED ERROR of a config-alone plan (band 420,160 – 612,544 tokens: non-KV memory estimated "
        "±81.5 %): the log has 515,520 tokens, the config's point 516,352 tokens"
    ) in flat


def test_a_named_cause_inside_the_band_is_still_named() -> None:
    # one block short (516,288): vLLM's null block, a cause the count itself makes, not fitted
    d = run_doctor(_log(516_288), deploy=VLLM, sets=SETS)
    assert d.status == MISMATCH and d.headline.kind == "cause" and d.causes[0].key == "page"


def test_a_log_outside_the_band_is_a_mismatch() -> None:
    d = run_doctor(_log(400_000), deploy=VLLM, sets=SETS)
    c = d.comparison
    assert c is not None and not c.in_band and d.status == MISMATCH and "pool" in d.problems
