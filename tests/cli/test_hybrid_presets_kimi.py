"""``kvplan admit --ctx 128K`` with the Kimi presets on both 8×H200 deployments: a verdict (exit 0 or 1), never
"give weights_per_gpu" (exit 2), and the per-pool figures the engines' arithmetic gives.

The GLM-5.3 presets' model knobs are given with --set (PRESET_KNOBS; since issue 23 they do not follow --model).
Kimi-Linear-48B-A3B at tp 8 (the presets' kv_cache_dtype fp8): 7 MLA layers of 576 B a token (kv_lora 512 + rope
64, one byte each) and 20 KDA layers whose state is per request. KDA state of one layer on one of 8 ranks (SGLang
``KimiLinearStateShape``, vLLM ``MambaStateShapeCalculator.kda_state_shape``): 32 / 8 = 4 heads, conv q, k, v
3 × (4096 / 8) × (kernel 4 − 1) × 2 B (bf16) = 9,216 B + recurrent 4 × 128 × 128 × 4 B (fp32) = 262,144 B:
271,360 B a layer, 5,427,200 B for the 20 layers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None})
K3 = Path(__file__).parents[1] / "data" / "hf" / "kimi-k3" / "config.json"
SGLANG, VLLM = "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"


PRESET_KNOBS = {
    SGLANG: ("--set", "kv_cache_dtype=fp8_e4m3", "--set", "page_size=64"),
    VLLM: ("--set", "kv_cache_dtype=fp8", "--set", "context_length=524288"),
}
"""What each GLM-5.3 preset sets for GLM-5.3 (kvplan/configs/deployments/) and the figures below assume."""


def admit(*args: str) -> Result:
    knobs = next((k for name, k in PRESET_KNOBS.items() if name in args), ())
    return runner.invoke(app, ["admit", "--ctx", "128K", *args, *knobs])


def admit_json(*args: str) -> dict[str, Any]:
    result = admit(*args, "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize("deploy", [SGLANG, VLLM])
def test_kimi_linear_admitted_on_both_engines(deploy: str) -> None:
    result = admit("--model", "kimi-linear-48b-a3b", "-d", deploy)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "ADMITTED" in result.stdout
    # weights from the parameter groups, not a weights_per_gpu the user must give (tests/models/
    # test_params_kimi_linear.py: 12,344,652,448 B at tp 8)
    assert "49,122,681,728 parameters" in result.stdout


def test_kimi_linear_sglang_pools() -> None:
    data = admit_json("--model", "kimi-linear-48b-a3b", "-d", SGLANG)
    pools = {p["pool"]: p for p in data["need_by_pool"]}
    # token pages: 131,072 / page 64 = 2,048 pages × 64 tokens × 7 layers × 576 B = 528,482,304 B
    assert pools["MLA (7 layers)"]["units"] == 2048
    assert pools["MLA (7 layers)"]["bytes"] == 2048 * 64 * 7 * 576 == 528_482_304
    # state slots: SGLang reserves 3 + 2 extra-buffer tracking slots a running request (radix cache and overlap
    # scheduler on, KimiLinearForCausalLM in _MAMBA_EXTRA_BUFFER_ARCHS): 5 × 5,427,200 B
    state = pools["mamba state (20 layers)"]
    assert (state["unit"], state["units"], state["bytes"]) == ("slot", 5, 5 * 5_427_200)


def test_kimi_linear_vllm_block_pool() -> None:
    data = admit_json("--model", "kimi-linear-48b-a3b", "-d", VLLM)
    (pool,) = data["need_by_pool"]
    # vLLM unifies page sizes: the attention block grows until its page (block × 576 B) covers the KDA state page
    # (271,360 B): 512 tokens (294,912 B); KV cache groups of 7 layers (the MLA count): 1 MLA group and the 20 KDA
    # layers in 3 groups (21 slots, 1 padding); one block holds a page of each of 7 layers: 7 × 294,912 =
    # 2,064,384 B. A 131,072-token request: 131,072 / 512 = 256 MLA blocks + 2 blocks per KDA group in
    # mamba_cache_mode 'align' × 3 groups = 6.
    kinds = {k["kind"]: k for k in pool["by_kind"]}
    assert kinds["MLA"]["units"] == 256
    assert kinds["KDA state"]["units"] == 6
    assert kinds["KDA state"]["bytes"] == 6 * 7 * 294_912 == 12_386_304
    assert pool["units"] == 262


@pytest.mark.parametrize("deploy", [SGLANG, VLLM])
def test_kimi_k3_does_not_load_on_eight_h200(deploy: str) -> None:
    """190.97 GiB of weights a GPU at tp 8 (tests/models/test_params_kimi_linear.py) > an H200: a verdict, exit 1;
    vLLM's recipe likewise runs K3 on H200 only from 16 GPUs."""
    for model in ("kimi-k3", str(K3)):
        result = admit("--model", model, "-d", deploy)
        assert result.exit_code == 1, result.stdout + result.stderr
        # K3's weights are parameter groups (no per-tensor layout): the verdict says it rests on that estimate,
        # ±2.8 % (kvplan.models.weights_band.GROUPS, re-derived with DeepSeek-V4's load buffers counted; ±4.2 %
        # before); 190.97 GiB is 33 % over an H200, far outside it
        said = " ".join(result.stdout.split())
        assert "REJECTED (weights estimated ±2.8 %): the engine does not start — weights 190.97 GiB" in said
        assert "(205,053,641,592 B)" in said


@pytest.mark.parametrize("deploy", [SGLANG, VLLM])
def test_kimi_k3_on_sixteen_h200(deploy: str) -> None:
    result = admit("--model", "kimi-k3", "-d", deploy, "--set", "tp=16", "--set", "nodes=2")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "ADMITTED" in result.stdout


def test_kimi_k3_sglang_pools_at_tp16() -> None:
    data = admit_json("--model", "kimi-k3", "-d", SGLANG, "--set", "tp=16", "--set", "nodes=2")
    pools = {p["pool"]: p for p in data["need_by_pool"]}
    # 24 MLA layers × 576 B (fp8) a token, 2,048 pages of 64 for 131,072 tokens
    assert pools["MLA (24 layers)"]["bytes"] == 2048 * 64 * 24 * 576 == 1_811_939_328
    # KDA state a layer on one of 16 ranks: 96 / 16 = 6 heads; conv 3 × (12,288 / 16) × 3 × 2 B = 13,824 B +
    # recurrent 6 × 128 × 128 × 4 B = 393,216 B; 69 layers, 5 slots a request
    state = pools["mamba state (69 layers)"]
    assert (state["units"], state["bytes"]) == (5, 5 * 69 * (13_824 + 393_216)) == (5, 140_428_800)
