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
    # the same bytes the table predicts (checkpoint.config_tensors + shard + additions.engine_additions)
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
    assert "parameter groups" in weights_knob("model=deepseek-v3")["origin"]  # a preset without a point
    assert "per tensor from config.json" in weights_knob(f"model={HF / 'deepseek-v3' / 'config.json'}")["origin"]
