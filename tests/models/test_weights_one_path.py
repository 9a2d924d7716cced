"""One path for weights per GPU: the planner takes the published-table figure (config-derived tensors + the engine's
load-time additions) when there is no measured point, and says where its figure came from."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

sys.path.insert(0, str(Path(__file__).parent))
from test_weights_published import ROWS, Published, engine_of, predicted_bytes

HF = Path(__file__).parents[1] / "data" / "hf"
runner = CliRunner()


def weights_knob(*sets: str, engine: str = "vllm") -> dict[str, Any]:
    preset = "glm-5.3-8xh200-vllm" if engine == "vllm" else "glm-5.3-8xh200-sglang"
    args = ["deployments", "show", preset, "--format", "json"]
    for s in sets:
        args += ["--set", s]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.stderr
    knobs = json.loads(r.stdout)["plan"]["knobs"]
    knob: dict[str, Any] = next(k for k in knobs if k["name"] == "weights_per_gpu")
    return knob


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if not r.extra and not r.with_mtp and r.config != "glm-5.3"] + [ROWS[-1]],
    ids=lambda r: f"{r.label} tp{r.tp}",
)
def test_planner_takes_the_published_table_figure(row: Published) -> None:
    # the same bytes the table predicts (config_tensors.config_tensors + shard + additions.engine_additions)
    sets = (f"model={HF / row.config / 'config.json'}", f"tp={row.tp}", *((f"ep={row.ep}",) if row.ep > 1 else ()))
    knob = weights_knob(*sets, engine=engine_of(row))
    assert knob["value"] == predicted_bytes(row)
    assert "per tensor from config.json (" in knob["origin"]
    assert "load-time additions" in knob["origin"]


def test_glm53_config_json_is_95_363_497_344_bytes() -> None:
    # regression: before one path the planner took the parameter groups for a DSA config.json, 93,470,472,204 B,
    # 1,893,025,140 B under the table's per-tensor figure (test_weights_published.test_known_gaps_pinned)
    knob = weights_knob(f"model={HF / 'glm-5.3' / 'config.json'}")
    assert knob["value"] == 95_363_497_344


def test_each_source_is_said() -> None:
    assert "measured (tp 8, attention 8, experts 8)" in weights_knob()["origin"]  # the glm-5.3 preset's point
    # a preset without a point takes its config.json's path (tests below); a config without a per-tensor layout
    # keeps the parameter groups
    assert "per tensor from config.json" in weights_knob("model=deepseek-v3")["origin"]
    assert "parameter groups" in weights_knob("model=deepseek-v4-pro")["origin"]
    assert "per tensor from config.json" in weights_knob(f"model={HF / 'deepseek-v3' / 'config.json'}")["origin"]


PRESETS_WITH_CONFIG = ("deepseek-v3", "deepseek-v3.2", "glm-5", "glm-5.3", "kimi-k2", "glm-4.5-air", "gpt-oss-120b",
                       "llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-235b-a22b",
                       "deepseek-v4-flash")  # fmt: skip


@pytest.mark.parametrize("preset", PRESETS_WITH_CONFIG)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_preset_weighs_what_its_config_json_weighs(preset: str, engine: str) -> None:
    # issue 23 item 4: one model, one weight. Each preset's config section copies its tests/data/hf config.json
    # (the preset's 'source'); both now take snapshot.with_checkpoint's per-tensor path (+ the engine's load-time
    # additions), or both the parameter groups. Compared on the estimate itself (a measured point would hide it).
    from kvplan.models.arch import Split
    from kvplan.models.from_hf import load_model

    a, b = load_model(preset), load_model(str(HF / preset / "config.json"))
    for tp in (1, 8):
        split = Split.of(tp=tp)
        assert a.estimated_weights_per_gpu(split, engine=engine) == b.estimated_weights_per_gpu(split, engine=engine)


def test_deepseek_v3_preset_is_the_published_table_figure() -> None:
    # The preset planned 84,329,819,862 B (78.54 GiB) at TP8 on vLLM from the MLA parameter groups (no norms, no
    # rotary cache, no absorbed W_UV/W_UK_T); its config.json 85,416,954,912 B (79.55 GiB): the table's DeepSeek-R1
    # row (same shapes; test_weights_published.test_deepseek_r1_fp8_prediction_exact derives it) against vLLM
    # 0.11.2's published 79.7390 GiB (-0.24 %). Now the preset is that figure.
    row = next(r for r in ROWS if r.config == "deepseek-r1" and r.published_gib == "79.7390")
    assert predicted_bytes(row) == 85_416_954_912
    assert weights_knob("model=deepseek-v3")["value"] == 85_416_954_912
