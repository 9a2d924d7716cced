"""``kvplan admit --model tests/data/hf/deepseek-vl2/config.json`` on both engines' default deployment (H200 × 8,
TP8, bf16 KV): the pools derived from the engines' formulas (kvplan/engines/sglang.py and vllm.py docstrings), with
the language model read from ``language_config`` (tests/models/test_deepseek_vl2.py derives its shapes and weights).

A token holds one MLA latent a layer, replicated over TP: (512 + 64) × 2 B × 30 layers = 34,560 B. Weights a GPU
(TP8; the vision tower and projector replicated, 446,585,920 params): 2 B × (956,497,920 + 94,371,840 +
24,631,050,240 + 684,195,840 + 661,913,600) / 8 + 2 B × (5,345,280 router + 446,585,920) = 7,660,869,760 B; + the
rotary cache 4,096 × 64 × 2 B = 524,288 on both engines, + SGLang's absorbed w_kc / w_vc 31,457,280.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app
from tests.cli.admit_json import admit_json, check_named

runner = CliRunner(env={"KVPLAN_FORMAT": None})
GiB, MiB = 1 << 30, 1 << 20
MODEL = str(Path(__file__).resolve().parents[1] / "data" / "hf" / "deepseek-vl2" / "config.json")
CELL = 30 * (512 + 64) * 2  # 34,560 B a token and rank
W = 7_660_869_760


def _admit(ctx: str, *args: str, code: int = 0) -> dict[str, Any]:
    return admit_json(MODEL, ctx, *args, code=code)


_check = check_named


def test_sglang_pool_with_the_vlm_mem_fraction() -> None:
    # mem_fraction_static: round((143,771 − 16,384 reserved) / 143,771, 3) = 0.886 (reserved at TP8, MLA on
    # Hopper: 512 + 8,192 × 1.5 + 1,024 + decode graphs 512 × 2 + MLA prefill graph 1,536 MiB), × 0.95 for the
    # VLM (SGLang lists DeepseekVL2ForCausalLM among its multimodal archs; adjust_mem_fraction_for_vlm's default
    # tower, ratio 1): 0.8417 (0.886 without the factor: 3,642,243 rows)
    mfs = 0.886 * 0.95
    pre = 143_771 * MiB
    w = W + 524_288 + 31_457_280
    available = int(((pre - w) / GiB - pre / GiB * (1 - mfs)) * GiB)
    rows = available // CELL  # page 1 (fa3)
    assert rows == 3_449_001
    data = _admit("4K", "--set", "pre_load_free=143771MiB")
    plan = data["plan"]
    assert plan["cell"]["main_bytes"] == CELL and plan["page_tokens"] == 1
    assert plan["available_bytes"] == available
    assert plan["logged_tokens"] == rows  # max_total_num_tokens
    assert plan["context_len"] == 4_096  # language_config max_position_embeddings


def test_vllm_pool_golden() -> None:
    data = _admit("4K", "--set", "engine=vllm")
    plan = data["plan"]
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W + 524_288  # bf16 kv_b_proj: no absorbed copy is kept apart
    available = (
        chain["requested"] - chain["weights per GPU"] - chain["torch peak (profiling run)"]
        - chain["non-torch growth"] - chain["CUDA-graph estimate"]
    )  # fmt: skip
    assert plan["available_bytes"] == available
    # one MLAAttentionSpec group of 30 layers, block 16: 16 × 34,560 = 552,960 B a block
    assert (plan["page_tokens"], plan["extras"]["bytes_per_block"]) == (16, 16 * CELL)
    num_blocks = available // (16 * CELL)
    assert plan["extras"]["num_blocks"] == num_blocks
    # 4,096 tokens = 256 blocks; block 0 is the null block
    pool = _check(data, "pool pages")
    assert (pool["need"], pool["have"]) == (256, num_blocks - 1)
    assert data["max_concurrent"] == (num_blocks - 1) // 256


def test_a_context_past_the_language_models_positions_is_rejected_on_both_engines() -> None:
    # 8,192 tokens against max_position_embeddings 4,096 of language_config (vLLM max_model_len and SGLang
    # context_len both read the text config's; the top level of config.json has none)
    for engine in ("sglang", "vllm"):
        data = _admit("8K", "--set", f"engine={engine}", code=1)
        check = _check(data, "context length")
        assert (check["need"], check["have"]) == (8_192, 4_096)


def test_the_preset_plans_as_its_config_json() -> None:
    # kvplan/configs/models/deepseek-vl2.yaml copies the fields kvplan reads from the fixture: the same pools
    for engine in ("sglang", "vllm"):
        r = runner.invoke(app, ["admit", "--ctx", "4K", "--model", "deepseek-vl2", "--set", f"engine={engine}",
                                "--format", "json"])  # fmt: skip
        assert r.exit_code == 0, r.stdout[-400:]
        preset = json.loads(r.stdout)["plan"]
        config = _admit("4K", "--set", f"engine={engine}")["plan"]
        assert (preset["available_bytes"], preset["logged_tokens"]) == (
            config["available_bytes"],
            config["logged_tokens"],
        )
        assert preset["cell"]["main_bytes"] == CELL
