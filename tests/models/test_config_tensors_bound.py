"""Bounded work for a config.json (found by the fuzz suite, issue 25 item 7): a per-tensor layout is built module
by module, so a GLM-5-shaped config with 1,000 layers (1,001 × 258 × 3 ≈ 775,000 modules) took 18 s to load. Past
limits.MAX_CONFIG_MODULES (100,000) the config's weights are its parameter groups, the same estimate kvplan uses
for any config it does not lay out per tensor; every real config stays laid out (Kimi-K2, the largest, ~71,000)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan import limits
from kvplan.models.config_tensors import _expert_modules
from kvplan.models.from_hf import load_model
from tests.work import calls

HF = Path(__file__).resolve().parents[1] / "data" / "hf"


def test_real_configs_stay_under_the_bound() -> None:
    for name in ("glm-5.3", "deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "deepseek-v3.2"):
        c = json.loads((HF / name / "config.json").read_text())
        # e.g. kimi-k2: 61 layers × (384 routed + 1 shared + 1 dense) × 3 = 70,638 modules
        assert _expert_modules(c, c["num_hidden_layers"]) <= limits.MAX_CONFIG_MODULES, name
        assert "per tensor from config.json" in load_model(str(HF / name)).weights_summary, name


def test_a_thousand_layer_config_loads_with_bounded_work(tmp_path: Path) -> None:
    c = json.loads((HF / "glm-5.3" / "config.json").read_text())
    c["num_hidden_layers"] = 1000
    c.pop("mlp_layer_types", None)
    c.pop("indexer_types", None)
    (tmp_path / "config.json").write_text(json.dumps(c))
    # laid out per tensor it makes a call per module at least (1,001 × 258 × 3 ≈ 775,000; measured 5.9 M calls
    # for 100 layers); the parameter groups cost a few calls per layer (25,325 measured)
    arch, made = calls(lambda: load_model(str(tmp_path)))
    assert made < limits.MAX_CONFIG_MODULES, f"{made:,} calls"
    assert "per tensor" not in arch.weights_summary and arch.param_groups
