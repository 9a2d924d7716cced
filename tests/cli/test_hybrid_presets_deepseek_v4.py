"""``kvplan admit --ctx 128K`` on the DeepSeek-V4 presets, on both default 8 × H200 deployments (issue 13 "Done
when"): a verdict (exit 0 or 1), never exit 2 for missing weights, now that kvplan.models.params_deepseek_v4 counts
the checkpoint; V4-Flash keeps its measured TP8 point, V4-Pro (no published load line) takes the layout's
109,448,431,916 B a GPU at TP8 (tests/models/test_params_deepseek_v4.py derives it).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

RUNNER = CliRunner(env={"KVPLAN_FORMAT": None})
DEPLOYS = ("glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm")
PRO_TP8 = 109_448_431_916
V4_LOAD_BUFFERS = {"deepseek-v4-flash": 16_777_216 + 268_435_456, "deepseek-v4-pro": 33_554_432 + 469_762_048}
"""What vLLM's DeepseekV4Model.__init__ allocates beside the checkpoint (deepseek_v4.py; kvplan adds it to an
estimate on vLLM only, kvplan.engines.vllm_dsv4_memory), at the H200 vLLM deployment's max_num_batched_tokens
8,192 (engine/arg_utils.py default, >= 70 GiB, API server): topk_indices_buffer 8,192 × index_topk × 4 B (Flash
512, Pro 1,024) + _mtp_hidden_buffer 8,192 × hc_mult 4 × hidden × 2 B (Flash 4,096, Pro 7,168)."""


def _admit(model: str, deploy: str, *sets: str) -> tuple[int, dict[str, object]]:
    args = ["admit", "--ctx", "128K", "--model", model, "-d", deploy, "--format", "json"]
    for s in sets:
        args += ["--set", s]
    r = RUNNER.invoke(app, args)
    assert r.exit_code in (0, 1), r.output
    data: dict[str, object] = json.loads(r.output)
    return r.exit_code, data


def _chain(data: dict[str, object], label: str) -> int:
    plan = data["plan"]
    assert isinstance(plan, dict)
    (step,) = [s for s in plan["chain"] if s["label"] == label]
    value: int = step["bytes"]
    return value


@pytest.mark.parametrize("deploy", DEPLOYS)
@pytest.mark.parametrize("model", ["deepseek-v4-flash", "deepseek-v4-pro"])
def test_admit_128k_gives_a_verdict(model: str, deploy: str) -> None:
    code, data = _admit(model, deploy)
    assert data["admitted"] is (code == 0)
    weights = _chain(data, "weights per GPU")
    # Flash: the measured point int(20.06 × 2^30); Pro: the parameter layout at tp 8 (+ vLLM's load buffers)
    vllm = V4_LOAD_BUFFERS[model] if deploy.endswith("vllm") else 0
    assert weights == (21_539_260_989 if model == "deepseek-v4-flash" else PRO_TP8 + vllm)


def test_pro_on_sglang_pools_golden() -> None:
    """SGLang 0.5.23 DSV4PoolConfigurator (kvplan/engines/sglang_hybrid.py, goldens of tests/engines/test_sglang_v4.py
    for V4-Pro: bytes_per_full_token 10,115.25, C128 state 4,209,508,352 B), with pre-load free 143,771 MiB and
    mem_fraction_static 0.893 (SGLang's H200 default) and the layout's weights W = 109,448,431,916 B:
    rest = (143,771 MiB − W) / GiB − 143,771 MiB / GiB × 0.107 = 23.44662549880... GiB -> available
    int(rest × 2^30) = 25,175,622,429 B; full = int((25,175,622,429 − 4,209,508,352) / 10,115.25)
    = int(20,966,114,077 / 10,115.25) = int(2,072,723.27) = 2,072,723 // 256 × 256 = 2,072,576 tokens (8,096 pages);
    SWA = int(207,257.6) = 207,257 // 256 × 256 = 207,104 (809 pages). 128K needs 512 full pages, 3 SWA pages
    (a 128-token window: 1 page + 2), 1 C128 ring: 8,096 // 512 = 15, 809 // 3 = 269, 256 rings: 15 at once,
    bound by the compressed-KV token pages."""
    code, data = _admit("deepseek-v4-pro", "glm-5.3-8xh200-sglang", "pre_load_free=143771MiB")
    assert code == 0
    assert _chain(data, "weights per GPU") == PRO_TP8
    assert _chain(data, "available for the KV pool") == 25_175_622_429
    pools = {c["name"]: (c["have"], c["need"]) for c in data["checks"]}  # type: ignore[union-attr]
    assert pools["pool: compressed KV (C4 30 layers with the indexer, C128 31 layers)"] == (8_096, 512)
    assert pools["pool: sliding window (61 layers, + C4 compress state)"] == (809, 3)
    assert pools["pool: C128 compress state (31 layers)"] == (256, 1)
    assert data["max_concurrent"] == 15


def test_pro_on_vllm_weights_flow_into_the_block_pool() -> None:
    """vLLM 0.33.0: the layout's weights enter the chain one for one, with the load buffers vLLM's model code adds
    (V4_LOAD_BUFFERS, 503,316,480 B for Pro; a set figure is "Model loading took" and holds them). Against
    weights_per_gpu = 100 GiB (107,374,182,400 B) the available KV memory is W + 503,316,480 − 100 GiB =
    2,577,565,996 B smaller (2,074,249,516 B before the buffers were counted); blocks = available //
    1,435,968 B (V4-Pro's packed block, tests/engines/test_vllm_v4.py); a 128K request takes 7,194 blocks, and the
    null block is not usable: fits = (blocks − 1) // 7,194."""
    _, est = _admit("deepseek-v4-pro", "glm-5.3-8xh200-vllm")
    _, given = _admit("deepseek-v4-pro", "glm-5.3-8xh200-vllm", "weights_per_gpu=100GiB")
    plan_est, plan_given = est["plan"], given["plan"]
    assert isinstance(plan_est, dict) and isinstance(plan_given, dict)
    buffers = V4_LOAD_BUFFERS["deepseek-v4-pro"]
    assert plan_given["available_bytes"] - plan_est["available_bytes"] == PRO_TP8 + buffers - 100 * 2**30
    assert PRO_TP8 + buffers - 100 * 2**30 == 2_577_565_996
    blocks = plan_est["extras"]["num_blocks"]
    assert blocks == plan_est["available_bytes"] // 1_435_968
    assert est["max_concurrent"] == (blocks - 1) // 7_194


@pytest.mark.parametrize("deploy", DEPLOYS)
def test_flash_plans_at_tp4(deploy: str) -> None:
    # no measured point at tp 4: the layout's 39,982,577,692 B a GPU (tests/models/test_params_deepseek_v4.py), on
    # vLLM + its load buffers 285,212,672 B = 40,267,790,364 B
    code, data = _admit("deepseek-v4-flash", deploy, "tp=4")
    vllm = V4_LOAD_BUFFERS["deepseek-v4-flash"] if deploy.endswith("vllm") else 0
    assert _chain(data, "weights per GPU") == 39_982_577_692 + vllm
    assert data["admitted"] is (code == 0)
