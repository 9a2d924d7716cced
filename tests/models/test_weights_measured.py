"""The weights estimate against the weights real engines loaded: vLLM's "Model loading took X GiB" (per GPU).

Logs: tests/data/logs/field/ (real vLLM 0.19.0 startups on H100 from the llm-d-planner accuracy sweep; provenance in
each file's header). Configs: tests/data/hf/ (verbatim published config.json). vLLM prints the figure with two
decimals (GiB), so an exact estimate lands within 0.005 GiB of it; every case below does but Mixtral (0.006 GiB,
0.013 %: under a MiB of something vLLM's fused MoE keeps that the checkpoint has not).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.arch import Split
from kvplan.models.weights import param_groups_from_hf

DATA = Path(__file__).parents[1] / "data"
LOADED = re.compile(r"Model loading took ([0-9.]+) GiB")

# RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic: llm-compressor's FP8_DYNAMIC scheme (fp8 weights per output
# channel, dynamic per-token activations, lm_head left in bf16) on Llama-3.3-70B, whose shapes are Llama-3.1-70B's
# (the log header's model_config). Written here from the scheme's definition, not copied from the checkpoint.
FP8_DYNAMIC: dict[str, Any] = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
        }
    },
    "ignore": ["lm_head"],
}

CASES = [
    # (log, config, tp, quantization_config, estimate in B)
    # Llama-3.1-8B bf16, 8,030,261,248 params (the published count) × 2 B = 16,060,522,496 B, + rotary cache
    # 131,072 × 128 × 2 = 33,554,432 → TP1 16,094,076,928 B = 14.9888 GiB (logged 14.99);
    # TP2: linear, embeddings 16,059,990,016 / 2 = 8,029,995,008 + norms 532,480 + rotary 33,554,432 = 8,064,081,920
    # (7.5103 GiB, logged 7.51); TP4: 4,014,997,504 + 532,480 + 33,554,432 = 4,049,084,416 B (3.7710, logged 3.77)
    ("vllm-llama-3.1-8b-h100-llmd-planner-tp1.log", "llama-3.1-8b", 1, None, 16_094_076_928),
    ("vllm-llama-3.1-8b-h100-llmd-planner-tp2.log", "llama-3.1-8b", 2, None, 8_064_081_920),
    ("vllm-llama-3.1-8b-h100-llmd-planner-tp4.log", "llama-3.1-8b", 4, None, 4_049_084_416),
    # Qwen3-8B: 8,190,735,360 params × 2 = 16,381,470,720 + rotary 40,960 × 128 × 2 = 10,485,760
    # → 16,391,956,480 B = 15.2662 GiB (logged 15.27)
    ("vllm-qwen3-8b-h100-llmd-planner-tp1.log", "qwen3-8b", 1, None, 16_391_956_480),
    # Qwen3-30B-A3B: 30,532,122,624 params × 2 = 61,064,245,248 + rotary 10,485,760 → 61,074,731,008 B
    # = 56.8803 GiB (logged 56.88)
    ("vllm-qwen3-30b-a3b-h100-llmd-planner-tp1.log", "qwen3-30b-a3b", 1, None, 61_074_731_008),
    # Mixtral-8x7B TP2: (93,405,585,408 B - routers 2,097,152 - norms 532,480) / 2 + routers and norms whole
    # + rotary 32,768 × 128 × 2 = 8,388,608 → 46,712,496,128 B = 43.5044 GiB (logged 43.51)
    ("vllm-mixtral-8x7b-h100-llmd-planner-tp2.log", "mixtral-8x7b", 2, None, 46_712_496_128),
    # Llama-3.3-70B fp8 per channel, TP2: q/o 10,737,418,240 values × 1 B + 1,310,720 rows × 4 B, / 2 =
    # 5,371,330,560; k/v (1,342,177,280 + 163,840 × 4) / 2 = 671,416,320; MLP (56,371,445,760 + 5,242,880 × 4)
    # / 2 = 28,196,208,640; embeddings + lm_head bf16 4,202,692,608 / 2 = 2,101,346,304; norms 2,637,824;
    # rotary 33,554,432 → 36,376,494,080 B = 33.8783 GiB (logged 33.88); TP4: 2,685,665,280 + 335,708,160
    # + 14,098,104,320 + 1,050,673,152 + 2,637,824 + 33,554,432 = 18,206,343,168 B = 16.9560 GiB (logged 16.96)
    ("vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp2.log", "llama-3.1-70b", 2, FP8_DYNAMIC, 36_376_494_080),
    ("vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp4.log", "llama-3.1-70b", 4, FP8_DYNAMIC, 18_206_343_168),
]


@pytest.mark.parametrize(("log", "model", "tp", "quant", "expected"), CASES, ids=[c[0] for c in CASES])
def test_estimate_matches_the_weights_vllm_loaded(
    log: str, model: str, tp: int, quant: dict[str, Any] | None, expected: int
) -> None:
    config = json.loads((DATA / "hf" / model / "config.json").read_text())
    if quant is not None:
        config["quantization_config"] = quant
    w = param_groups_from_hf(config, model)
    estimate = sum(g.bytes_per_gpu(Split.of(tp=tp)) for g in w.groups)
    assert estimate == expected
    found = LOADED.search((DATA / "logs" / "field" / log).read_text().split("\n\n", 1)[1])
    assert found is not None, "the log body has no 'Model loading took' line"
    logged_gib = float(found.group(1))
    assert abs(estimate / 2**30 - logged_gib) < 0.0075, (estimate / 2**30, logged_gib)


def test_published_parameter_counts() -> None:
    """Parameter counts equal the published ones (norms and biases included, rotary cache not a parameter)."""
    counts = {
        name: param_groups_from_hf(json.loads((DATA / "hf" / name / "config.json").read_text()), name).total_params
        for name in ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b")
    }
    # Llama-3.1-8B: 32 × (q/o 33,554,432 + k/v 8,388,608 + MLP 176,160,768 + norms 8,192) + 2 × 128,256 × 4096
    # + 4096 = 8,030,261,248 (Hugging Face's count of meta-llama/Llama-3.1-8B); 70B: 70,553,706,496;
    # Mixtral-8x7B: 32 × (41,943,040 + 8 × 3 × 4096 × 14,336 + router 32,768 + norms 8,192) + 2 × 32,000 × 4096
    # + 4096 = 46,702,792,704
    assert counts == {"llama-3.1-8b": 8_030_261_248, "llama-3.1-70b": 70_553_706_496, "mixtral-8x7b": 46_702_792_704}
