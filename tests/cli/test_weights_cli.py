"""The weights line through the CLI: the checkpoint's quantization is said, an unmodelled one is an ASSUMPTION.

Issue 11: a Kimi-K2-Thinking config (int4 experts) was estimated as bf16, "the engine does not start" on 8×H200;
an unknown quantization_config must be said on the weights line, never silently bf16.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app

HF = Path(__file__).parents[1] / "data" / "hf"
runner = CliRunner(env={"KVPLAN_FORMAT": None})

KIMI_K2_THINKING_QUANT = {  # see test_quant_schemes.test_kimi_k2_thinking_int4_experts_fit_tp8_on_h200
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"group_size": 32, "num_bits": 4, "strategy": "group", "symmetric": True, "type": "int"},
        }
    },
    "format": "pack-quantized",
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
    "quant_method": "compressed-tensors",
}


def weights_knob(tmp_path: Path, model: str, quant: dict[str, Any], *args: str) -> tuple[int, dict[str, Any]]:
    config = json.loads((HF / model / "config.json").read_text())
    config["quantization_config"] = quant
    path = tmp_path / model / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    result = runner.invoke(app, ["admit", "--ctx", "128K", "-m", str(path), "--format", "json", *args])
    knobs = json.loads(result.stdout)["plan"]["knobs"]
    return result.exit_code, next(k for k in knobs if k["name"] == "weights_per_gpu")


def test_unknown_quant_method_is_an_assumption_on_the_weights_line(tmp_path: Path) -> None:
    code, knob = weights_knob(
        tmp_path, "llama-3.1-70b", {"quant_method": "bitsandbytes", "load_in_4bit": True}, "--set", "tp=8"
    )
    assert code == 0
    assert "ASSUMPTION: assumed bf16: quant_method 'bitsandbytes' is not modelled" in knob["origin"]
    # counted as bf16: 70,552,387,584 linear + embedding params × 2 B / 8 + norms 1,318,912 × 2 B + rotary cache
    # 131,072 × 128 × 2 B = 17,638,096,896 + 2,637,824 + 33,554,432 = 17,674,289,152 B
    assert knob["value"] == 17_674_289_152


def test_kimi_k2_thinking_is_planned_with_its_int4_experts(tmp_path: Path) -> None:
    code, knob = weights_knob(tmp_path, "kimi-k2", KIMI_K2_THINKING_QUANT, "--set", "tp=8", "--set", "gpu=h200")
    # 74,564,419,584 B a GPU at TP8 (derived in test_quant_schemes): it starts, and 128K is admitted
    assert code == 0
    assert knob["value"] == 74_564_419_584
    assert "compressed-tensors: int4 group 32 (bf16 scales); bf16 elsewhere" in knob["origin"]
    assert "ASSUMPTION" not in knob["origin"]
